// RUN: weft-opt %s -split-input-file -weft-outline-layers="min-ops=2" | FileCheck %s

// Two layers that compute the same thing on their own weights share one
// function; the third, with a different constant, gets its own. Only the
// last layer's output is read after it.
// CHECK-LABEL: func.func @main
// CHECK: %[[H0:.*]] = call @main__h.0(%arg0, %arg1) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[H1:.*]] = call @main__h.0(%[[H0]], %arg2) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[H2:.*]] = call @main__h.2(%[[H1]], %arg3)
// CHECK: %[[OUT:.*]] = weft.tanh %[[H2]]
// CHECK: return %[[OUT]]
// CHECK-LABEL: func.func private @main__h.0
// CHECK: weft.constant dense<5.000000e-01>
// CHECK: weft.linear
// CHECK: weft.mul
// CHECK-LABEL: func.func private @main__h.2
// CHECK: weft.constant dense<2.500000e-01>
func.func @main(%x: tensor<2x8xf32>, %w0: tensor<8x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %half = weft.constant dense<0.5> : tensor<f32>
  %quarter = weft.constant dense<0.25> : tensor<f32>
  %a0 = weft.linear %x, %w0 : tensor<2x8xf32>, tensor<8x8xf32> loc("/h.0/fc/MatMul")
  %h0 = weft.mul %a0, %half : tensor<2x8xf32>, tensor<f32> loc("/h.0/Mul")
  %a1 = weft.linear %h0, %w1 : tensor<2x8xf32>, tensor<8x8xf32> loc("/h.1/fc/MatMul")
  %h1 = weft.mul %a1, %half : tensor<2x8xf32>, tensor<f32> loc("/h.1/Mul")
  %a2 = weft.linear %h1, %w2 : tensor<2x8xf32>, tensor<8x8xf32> loc("/h.2/fc/MatMul")
  %h2 = weft.mul %a2, %quarter : tensor<2x8xf32>, tensor<f32> loc("/h.2/Mul")
  %out = weft.tanh %h2 : tensor<2x8xf32> loc("/head/Tanh")
  return %out : tensor<2x8xf32>
}

// -----

// An op outside the layer ends its run; runs shorter than min-ops stay.
// CHECK-LABEL: func.func @split
// CHECK: weft.linear
// CHECK: weft.tanh
// CHECK: weft.mul
// CHECK-NOT: call
func.func @split(%x: tensor<2x8xf32>, %w0: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %a0 = weft.linear %x, %w0 : tensor<2x8xf32>, tensor<8x8xf32> loc("/h.0/fc/MatMul")
  %t = weft.tanh %a0 : tensor<2x8xf32> loc("/other/Tanh")
  %h0 = weft.mul %t, %t : tensor<2x8xf32>, tensor<2x8xf32> loc("/h.0/Mul")
  return %h0 : tensor<2x8xf32>
}
