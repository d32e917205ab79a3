// RUN: weft-opt %s -split-input-file --convert-shard-to-weft-runtime --canonicalize | FileCheck %s
// RUN: weft-opt %s -split-input-file --convert-shard-to-weft-runtime --one-shot-bufferize=bufferize-function-boundaries --convert-shard-to-weft-runtime --canonicalize | FileCheck %s --check-prefix=CALLS

// Before bufferization: the runtime is declared, a slice reads the rank's
// coordinates (major axis first), collectives wait for bufferization.
// CHECK-LABEL: func.func private @weft_collective_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64, i64)
// CHECK: func.func private @weft_mesh_coordinate(i64) -> i64
// CHECK: shard.grid @mesh
// CHECK-LABEL: func.func @collectives
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[AXIS0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[AXIS1:.*]] = arith.constant 1 : i64
// CHECK: shard.all_reduce
// CHECK: shard.all_gather
// CHECK: %[[ROW:.*]] = call @weft_mesh_coordinate(%[[AXIS0]])
// CHECK: %[[ROWI:.*]] = arith.index_cast %[[ROW]]
// CHECK: %[[COL:.*]] = call @weft_mesh_coordinate(%[[AXIS1]])
// CHECK: %[[COLI:.*]] = arith.index_cast %[[COL]]
// CHECK: %[[MAJOR:.*]] = arith.muli %[[ROWI]], %[[C4]]
// CHECK: %[[LINEAR:.*]] = arith.addi %[[MAJOR]], %[[COLI]]
// CHECK: tensor.extract_slice %arg0[0, %[[LINEAR]]] [4, 1] [1, 1]
// CHECK: %[[COL2:.*]] = call @weft_mesh_coordinate(%[[AXIS1]])
// CHECK: %[[COL2I:.*]] = arith.index_cast %[[COL2]]
// CHECK: %[[OFFSET:.*]] = arith.muli %[[COL2I]], %[[C2]]
// CHECK: tensor.extract_slice %arg0[0, %[[OFFSET]]] [4, 2] [1, 1]
// CHECK: shard.reduce_scatter

// After bufferization each collective is one call: (in, out, kind,
// axes mask, dim, concat dim); nothing refers to the grid any more.
// CALLS-NOT: shard.grid
// CALLS-LABEL: func.func @collectives
// CALLS-DAG: %[[K0:.*]] = arith.constant 0 : i64
// CALLS-DAG: %[[K1:.*]] = arith.constant 1 : i64
// CALLS-DAG: %[[K2:.*]] = arith.constant 2 : i64
// all_reduce over axis 1 (mask 2):
// CALLS: %[[R:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CALLS: call @weft_collective_f32({{.*}}, %[[K0]], %[[K2]], %[[K0]], %[[K0]])
// all_gather over axis 0 (mask 1) on dim 0:
// CALLS: memref.alloc() {alignment = 64 : i64} : memref<8x8xf32>
// CALLS: call @weft_collective_f32({{.*}}, %[[K1]], %[[K1]], %[[K0]], %[[K0]])
// CALLS: memref.subview
// reduce_scatter over axis 0 on dim 0:
// CALLS: memref.alloc() {alignment = 64 : i64} : memref<2x8xf32>
// CALLS: call @weft_collective_f32({{.*}}, %[[K2]], %[[K1]], %[[K0]], %[[K0]])
shard.grid @mesh(shape = 2x4)
func.func @collectives(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x1xf32>, tensor<4x2xf32>, tensor<2x8xf32>) {
  %r = shard.all_reduce %x on @mesh grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %g = shard.all_gather %x on @mesh grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %s = shard.all_slice %x on @mesh grid_axes = [0, 1] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
  %s2 = shard.all_slice %x on @mesh grid_axes = [1] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  %rs = shard.reduce_scatter %x on @mesh grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  return %r, %g, %s, %s2, %rs : tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x1xf32>, tensor<4x2xf32>, tensor<2x8xf32>
}

// -----

// all_to_all passes its split and concat dims; a pipeline message calls
// weft_send/weft_recv with (in, out, axes mask, peer, tag), the tag
// weft-pipeline-cut gave it.
// CALLS: func.func private @weft_recv_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64)
// CALLS: func.func private @weft_send_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64)
// CALLS-LABEL: func.func @exchanges
// CALLS-DAG: %[[K0:.*]] = arith.constant 0 : i64
// CALLS-DAG: %[[K1:.*]] = arith.constant 1 : i64
// CALLS-DAG: %[[K3:.*]] = arith.constant 3 : i64
// CALLS-DAG: %[[TAG:.*]] = arith.constant 7 : i64
// CALLS: call @weft_collective_f32({{.*}}, %[[K3]], %[[K1]], %[[K1]], %[[K0]])
// CALLS: call @weft_send_f32({{.*}}, %[[K1]], %[[K1]], %[[TAG]])
// CALLS: call @weft_recv_f32({{.*}}, %[[K1]], %[[K0]], %[[TAG]])
shard.grid @mesh(shape = 2x4)
func.func @exchanges(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  %a = shard.all_to_all %x on @mesh grid_axes = [0] split_axis = 1 concat_axis = 0 : tensor<4x8xf32> -> tensor<8x4xf32>
  shard.send %x on @mesh grid_axes = [0] destination = [1] {weft.tag = 7 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = shard.recv %x on @mesh grid_axes = [0] source = [0] {weft.tag = 7 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a, %r : tensor<8x4xf32>, tensor<4x8xf32>
}
