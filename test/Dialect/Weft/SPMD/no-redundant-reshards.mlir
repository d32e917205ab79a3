// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=dp=2 parallel=dp" --weft-propagate-sharding --weft-partition | FileCheck %s

// x is split; the softmax over the batch needs it whole, the exp keeps the
// split. The exp reads the local shard as it is: no gather followed by a
// slice. The two users of the whole x share one gather.
// CHECK-LABEL: func.func @one_gather
// CHECK: %[[WHOLE:.*]] = shard.all_gather %arg0 on @mesh grid_axes = [0] gather_axis = 0
// CHECK-NOT: shard.
// CHECK-DAG: weft.exp %arg0 : tensor<2x8xf32>
// CHECK-DAG: weft.softmax %[[WHOLE]] {axis = 0 : i64} : tensor<4x8xf32>
// CHECK-DAG: weft.reduce_max %[[WHOLE]]
// CHECK-NOT: shard.all_slice
func.func @one_gather(%x: tensor<4x8xf32> {weft.input = "x"}) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) attributes {weft.outputs = ["a", "b", "c"]} {
  %0 = weft.exp %x : tensor<4x8xf32>
  %1 = weft.softmax %x {axis = 0} : tensor<4x8xf32>
  %2 = weft.reduce_max %x <{axes = array<i64: 0>}> : tensor<4x8xf32>
  return %0, %1, %2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
}
