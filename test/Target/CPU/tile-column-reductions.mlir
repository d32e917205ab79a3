// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(weft-tile-column-reductions))' | FileCheck %s

// A sum over the rows of a row-major matrix: tiles of 64 columns in a
// parallel loop, each adding row after row over its columns, the columns
// innermost (contiguous loads).
// CHECK-LABEL: func.func @column_sum
// CHECK:         scf.parallel (%[[J:.*]]) = (%{{.*}}) to (%c256{{.*}}) step (%c64
// CHECK:           %[[ROWS:.*]] = memref.subview %arg0[0, %[[J]]] [512, 64] [1, 1]
// CHECK:           %[[TILE:.*]] = memref.subview %arg1[%[[J]]] [64] [1]
// CHECK:           scf.for %[[I:.*]] = %{{.*}} to %c512
// CHECK-NEXT:        scf.for %[[JJ:.*]] = %{{.*}} to %c64
// CHECK-DAG:           %[[ROW:.*]] = affine.apply #{{.*}}(%[[I]])
// CHECK-DAG:           %[[COLUMN:.*]] = affine.apply #{{.*}}(%[[JJ]])
// CHECK:               memref.load %[[ROWS]][%[[ROW]], %[[COLUMN]]]
// CHECK:               memref.load %[[TILE]]
// CHECK:               arith.addf
// CHECK-NEXT:          memref.store {{.*}}, %[[TILE]]
// CHECK-NOT:     linalg.generic
func.func @column_sum(%x: memref<512x256xf32>, %sum: memref<256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(j, i) -> (i, j)>, affine_map<(j, i) -> (j)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<512x256xf32>) outs(%sum : memref<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A sum along the rows (the reduction already contiguous), and a sum over
// rows of a column-major view, stay as they are.
// CHECK-LABEL: func.func @kept
// CHECK-NOT:     scf.parallel
// CHECK:         linalg.generic
// CHECK:         linalg.generic
func.func @kept(%x: memref<512x256xf32>, %rowsums: memref<512xf32>, %t: memref<256x512xf32, strided<[1, 256]>>, %sum: memref<256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<512x256xf32>) outs(%rowsums : memref<512xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(j, i) -> (j, i)>, affine_map<(j, i) -> (j)>], iterator_types = ["parallel", "reduction"]}
      ins(%t : memref<256x512xf32, strided<[1, 256]>>) outs(%sum : memref<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}
