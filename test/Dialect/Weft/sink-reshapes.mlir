// RUN: weft-opt %s -split-input-file -weft-sink-reshapes | FileCheck %s
// RUN: weft-eval %s -split-input-file --compare-pipeline=weft-sink-reshapes | FileCheck %s --check-prefix=SAME

// The rewrite computes the same function (reference evaluator, random inputs):
// SAME: @multihead_attention result #0: {{.*}}: ok
// SAME: @output_projection result #0: {{.*}}: ok
// SAME: @mixed_reshape_alone result #0: {{.*}}: ok
// SAME: @uneven_pieces result #0: {{.*}}: ok
// SAME: @merge_with_other_users result #0: {{.*}}: ok
// SAME: @per_head_mask result #0: {{.*}}: ok

// nn.MultiheadAttention as exported by PyTorch: [tgt, batch, heads * hd]
// viewed as [tgt, batch * heads, hd]. Heads and batch end up as dims of
// their own from the projection to the merge before the output projection.
// CHECK-LABEL: func.func @multihead_attention
// CHECK-SAME: (%[[Q:.*]]: tensor<5x2x32xf32>, %[[K:.*]]: tensor<5x2x32xf32>, %[[V:.*]]: tensor<5x2x32xf32>)
// CHECK-DAG: %[[QE:.*]] = weft.reshape %[[Q]] : tensor<5x2x32xf32> -> tensor<5x2x4x8xf32>
// CHECK-DAG: %[[QT:.*]] = weft.transpose %[[QE]] <{permutation = array<i64: 1, 2, 0, 3>}> : tensor<5x2x4x8xf32>
// CHECK-DAG: %[[KE:.*]] = weft.reshape %[[K]] : tensor<5x2x32xf32> -> tensor<5x2x4x8xf32>
// CHECK-DAG: %[[KT:.*]] = weft.transpose %[[KE]] <{permutation = array<i64: 1, 2, 0, 3>}> : tensor<5x2x4x8xf32>
// CHECK-DAG: %[[VE:.*]] = weft.reshape %[[V]] : tensor<5x2x32xf32> -> tensor<5x2x4x8xf32>
// CHECK-DAG: %[[VT:.*]] = weft.transpose %[[VE]] <{permutation = array<i64: 1, 2, 0, 3>}> : tensor<5x2x4x8xf32>
// CHECK: %[[O:.*]] = weft.attention %[[QT]], %[[KT]], %[[VT]] <{causal}> : tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>
// CHECK: %[[OT:.*]] = weft.transpose %[[O]] <{permutation = array<i64: 2, 0, 1, 3>}> : tensor<2x4x5x8xf32>
// CHECK: %[[R:.*]] = weft.reshape %[[OT]] : tensor<5x2x4x8xf32> -> tensor<10x32xf32>
// CHECK: return %[[R]]
func.func @multihead_attention(%q: tensor<5x2x32xf32>, %k: tensor<5x2x32xf32>, %v: tensor<5x2x32xf32>) -> tensor<10x32xf32> {
  %q0 = weft.reshape %q : tensor<5x2x32xf32> -> tensor<5x8x8xf32>
  %k0 = weft.reshape %k : tensor<5x2x32xf32> -> tensor<5x8x8xf32>
  %v0 = weft.reshape %v : tensor<5x2x32xf32> -> tensor<5x8x8xf32>
  %q1 = weft.transpose %q0 <{permutation = array<i64: 1, 0, 2>}> : tensor<5x8x8xf32>
  %k1 = weft.transpose %k0 <{permutation = array<i64: 1, 0, 2>}> : tensor<5x8x8xf32>
  %v1 = weft.transpose %v0 <{permutation = array<i64: 1, 0, 2>}> : tensor<5x8x8xf32>
  %q2 = weft.unsqueeze %q1 <{axes = array<i64: 1>}> : tensor<8x5x8xf32>
  %k2 = weft.unsqueeze %k1 <{axes = array<i64: 1>}> : tensor<8x5x8xf32>
  %v2 = weft.unsqueeze %v1 <{axes = array<i64: 1>}> : tensor<8x5x8xf32>
  %o = weft.attention %q2, %k2, %v2 <{causal}> : tensor<8x1x5x8xf32>, tensor<8x1x5x8xf32>, tensor<8x1x5x8xf32>
  %o1 = weft.squeeze %o <{axes = array<i64: 1>}> : tensor<8x1x5x8xf32>
  %o2 = weft.transpose %o1 <{permutation = array<i64: 1, 0, 2>}> : tensor<8x5x8xf32>
  %r = weft.reshape %o2 : tensor<5x8x8xf32> -> tensor<10x32xf32>
  return %r : tensor<10x32xf32>
}

