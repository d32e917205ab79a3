// RUN: weft-opt %s -split-input-file -canonicalize | FileCheck %s

// Shape arithmetic on constants folds away (what the importer relies on).
// CHECK-LABEL: func.func @shape_arithmetic
// CHECK-NEXT: %[[C:.*]] = weft.constant dense<[2, 5, 2, 4]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_arithmetic() -> tensor<4xi64> {
  %shape = weft.constant dense<[2, 5, 8]> : tensor<3xi64>
  %idx = weft.constant dense<[0, -2]> : tensor<2xi64>
  %bs = weft.gather %shape, %idx <{axis = 0}> : tensor<3xi64>, tensor<2xi64>
  %heads = weft.constant dense<2> : tensor<i64>
  %h = weft.unsqueeze %heads <{axes = array<i64: 0>}> : tensor<i64>
  %eight = weft.slice %shape <{offsets = array<i64: 2>, sizes = array<i64: 1>, strides = array<i64: 1>}> : tensor<3xi64>
  %d = weft.div %eight, %h : tensor<1xi64>, tensor<1xi64>
  %r = weft.concat %bs, %h, %d <{axis = 0}> : tensor<2xi64>, tensor<1xi64>, tensor<1xi64>
  return %r : tensor<4xi64>
}

// -----

// Identities: x + 0, x * 1, reshape to the same type, identity transpose.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %zero = weft.constant dense<0.0> : tensor<f32>
  %one = weft.constant dense<1.0> : tensor<f32>
  %a = weft.add %x, %zero : tensor<2x3xf32>, tensor<f32>
  %m = weft.mul %one, %a : tensor<f32>, tensor<2x3xf32>
  %r = weft.reshape %m : tensor<2x3xf32> -> tensor<2x3xf32>
  %t = weft.transpose %r <{permutation = array<i64: 0, 1>}> : tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}

// -----

// x + 0 must not fold when the zero broadcasts x to a larger shape.
// CHECK-LABEL: func.func @broadcasting_zero
// CHECK: weft.add
func.func @broadcasting_zero(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  %zero = weft.constant dense<0.0> : tensor<2x3xf32>
  %a = weft.add %x, %zero : tensor<3xf32>, tensor<2x3xf32>
  return %a : tensor<2x3xf32>
}

// -----

// Chains merge: transpose of transpose, reshape of reshape.
// CHECK-LABEL: func.func @chains
// CHECK-NEXT: %[[T:.*]] = weft.transpose %{{.*}} <{permutation = array<i64: 0, 2, 1, 3>}>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %[[T]] : tensor<1x4x2x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @chains(%x: tensor<1x2x4x8xf32>) -> tensor<8x8xf32> {
  %a = weft.transpose %x <{permutation = array<i64: 0, 2, 3, 1>}> : tensor<1x2x4x8xf32>
  %b = weft.transpose %a <{permutation = array<i64: 0, 1, 3, 2>}> : tensor<1x4x8x2xf32>
  %c = weft.reshape %b : tensor<1x4x2x8xf32> -> tensor<4x16xf32>
  %d = weft.reshape %c : tensor<4x16xf32> -> tensor<8x8xf32>
  return %d : tensor<8x8xf32>
}

// -----

// Integer division by zero and out-of-range gathers are left to run time.
// CHECK-LABEL: func.func @undefined_not_folded
// CHECK: weft.div
// CHECK: weft.gather
func.func @undefined_not_folded() -> (tensor<2xi64>, tensor<1xi64>) {
  %a = weft.constant dense<[4, 6]> : tensor<2xi64>
  %z = weft.constant dense<[2, 0]> : tensor<2xi64>
  %d = weft.div %a, %z : tensor<2xi64>, tensor<2xi64>
  %i = weft.constant dense<[5]> : tensor<1xi64>
  %g = weft.gather %a, %i <{axis = 0}> : tensor<2xi64>, tensor<1xi64>
  return %d, %g : tensor<2xi64>, tensor<1xi64>
}

// -----

// A float where of constants keeps its fractional values.
// CHECK-LABEL: func.func @where_floats
// CHECK-NEXT: %[[C:.*]] = weft.constant dense<[2.500000e+00, -1.250000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[C]]
func.func @where_floats() -> tensor<2xf32> {
  %c = weft.constant dense<[true, false]> : tensor<2xi1>
  %a = weft.constant dense<[2.5, 3.5]> : tensor<2xf32>
  %b = weft.constant dense<[0.5, -1.25]> : tensor<2xf32>
  %w = weft.where %c, %a, %b : tensor<2xi1>, tensor<2xf32>, tensor<2xf32>
  return %w : tensor<2xf32>
}

// -----

