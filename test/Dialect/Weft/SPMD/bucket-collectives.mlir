// RUN: weft-opt %s -split-input-file -weft-bucket-collectives | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-bucket-collectives=bucket-mb=0 | FileCheck %s --check-prefix=OFF
// RUN: weft-opt %s -split-input-file -weft-bucket-collectives=bucket-mb=0.0019 | FileCheck %s --check-prefix=CAP

// Two all-reduces read only afterwards: one all-reduce of their
// concatenation, sliced back apart.
shard.grid @mesh(shape = 2x2)
// CHECK-LABEL: func.func @two_gradients
// CHECK-DAG:     %[[A:.*]] = weft.reshape %arg0 : tensor<4x8xf32> -> tensor<1x32xf32>
// CHECK-DAG:     %[[B:.*]] = weft.reshape %arg1 : tensor<8xf32> -> tensor<1x8xf32>
// CHECK:         %[[CAT:.*]] = weft.concat %[[A]], %[[B]] <{axis = 1 : i64}>
// CHECK:         %[[SUM:.*]] = shard.all_reduce %[[CAT]] on @mesh grid_axes = [0] : tensor<1x40xf32> -> tensor<1x40xf32>
// CHECK-NOT:     shard.all_reduce
// CHECK:         weft.slice %[[SUM]] <{offsets = array<i64: 0, 0>, sizes = array<i64: 1, 32>
// CHECK:         weft.slice %[[SUM]] <{offsets = array<i64: 0, 32>, sizes = array<i64: 1, 8>
// OFF-LABEL:   func.func @two_gradients
// OFF-COUNT-2:   shard.all_reduce
func.func @two_gradients(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %ta = weft.tanh %a : tensor<4x8xf32>
  %tb = weft.tanh %b : tensor<8xf32>
  return %ta, %tb : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// A result read before the next collective issues its bucket there; other
// axes and reductions get buckets of their own.
shard.grid @mesh(shape = 2x2)
// CHECK-LABEL: func.func @read_in_between
// CHECK:         shard.all_reduce %arg0 on @mesh grid_axes = [0] : tensor<8xf32>
// CHECK:         weft.tanh
// CHECK:         shard.all_reduce %{{.*}} on @mesh grid_axes = [1] : tensor<8xf32>
// CHECK:         shard.all_reduce %{{.*}} on @mesh grid_axes = [0] reduction = max : tensor<8xf32>
// CHECK:         shard.all_reduce %{{.*}} on @mesh grid_axes = [0] : tensor<1x16xf32>
func.func @read_in_between(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %t = weft.tanh %a : tensor<8xf32>
  %b = shard.all_reduce %t on @mesh grid_axes = [1] : tensor<8xf32> -> tensor<8xf32>
  %c = shard.all_reduce %y on @mesh grid_axes = [0] reduction = max : tensor<8xf32> -> tensor<8xf32>
  %d = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %e = shard.all_reduce %t on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  return %a, %b, %c, %d, %e : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A result read inside a loop (a pipeline's micro-batch loop reading the
// embedding's all-reduce) is a read before the loop: its bucket is issued
// there, not combined with a collective after the loop.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @read_in_a_loop
// CHECK:         shard.all_reduce %arg0 on @mesh grid_axes = [0] : tensor<8xf32>
// CHECK:         scf.for
// CHECK:           weft.tanh
// CHECK:         shard.all_reduce %arg1 on @mesh grid_axes = [0] : tensor<8xf32>
func.func @read_in_a_loop(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %y) -> (tensor<8xf32>) {
    %t = weft.tanh %a : tensor<8xf32>
    scf.yield %t : tensor<8xf32>
  }
  %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  return %r, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// A full bucket is issued at once: with 1992-byte buckets, two 1 KiB
// tensors fill one and the third goes alone.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @capacity
// CHECK:         shard.all_reduce %{{.*}} : tensor<1x768xf32>
// CAP-LABEL:   func.func @capacity
// CAP:           shard.all_reduce %{{.*}} : tensor<1x512xf32>
// CAP:           shard.all_reduce %arg2 {{.*}} : tensor<256xf32>
func.func @capacity(%x: tensor<256xf32>, %y: tensor<256xf32>, %z: tensor<256xf32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<256xf32> -> tensor<256xf32>
  %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<256xf32> -> tensor<256xf32>
  %c = shard.all_reduce %z on @mesh grid_axes = [0] : tensor<256xf32> -> tensor<256xf32>
  return %a, %b, %c : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
}

// -----

// Reduce-scatter over dim 1 moves it to the front, so that each rank's
// chunk of every member is one row; all-gather the same way back.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @scatter_and_gather
// CHECK:         weft.transpose %arg0 <{permutation = array<i64: 1, 0>}> : tensor<4x6xf32>
// CHECK:         %[[RS:.*]] = shard.reduce_scatter %{{.*}} on @mesh grid_axes = [0] scatter_axis = 0 : tensor<2x17xf32> -> tensor<1x17xf32>
// CHECK:         %[[AG:.*]] = shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<1x17xf32> -> tensor<2x17xf32>
func.func @scatter_and_gather(%x: tensor<4x6xf32>, %y: tensor<10xf32>) -> (tensor<4x6xf32>, tensor<10xf32>) {
  %a = shard.reduce_scatter %x on @mesh grid_axes = [0] scatter_axis = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %b = shard.reduce_scatter %y on @mesh grid_axes = [0] scatter_axis = 0 : tensor<10xf32> -> tensor<5xf32>
  %ta = weft.tanh %a : tensor<4x3xf32>
  %tb = weft.tanh %b : tensor<5xf32>
  %c = shard.all_gather %ta on @mesh grid_axes = [0] gather_axis = 1 : tensor<4x3xf32> -> tensor<4x6xf32>
  %d = shard.all_gather %tb on @mesh grid_axes = [0] gather_axis = 0 : tensor<5xf32> -> tensor<10xf32>
  return %c, %d : tensor<4x6xf32>, tensor<10xf32>
}

// -----

// The running sum of per-tensor partial norms reads each result at once;
// that small glue moves below the collectives so they share one bucket.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @norm_glue
// CHECK:         weft.reduce_sum
// CHECK:         shard.all_reduce %{{.*}} : tensor<1x2xf32>
// CHECK-NOT:     shard.all_reduce
// CHECK:         weft.mul
// CHECK:         weft.add
func.func @norm_glue(%p: tensor<f32>, %x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> (tensor<f32>) {
  %a = shard.all_reduce %p on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
  %squared = weft.mul %a, %a : tensor<f32>, tensor<f32>
  %big = weft.mul %x, %y : tensor<64x64xf32>, tensor<64x64xf32>
  %s = weft.reduce_sum %big <{axes = array<i64: 0, 1>}> : tensor<64x64xf32>
  %b = shard.all_reduce %s on @mesh grid_axes = [0] : tensor<f32> -> tensor<f32>
  %sum = weft.add %squared, %b : tensor<f32>, tensor<f32>
  return %sum : tensor<f32>
}

// -----

// Gathers of parameter shards (ZeRO-3, one before each use) move up to the
// first gather of their layer: h.0's two parameters arrive in one gather
// before h.0's first op; h.1's parameter, of another layer, in its own.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @layer_gathers
// CHECK:         weft.concat
// CHECK:         shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<1x6xf32> -> tensor<2x6xf32>
// CHECK-NOT:     shard.all_gather
// CHECK:         shard.all_gather %arg2 on @mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<4xf32>
// CHECK-NOT:     shard.all_gather
func.func @layer_gathers(%w: tensor<2x2xf32> {weft.param = "h.0.attn.weight"}, %b: tensor<2xf32> {weft.param = "h.0.attn.bias"}, %v: tensor<2xf32> {weft.param = "h.1.mlp.bias"}) -> (tensor<4x2xf32>, tensor<4xf32>, tensor<4xf32>) {
  %gw = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 : tensor<2x2xf32> -> tensor<4x2xf32>
  %tw = weft.tanh %gw : tensor<4x2xf32>
  %gb = shard.all_gather %b on @mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<4xf32>
  %tb = weft.tanh %gb : tensor<4xf32>
  %gv = shard.all_gather %v on @mesh grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<4xf32>
  %tv = weft.tanh %gv : tensor<4xf32>
  return %tw, %tb, %tv : tensor<4x2xf32>, tensor<4xf32>, tensor<4xf32>
}
