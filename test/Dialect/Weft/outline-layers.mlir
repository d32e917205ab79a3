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

// -----

// A fused attention's head-major inputs and result do not leave the layer:
// the forward returns the projection they are views of and the merged
// heads, and the backward (the same layer's ops) rebuilds its views of
// them, so both sides' attention can read and write views, not copies.
// CHECK-LABEL: func.func @attention_views
// CHECK: %[[FWD:.*]]:3 = call @attention_views__h.0(%arg0, %arg1)
// CHECK: call @attention_views__h.0_1(%[[FWD]]#0, %[[FWD]]#2, %arg2, %[[FWD]]#1)
// CHECK-LABEL: func.func private @attention_views__h.0(
// CHECK-SAME: -> (tensor<2x4x24xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>)
// CHECK: %[[QKV:.*]] = weft.linear
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = weft.attention
// CHECK: %[[T:.*]] = weft.transpose %[[OUT]]
// CHECK: %[[MERGED:.*]] = weft.reshape %[[T]]
// CHECK: return %[[QKV]], %[[LSE]], %[[MERGED]]
// CHECK-LABEL: func.func private @attention_views__h.0_1(
// CHECK-SAME: %[[QKV:[a-z0-9]+]]: tensor<2x4x24xf32>, %[[MERGED:[a-z0-9]+]]: tensor<2x4x8xf32>
// CHECK: %[[S:.*]]:3 = weft.split %[[QKV]]
// CHECK: %[[Q4:.*]] = weft.reshape %[[S]]#0
// CHECK: %[[Q:.*]] = weft.transpose %[[Q4]]
// CHECK: %[[K4:.*]] = weft.reshape %[[S]]#1
// CHECK: %[[K:.*]] = weft.transpose %[[K4]]
// CHECK: %[[V4:.*]] = weft.reshape %[[S]]#2
// CHECK: %[[V:.*]] = weft.transpose %[[V4]]
// CHECK: %[[HEADS:.*]] = weft.reshape %[[MERGED]] : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
// CHECK: %[[O:.*]] = weft.transpose %[[HEADS]] <{permutation = array<i64: 0, 2, 1, 3>}>
// CHECK: weft.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %arg
func.func @attention_views(%x: tensor<2x4x8xf32>, %w: tensor<8x24xf32>, %dout: tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x4x8xf32>) {
  %qkv = weft.linear %x, %w : tensor<2x4x8xf32>, tensor<8x24xf32> loc("/h.0/attn/MatMul")
  %s:3 = weft.split %qkv <{axis = 2 : i64, sizes = array<i64: 8, 8, 8>}> : tensor<2x4x24xf32> loc("/h.0/attn/Split")
  %q4 = weft.reshape %s#0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape")
  %k4 = weft.reshape %s#1 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape_1")
  %v4 = weft.reshape %s#2 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape_2")
  %q = weft.transpose %q4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose")
  %k = weft.transpose %k4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose_1")
  %v = weft.transpose %v4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose_2")
  %out, %lse = weft.attention %q, %k, %v <{causal, save_log_sum_exp}> : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/MatMul_2")
  %t = weft.transpose %out <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x2x4x4xf32> loc("/h.0/attn/Transpose_3")
  %merged = weft.reshape %t : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32> loc("/h.0/attn/Reshape_3")
  %y = weft.tanh %merged : tensor<2x4x8xf32> loc("/head/Tanh")
  %dq, %dk, %dv = weft.attention_grad %q, %k, %v, %out, %dout log_sum_exp(%lse : tensor<2x2x4xf32>) <{causal}> : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/MatMul_2_grad")
  %dqk = weft.add %dq, %dk : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/Add_grad")
  %d = weft.add %dqk, %dv : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/Add_grad_1")
  return %d, %y : tensor<2x2x4x4xf32>, tensor<2x4x8xf32>
}

// -----

// Where only the query leaves the layer, returning the whole projection
// would return more: the query's copy leaves as it is.
// CHECK-LABEL: func.func private @query_leaves__h.0(
// CHECK-SAME: -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>)
// CHECK-LABEL: func.func private @query_leaves__h.0_1(
// CHECK-NOT: weft.split
func.func @query_leaves(%x: tensor<2x4x8xf32>, %w: tensor<8x24xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) {
  %qkv = weft.linear %x, %w : tensor<2x4x8xf32>, tensor<8x24xf32> loc("/h.0/attn/MatMul")
  %s:3 = weft.split %qkv <{axis = 2 : i64, sizes = array<i64: 8, 8, 8>}> : tensor<2x4x24xf32> loc("/h.0/attn/Split")
  %q4 = weft.reshape %s#0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape")
  %k4 = weft.reshape %s#1 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape_1")
  %v4 = weft.reshape %s#2 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape_2")
  %q = weft.transpose %q4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose")
  %k = weft.transpose %k4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose_1")
  %v = weft.transpose %v4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose_2")
  %out = weft.attention %q, %k, %v <{causal}> : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/MatMul_2")
  %y = weft.tanh %out : tensor<2x2x4x4xf32> loc("/head/Tanh")
  %a = weft.add %q, %y : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/Add_grad")
  %b = weft.mul %a, %q : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/Mul_grad")
  return %b, %y : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
}

// -----

// A view between the projection and an input that leaves the layer too
// would leave besides the projection: the inputs leave as they are.
// CHECK-LABEL: func.func private @view_leaves__h.0(
// CHECK-SAME: -> (tensor<2x4x2x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>)
// CHECK-LABEL: func.func private @view_leaves__h.0_1(
// CHECK-NOT: weft.split
func.func @view_leaves(%x: tensor<2x4x8xf32>, %w: tensor<8x24xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x4x2x4xf32>) {
  %qkv = weft.linear %x, %w : tensor<2x4x8xf32>, tensor<8x24xf32> loc("/h.0/attn/MatMul")
  %s:3 = weft.split %qkv <{axis = 2 : i64, sizes = array<i64: 8, 8, 8>}> : tensor<2x4x24xf32> loc("/h.0/attn/Split")
  %q4 = weft.reshape %s#0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape")
  %k4 = weft.reshape %s#1 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape_1")
  %v4 = weft.reshape %s#2 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("/h.0/attn/Reshape_2")
  %q = weft.transpose %q4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose")
  %k = weft.transpose %k4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose_1")
  %v = weft.transpose %v4 <{permutation = array<i64: 0, 2, 1, 3>}> : tensor<2x4x2x4xf32> loc("/h.0/attn/Transpose_2")
  %out = weft.attention %q, %k, %v <{causal}> : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/MatMul_2")
  %y = weft.tanh %out : tensor<2x2x4x4xf32> loc("/head/Tanh")
  %z = weft.tanh %k4 : tensor<2x4x2x4xf32> loc("/head/Tanh_1")
  %a = weft.add %q, %k : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/Add_grad")
  %b = weft.add %a, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32> loc("/h.0/attn/Add_grad_1")
  return %b, %y, %z : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x4x2x4xf32>
}
