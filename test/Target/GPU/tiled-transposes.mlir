// RUN: weft-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(weft-gpu-tiled-transposes))" | FileCheck %s

// A 2-D transpose: one block per 32 x 32 tile (3 along the input's rows x
// 2 along its columns here, linearized), 32 x 8 threads, a padded 32 x 33
// tile in shared memory; each thread reads 4 elements along the input's
// rows (column tx), and after the barrier writes 4 along the output's rows
// from the transposed tile; the edges are guarded.
// CHECK-LABEL: func.func @matrix
// CHECK:         %[[TILES_A:.*]] = arith.ceildivui %{{.*}}, %c32
// CHECK:         %[[TILES_C:.*]] = arith.ceildivui %{{.*}}, %c32
// CHECK:         %[[BLOCKS:.*]] = arith.muli %[[TILES_A]], %[[TILES_C]]
// CHECK:         gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCKS]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:.*]], %[[TY:.*]], %{{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c8{{.*}}, %{{.*}} = %{{.*}}) workgroup(%[[TILE:.*]] : memref<32x33xf32, #gpu.address_space<workgroup>>)
// CHECK-COUNT-4:   memref.store %{{.*}}, %[[TILE]][%{{.*}}, %[[TX]]]
// CHECK:           gpu.barrier
// CHECK:           %[[V:.*]] = memref.load %[[TILE]][%[[TX]], %{{.*}}]
// CHECK-NEXT:      memref.store %[[V]], %arg1[%{{.*}}, %{{.*}}] : memref<96x64xf32>
// CHECK-COUNT-3:   memref.load %[[TILE]][%[[TX]], %{{.*}}]
// CHECK:           gpu.terminator
// CHECK-NOT:     linalg.transpose
func.func @matrix(%x: memref<64x96xf32>, %y: memref<96x64xf32>) {
  linalg.transpose ins(%x : memref<64x96xf32>) outs(%y : memref<96x64xf32>) permutation = [1, 0]
  return
}

// -----

// Heads to the front ([b, t, h, d] -> [b, h, t, d]) keeps the innermost
// dim: whole rows are copied, left to weft-gpu-launch-loops.
// CHECK-LABEL: func.func @rows_kept
// CHECK-NOT:     gpu.launch
// CHECK:         linalg.transpose
func.func @rows_kept(%x: memref<2x8x4x16xf32>, %y: memref<2x4x8x16xf32>) {
  linalg.transpose ins(%x : memref<2x8x4x16xf32>) outs(%y : memref<2x4x8x16xf32>) permutation = [0, 2, 1, 3]
  return
}
