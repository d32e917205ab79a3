// RUN: weft-opt %s -split-input-file -weft-merge-reductions | FileCheck %s

// Two partial sums added after their reductions: one reduction of the sum.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @two_sums
// CHECK:         %[[S:.*]] = weft.add %arg0, %arg1
// CHECK:         %[[R:.*]] = shard.all_reduce %[[S]] on @mesh grid_axes = [0]
// CHECK-NOT:     shard.all_reduce
// CHECK:         return %[[R]]
func.func @two_sums(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %s = weft.add %a, %b : tensor<4xf32>, tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A parallel residual: x + (attn + bias) + (mlp + bias), each partial
// product reduced on its own. Both reductions become one; the residual
// and the biases are added after it.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @parallel_residual
// CHECK:         %[[P:.*]] = weft.add %arg1, %arg2
// CHECK:         %[[R:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [0]
// CHECK-NOT:     shard.all_reduce
// CHECK:         return
func.func @parallel_residual(%x: tensor<4xf32>, %attn: tensor<4xf32>, %mlp: tensor<4xf32>, %b1: tensor<4xf32>, %b2: tensor<4xf32>) -> tensor<4xf32> {
  %a = shard.all_reduce %attn on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %ab = weft.add %a, %b1 : tensor<4xf32>, tensor<4xf32>
  %m = shard.all_reduce %mlp on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %mb = weft.add %m, %b2 : tensor<4xf32>, tensor<4xf32>
  %r = weft.add %x, %ab : tensor<4xf32>, tensor<4xf32>
  %s = weft.add %r, %mb : tensor<4xf32>, tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A reduction read elsewhere too must stay: merging would sum it twice.
shard.grid @mesh(shape = 2)
// CHECK-LABEL: func.func @other_reader
// CHECK-COUNT-2: shard.all_reduce
func.func @other_reader(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %b = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %s = weft.add %a, %b : tensor<4xf32>, tensor<4xf32>
  return %s, %a : tensor<4xf32>, tensor<4xf32>
}

// -----

// Reductions over different grid axes, or of a maximum, are not one sum.
shard.grid @mesh(shape = 2x2)
// CHECK-LABEL: func.func @different_groups
// CHECK-COUNT-4: shard.all_reduce
func.func @different_groups(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %b = shard.all_reduce %y on @mesh grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  %s = weft.add %a, %b : tensor<4xf32>, tensor<4xf32>
  %c = shard.all_reduce %x on @mesh grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
  %d = shard.all_reduce %y on @mesh grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %t = weft.add %c, %d : tensor<4xf32>, tensor<4xf32>
  return %s, %t : tensor<4xf32>, tensor<4xf32>
}
