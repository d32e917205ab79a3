// RUN: weft-opt %s -split-input-file -weft-local-replicas -verify-diagnostics | FileCheck %s

// A sum over dp: the replica's own value, scaled by the axis size.
shard.grid @mesh(shape = 4) {weft.axis_names = ["dp"]}
// CHECK-LABEL: func.func @sum_over_dp
// CHECK-NOT:     shard.all_reduce
// CHECK:         %[[FOUR:.*]] = weft.constant dense<4.000000e+00> : tensor<f32>
// CHECK:         %[[SCALED:.*]] = weft.mul %arg0, %[[FOUR]]
// CHECK:         return %[[SCALED]]
func.func @sum_over_dp(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

// A sum over dp and tp keeps tp; a maximum over dp is the replica's own;
// a sum over tp alone stays as it is.
shard.grid @mesh(shape = 2x2) {weft.axis_names = ["tp", "dp"]}
// CHECK-LABEL: func.func @other_axes_stay
// CHECK:         %[[TP:.*]] = shard.all_reduce %arg0 on @mesh grid_axes = [0] : tensor<8xf32>
// CHECK:         %[[SCALED:.*]] = weft.mul %[[TP]], %{{.*}} : tensor<8xf32>, tensor<f32>
// CHECK:         %[[KEPT:.*]] = shard.all_reduce %arg0 on @mesh grid_axes = [0] : tensor<8xf32>
// CHECK:         return %[[SCALED]], %arg0, %[[KEPT]]
func.func @other_axes_stay(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %s = shard.all_reduce %x on @mesh grid_axes = [0, 1] : tensor<8xf32> -> tensor<8xf32>
  %m = shard.all_reduce %x on @mesh grid_axes = [1] reduction = max : tensor<8xf32> -> tensor<8xf32>
  %t = shard.all_reduce %x on @mesh grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  return %s, %m, %t : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// ZeRO's gathers over dp share the replicas' state.
shard.grid @mesh(shape = 2) {weft.axis_names = ["dp"]}
func.func @gather_over_dp(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'shard.all_gather' over mesh axis 'dp' shares state between its replicas, which step alone between averages (ZeRO shards over it: drop --zero)}}
  %g = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
  return %g : tensor<8xf32>
}

// -----

// expected-error @+1 {{replicas that step alone need a mesh axis 'dp'}}
module {
  shard.grid @mesh(shape = 2) {weft.axis_names = ["tp"]}
}
