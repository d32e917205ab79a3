// RUN: weft-opt %s -split-input-file --weft-autodiff="function=loss" | FileCheck %s

// The gradient function replays the forward ops, then applies each VJP in
// reverse: tanh's 1 - y^2, the linear's transposed products and bias sum.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: -> (tensor<f32>, tensor<3x4xf32>, tensor<4xf32>)
// CHECK-SAME: weft.outputs = ["loss", "grad:w", "grad:b"]
// CHECK: %[[H:.*]] = weft.linear
// CHECK: %[[Y:.*]] = weft.tanh %[[H]]
// CHECK: %[[YY:.*]] = weft.mul %[[Y]], %[[Y]]
// CHECK: %[[DH:.*]] = weft.mul %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK: %[[XT:.*]] = weft.transpose %arg0 <{permutation = array<i64: 1, 0>}>
// CHECK: %[[DW:.*]] = weft.matmul %[[XT]], %[[DH]] : tensor<3x2xf32>, tensor<2x4xf32>
// CHECK: %[[DB:.*]] = weft.reduce_sum %[[DH]] <{axes = array<i64: 0>}>
// CHECK: return %{{.*}}, %[[DW]], %[[DB]]
func.func @loss(%x: tensor<2x3xf32> {weft.input = "x"}, %w: tensor<3x4xf32> {weft.param = "w"}, %b: tensor<4xf32> {weft.param = "b"}) -> tensor<f32> attributes {weft.outputs = ["loss"]} {
  %0 = weft.linear %x, %w, %b : tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>
  %1 = weft.tanh %0 : tensor<2x4xf32>
  %2 = weft.reduce_sum %1 <{axes = array<i64: 0, 1>}> : tensor<2x4xf32>
  return %2 : tensor<f32>
}

// -----

// A parameter the loss does not depend on gets a zero gradient.
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[ZERO:.*]] = weft.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[ZERO]]
func.func @loss(%a: tensor<2xf32> {weft.param = "a"}, %unused: tensor<2xf32> {weft.param = "unused"}) -> tensor<f32> {
  %0 = weft.reduce_sum %a <{axes = array<i64: 0>}> : tensor<2xf32>
  return %0 : tensor<f32>
}

// -----

// Values that no parameter reaches (RoPE's cos/sin tables, masks) are
// constants of the differentiation: no adjoint flows into them, so the ops
// that make them (a constant, a sine: no rules needed) are left alone.
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[T:.*]] = weft.sin %{{.*}} : tensor<4xf32>
// CHECK: %[[ONES:.*]] = weft.expand
// CHECK: %[[G:.*]] = weft.mul %[[ONES]], %[[T]]
// CHECK: return %{{.*}}, %[[G]]
func.func @loss(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<f32> {
  %k = weft.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
  %t = weft.sin %k : tensor<4xf32>
  %y = weft.mul %w, %t : tensor<4xf32>, tensor<4xf32>
  %s = weft.reduce_sum %y <{axes = array<i64: 0>}> : tensor<4xf32>
  return %s : tensor<f32>
}

// -----

// GELU's adjoint is one weft.gelu_grad of the same form: a backward GEMM's
// epilogue can compute it (cuBLASLt's DGELU), where a chain of elementary
// ops would hide what it computes.
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[H:.*]] = weft.linear %arg0, %arg1
// CHECK: %[[Y:.*]] = weft.gelu %[[H]] {approximate = "tanh"}
// CHECK: %[[DH:.*]] = weft.gelu_grad %{{.*}}, %[[H]] {approximate = "tanh"} : tensor<2x4xf32>
// CHECK: weft.matmul %{{.*}}, %[[DH]]
func.func @loss(%x: tensor<2x3xf32> {weft.input = "x"}, %w: tensor<3x4xf32> {weft.param = "w"}) -> tensor<f32> attributes {weft.outputs = ["loss"]} {
  %0 = weft.linear %x, %w : tensor<2x3xf32>, tensor<3x4xf32>
  %1 = weft.gelu %0 {approximate = "tanh"} : tensor<2x4xf32>
  %2 = weft.reduce_sum %1 <{axes = array<i64: 0, 1>}> : tensor<2x4xf32>
  return %2 : tensor<f32>
}