// A matmul with a transposed 2-D weight (tied LM head) becomes a linear op
// that reads the weight in place.
// CHECK-LABEL: func.func @tied_head
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<16x8xf32>)
// CHECK-NEXT: %[[L:.*]] = weft.linear %[[X]], %[[W]] <{transpose_weight}> : tensor<2x4x8xf32>, tensor<16x8xf32>
// CHECK-NEXT: return %[[L]]
func.func @tied_head(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) -> tensor<2x4x16xf32> {
  %t = weft.transpose %w <{permutation = array<i64: 1, 0>}> : tensor<16x8xf32>
  %y = weft.matmul %x, %t : tensor<2x4x8xf32>, tensor<8x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// A bias added to a matmul's output becomes the linear op's bias.
// CHECK-LABEL: func.func @matmul_plus_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT: %[[L:.*]] = weft.linear %[[X]], %[[W]], %[[B]] : tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: return %[[L]]
func.func @matmul_plus_bias(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %y = weft.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32>
  %z = weft.add %b, %y : tensor<16xf32>, tensor<2x4x16xf32>
  return %z : tensor<2x4x16xf32>
}

// -----

// A bias that varies along another dim is not a per-feature bias: the
// product is a bias-free linear, the add stays.
// CHECK-LABEL: func.func @not_a_bias
// CHECK: weft.linear %arg0, %arg1 : tensor<4x8xf32>, tensor<8x16xf32>
// CHECK: weft.add
func.func @not_a_bias(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = weft.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %z = weft.add %y, %b : tensor<4x16xf32>, tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// -----

// A bias-free projection (a matmul by a weight: an argument, a constant, or
// a cast of one) is a linear, as exporters emit nn.Linear(bias=False).
// CHECK-LABEL: func.func @bias_free_projection
// CHECK-NEXT: %[[L:.*]] = weft.linear %arg0, %arg1 : tensor<2x4x8xf32>, tensor<8x16xf32>
// CHECK-NEXT: %[[C:.*]] = weft.cast %arg1
// CHECK-NEXT: %[[M:.*]] = weft.linear %arg2, %[[C]] : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK-NEXT: return %[[L]], %[[M]]
func.func @bias_free_projection(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %h: tensor<4x8xbf16>) -> (tensor<2x4x16xf32>, tensor<4x16xbf16>) {
  %y = weft.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32>
  %c = weft.cast %w : tensor<8x16xf32> to tensor<8x16xbf16>
  %z = weft.matmul %h, %c : tensor<4x8xbf16>, tensor<8x16xbf16>
  return %y, %z : tensor<2x4x16xf32>, tensor<4x16xbf16>
}

// -----

// A product of activations stays a matmul (autodiff's adjoints, attention).
// CHECK-LABEL: func.func @activations
// CHECK: weft.matmul
// CHECK-NOT: weft.linear
func.func @activations(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %e = weft.exp %w : tensor<8x16xf32>
  %y = weft.matmul %x, %e : tensor<4x8xf32>, tensor<8x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Slices that cut one axis into consecutive pieces (a packed QKV projection
// cut by three Slice ops) are one split.
// CHECK-LABEL: func.func @slices_tiling_an_axis
// CHECK-NEXT: %[[S:.*]]:3 = weft.split %arg0 <{axis = 2 : i64, sizes = array<i64: 8, 8, 8>}> : tensor<2x4x24xf32>
// CHECK-NEXT: return %[[S]]#2, %[[S]]#0, %[[S]]#1
func.func @slices_tiling_an_axis(%qkv: tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %v = weft.slice %qkv <{offsets = array<i64: 0, 0, 16>, sizes = array<i64: 2, 4, 8>, strides = array<i64: 1, 1, 1>}> : tensor<2x4x24xf32>
  %q = weft.slice %qkv <{offsets = array<i64: 0, 0, 0>, sizes = array<i64: 2, 4, 8>, strides = array<i64: 1, 1, 1>}> : tensor<2x4x24xf32>
  %k = weft.slice %qkv <{offsets = array<i64: 0, 0, 8>, sizes = array<i64: 2, 4, 8>, strides = array<i64: 1, 1, 1>}> : tensor<2x4x24xf32>
  return %v, %q, %k : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Slices with a gap, or that also cut another axis, stay slices.
// CHECK-LABEL: func.func @slices_not_a_split
// CHECK-NOT: weft.split
func.func @slices_not_a_split(%x: tensor<2x24xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1x16xf32>, tensor<1x8xf32>) {
  %a = weft.slice %x <{offsets = array<i64: 0, 0>, sizes = array<i64: 2, 8>, strides = array<i64: 1, 1>}> : tensor<2x24xf32>
  %b = weft.slice %x <{offsets = array<i64: 0, 16>, sizes = array<i64: 2, 8>, strides = array<i64: 1, 1>}> : tensor<2x24xf32>
  %y = weft.exp %x : tensor<2x24xf32>
  %c = weft.slice %y <{offsets = array<i64: 0, 0>, sizes = array<i64: 1, 16>, strides = array<i64: 1, 1>}> : tensor<2x24xf32>
  %d = weft.slice %y <{offsets = array<i64: 0, 16>, sizes = array<i64: 1, 8>, strides = array<i64: 1, 1>}> : tensor<2x24xf32>
  return %a, %b, %c, %d : tensor<2x8xf32>, tensor<2x8xf32>, tensor<1x16xf32>, tensor<1x8xf32>
}