// -----

// The output projection reads [tgt, batch, features]: tgt and batch are
// never merged, and the view back to [tgt, batch, features] disappears.
// CHECK-LABEL: func.func @output_projection
// CHECK: %[[T:.*]] = weft.transpose %arg0 <{permutation = array<i64: 2, 0, 1, 3>}> : tensor<2x4x5x8xf32>
// CHECK: %[[F:.*]] = weft.reshape %[[T]] : tensor<5x2x4x8xf32> -> tensor<5x2x32xf32>
// CHECK: %[[L:.*]] = weft.linear %[[F]], %arg1, %arg2 <{transpose_weight}> : tensor<5x2x32xf32>, tensor<16x32xf32>, tensor<16xf32>
// CHECK-NOT: weft.reshape
// CHECK: return %[[L]]
func.func @output_projection(%o: tensor<2x4x5x8xf32>, %w: tensor<16x32xf32>, %b: tensor<16xf32>) -> tensor<5x2x16xf32> {
  %m = weft.reshape %o : tensor<2x4x5x8xf32> -> tensor<8x5x8xf32>
  %t = weft.transpose %m <{permutation = array<i64: 1, 0, 2>}> : tensor<8x5x8xf32>
  %r = weft.reshape %t : tensor<5x8x8xf32> -> tensor<10x32xf32>
  %l = weft.linear %r, %w, %b <{transpose_weight}> : tensor<10x32xf32>, tensor<16x32xf32>, tensor<16xf32>
  %back = weft.reshape %l : tensor<10x16xf32> -> tensor<5x2x16xf32>
  return %back : tensor<5x2x16xf32>
}

// -----

// A reshape that splits and merges becomes an expand then a merge, even
// where nothing moves the merge (the canonicalizer joins them again).
// CHECK-LABEL: func.func @mixed_reshape_alone
// CHECK: %[[E:.*]] = weft.reshape %arg0 : tensor<2x6xf32> -> tensor<2x2x3xf32>
// CHECK: %[[M:.*]] = weft.reshape %[[E]] : tensor<2x2x3xf32> -> tensor<4x3xf32>
// CHECK: return %[[M]]
func.func @mixed_reshape_alone(%x: tensor<2x6xf32>) -> tensor<4x3xf32> {
  %r = weft.reshape %x : tensor<2x6xf32> -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

// -----

// No shape both reach by cutting dims: left alone.
// CHECK-LABEL: func.func @uneven_pieces
// CHECK-NEXT: weft.reshape %arg0 : tensor<4x6xf32> -> tensor<6x4xf32>
// CHECK-NEXT: weft.transpose
func.func @uneven_pieces(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %r = weft.reshape %x : tensor<4x6xf32> -> tensor<6x4xf32>
  %t = weft.transpose %r <{permutation = array<i64: 1, 0>}> : tensor<6x4xf32>
  return %t : tensor<4x6xf32>
}

// -----

// A merge with other users stays: moving it would duplicate the transpose.
// CHECK-LABEL: func.func @merge_with_other_users
// CHECK: %[[M:.*]] = weft.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: weft.transpose %[[M]]
func.func @merge_with_other_users(%x: tensor<2x3x4xf32>) -> (tensor<4x6xf32>, tensor<6x4xf32>) {
  %m = weft.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %t = weft.transpose %m <{permutation = array<i64: 1, 0>}> : tensor<6x4xf32>
  return %t, %m : tensor<4x6xf32>, tensor<6x4xf32>
}

// -----

// A mask that differs per merged batch-and-head index keeps the merged view.
// CHECK-LABEL: func.func @per_head_mask
// CHECK: weft.attention {{.*}} : tensor<8x1x5x8xf32>, tensor<8x1x5x8xf32>, tensor<8x1x5x8xf32>, tensor<8x1x5x5xf32>
func.func @per_head_mask(%q: tensor<2x4x5x8xf32>, %k: tensor<2x4x5x8xf32>, %v: tensor<2x4x5x8xf32>, %mask: tensor<8x1x5x5xf32>) -> tensor<8x1x5x8xf32> {
  %q1 = weft.reshape %q : tensor<2x4x5x8xf32> -> tensor<8x1x5x8xf32>
  %k1 = weft.reshape %k : tensor<2x4x5x8xf32> -> tensor<8x1x5x8xf32>
  %v1 = weft.reshape %v : tensor<2x4x5x8xf32> -> tensor<8x1x5x8xf32>
  %o = weft.attention %q1, %k1, %v1, %mask : tensor<8x1x5x8xf32>, tensor<8x1x5x8xf32>, tensor<8x1x5x8xf32>, tensor<8x1x5x5xf32>
  return %o : tensor<8x1x5x8xf32>
}
