// RUN: weft-opt %s -split-input-file -convert-weft-to-linalg -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// weft.scatter_add survives convert-weft-to-linalg and bufferizes into a
// zeroed table and one parallel loop over (lookup, column) that adds each
// element into its row atomically; an index outside the rows adds nothing.
// CHECK-LABEL: func.func @embedding_gradient
// CHECK: %[[TABLE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<10x4xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[TABLE]] : memref<10x4xf32>)
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]], %[[K:.*]]) = (%c0, %c0, %c0) to (%c2, %c3, %c4)
// CHECK: %[[ID:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<2x3xi64
// CHECK: %[[ROW:.*]] = arith.index_cast %[[ID]]
// CHECK: arith.cmpi sge, %[[ROW]]
// CHECK: arith.cmpi slt, %[[ROW]], %c10
// CHECK: scf.if
// CHECK: %[[V:.*]] = memref.load %{{.*}}[%[[I]], %[[J]], %[[K]]]
// CHECK: memref.atomic_rmw addf %[[V]], %[[TABLE]][%[[ROW]], %[[K]]]
// CHECK: return %[[TABLE]]
func.func @embedding_gradient(%dx: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>) -> tensor<10x4xf32> {
  %0 = weft.scatter_add %dx, %ids : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}
