// RUN: weft-opt %s -split-input-file --weft-spmd="mesh=dp=2,tp=2 parallel=dp,megatron" | FileCheck %s
// RUN: weft-opt %s -split-input-file --weft-spmd="mesh=tp=2 parallel=megatron bucket-mb=0" | FileCheck %s --check-prefix=TP

// weft-spmd is the partitioning stage of weftc as one pipeline: the presets
// (batch over dp, a column/row pair over tp), propagation, partitioning
// into explicit collectives and bucketing. The MLP's activations need one
// all-reduce over tp and nothing over dp.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %arg0: tensor<2x4xf32> {weft.input = "x", weft.sharding = "[dp], []"}
// CHECK-SAME: tensor<4x16xf32> {weft.param = "fc.weight", weft.sharding = "[], [tp]"}
// CHECK-SAME: tensor<16x4xf32> {weft.param = "proj.weight", weft.sharding = "[tp], []"}
// CHECK: weft.linear {{.*}} : tensor<2x4xf32>, tensor<4x16xf32>
// CHECK: weft.gelu
// CHECK: weft.linear {{.*}} : tensor<2x16xf32>, tensor<16x4xf32>
// CHECK: shard.all_reduce {{.*}} grid_axes = [1]
// CHECK-NOT: shard.
// CHECK: return

// TP-LABEL: func.func @mlp
// TP: shard.all_reduce {{.*}} grid_axes = [0]
// TP-NOT: shard.
// TP: return
func.func @mlp(%x: tensor<4x4xf32> {weft.input = "x"},
    %w1: tensor<4x32xf32> {weft.param = "fc.weight"},
    %w2: tensor<32x4xf32> {weft.param = "proj.weight"}) -> tensor<4x4xf32>
    attributes {weft.outputs = ["y"]} {
  %0 = weft.linear %x, %w1 : tensor<4x4xf32>, tensor<4x32xf32>
  %1 = weft.gelu %0 : tensor<4x32xf32>
  %2 = weft.linear %1, %w2 : tensor<4x32xf32>, tensor<32x4xf32>
  return %2 : tensor<4x4xf32>
}
