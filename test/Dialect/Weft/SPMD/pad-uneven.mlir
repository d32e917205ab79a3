// RUN: weft-opt %s -split-input-file --weft-shard-presets="mesh=dp=4 parallel=dp" --weft-propagate-sharding="pad-uneven" --weft-partition | FileCheck %s
// RUN: not weft-opt %s -split-input-file --weft-shard-presets="mesh=dp=4 parallel=dp" --weft-propagate-sharding 2>&1 | FileCheck %s --check-prefix=STRICT

// A batch of 6 over dp=4: each rank holds 2 rows, the last rank's are
// padding. The argument records the true global shape; the softmax over the
// batch needs the whole dim, so the padding is cut off after the gather.
// STRICT: cannot split dim 0 (size 6) of input 'x' over mesh axis 'dp' (size 4): not divisible (--pad-uneven pads it)
// CHECK-LABEL: func.func @uneven_batch
// CHECK-SAME: %arg0: tensor<2x8xf32> {weft.global_shape = array<i64: 6, 8>, weft.input = "x", weft.sharding = "[dp], []"}
// CHECK: %[[E:.*]] = weft.exp %arg0 : tensor<2x8xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[E]] on @mesh grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
// CHECK: %[[W:.*]] = weft.slice %[[G]] <{offsets = array<i64: 0, 0>, sizes = array<i64: 6, 8>, strides = array<i64: 1, 1>}>
// CHECK: weft.softmax %[[W]] {axis = 0 : i64} : tensor<6x8xf32>
func.func @uneven_batch(%x: tensor<6x8xf32> {weft.input = "x"}) -> tensor<6x8xf32> attributes {weft.outputs = ["y"]} {
  %0 = weft.exp %x : tensor<6x8xf32>
  %1 = weft.softmax %0 {axis = 0} : tensor<6x8xf32>
  return %1 : tensor<6x8xf32>
}
