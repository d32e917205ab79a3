// RUN: weft-opt %s -split-input-file -weft-serialize-inner-loop="min-parallel-work=1" | FileCheck %s

// CHECK-LABEL: func.func @scale
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1)
// CHECK-NEXT: scf.for %[[K:.*]] = %c0 to %c16 step %c1
// CHECK-NEXT: memref.load %{{.*}}[%[[I]], %[[J]], %[[K]]]
// CHECK-NOT: scf.parallel
func.func @scale(%in: memref<4x8x16xf32>, %out: memref<4x8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %two = arith.constant 2.0 : f32
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c4, %c8, %c16) step (%c1, %c1, %c1) {
    %v = memref.load %in[%i, %j, %k] : memref<4x8x16xf32>
    %s = arith.mulf %v, %two : f32
    memref.store %s, %out[%i, %j, %k] : memref<4x8x16xf32>
    scf.reduce
  }
  return
}

// -----

// A 1-D parallel loop stays as it is.
// CHECK-LABEL: func.func @one_dim
// CHECK: scf.parallel
// CHECK-NOT: scf.for
func.func @one_dim(%in: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    %v = memref.load %in[%i] : memref<16xf32>
    memref.store %v, %in[%i] : memref<16xf32>
    scf.reduce
  }
  return
}

// -----

// A nest of atomic adds (weft.scatter_add's) runs in program order, its
// adds plain: sums in a fixed order, so a run repeats bit for bit.
// CHECK-LABEL: func.func @scatter_rows
// CHECK-NOT: scf.parallel
// CHECK: scf.for %[[N:.*]] = %c0 to %c6 step %c1
// CHECK-NEXT: scf.for %[[C:.*]] = %c0 to %c4 step %c1
// CHECK: %[[OLD:.*]] = memref.load %{{.*}}[%{{.*}}, %[[C]]] : memref<10x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// CHECK-NEXT: memref.store %[[SUM]], %{{.*}}[%{{.*}}, %[[C]]] : memref<10x4xf32>
// CHECK-NOT: memref.atomic_rmw
func.func @scatter_rows(%updates: memref<6x4xf32>, %ids: memref<6xindex>, %table: memref<10x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  scf.parallel (%n, %c) = (%c0, %c0) to (%c6, %c4) step (%c1, %c1) {
    %row = memref.load %ids[%n] : memref<6xindex>
    %v = memref.load %updates[%n, %c] : memref<6x4xf32>
    %old = memref.atomic_rmw addf %v, %table[%row, %c] : (f32, memref<10x4xf32>) -> f32
    scf.reduce
  }
  return
}
