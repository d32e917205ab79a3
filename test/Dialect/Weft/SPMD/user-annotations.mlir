// RUN: weft-opt %s --weft-shard-presets="parallel=megatron" --weft-propagate-sharding --weft-partition | FileCheck %s

// A user's annotation (no weft.priority) wins over the preset: the user
// keeps fc.weight whole and splits the batch instead, so the MLP needs no
// collective inside and proj's row split (the preset's) is gathered, right
// before its use (a parameter is gathered per use).
// CHECK-LABEL: func.func @override
// CHECK-SAME: %arg0: tensor<1x4xf32> {weft.input = "x", weft.sharding = "[tp], []"}
// CHECK-SAME: tensor<4x32xf32> {weft.param = "fc.weight"}
// CHECK-SAME: tensor<16x4xf32> {weft.param = "proj.weight", weft.sharding = "[tp], []"}
// CHECK-NOT: shard.
// CHECK: weft.linear {{.*}} : tensor<1x4xf32>, tensor<4x32xf32>
// CHECK-NOT: shard.
// CHECK: %[[PROJ:.*]] = shard.all_gather %{{.*}} on @mesh grid_axes = [0] gather_axis = 0 : tensor<16x4xf32> -> tensor<32x4xf32>
// CHECK-NEXT: weft.linear %{{.*}}, %[[PROJ]] : tensor<1x32xf32>, tensor<32x4xf32>
module {
  shard.grid @mesh(shape = 2) {weft.axis_names = ["tp"]}
  func.func @override(%x: tensor<2x4xf32> {weft.input = "x"},
      %w1: tensor<4x32xf32> {weft.param = "fc.weight"},
      %w2: tensor<32x4xf32> {weft.param = "proj.weight"}) -> tensor<2x4xf32>
      attributes {weft.outputs = ["y"]} {
    %whole = shard.sharding @mesh split_axes = [[]] : !shard.sharding
    %w1_whole = shard.shard %w1 to %whole : tensor<4x32xf32>
    %batch = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
    %x_split = shard.shard %x to %batch : tensor<2x4xf32>
    %0 = weft.linear %x_split, %w1_whole : tensor<2x4xf32>, tensor<4x32xf32>
    %1 = weft.gelu %0 : tensor<2x32xf32>
    %2 = weft.linear %1, %w2 : tensor<2x32xf32>, tensor<32x4xf32>
    return %2 : tensor<2x4xf32>
  }
}
