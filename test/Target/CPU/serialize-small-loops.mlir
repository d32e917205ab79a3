// RUN: weft-opt %s -split-input-file -weft-serialize-inner-loop | FileCheck %s

// 4 x 8 x 16 = 512 iterations: less work than a parallel region costs, so
// the whole nest runs sequentially.
// CHECK-LABEL: func.func @small
// CHECK-NOT: scf.parallel
// CHECK: scf.for %[[I:.*]] = %c0 to %c4 step %c1
// CHECK: scf.for %[[J:.*]] = %c0 to %c8 step %c1
// CHECK: scf.for %[[K:.*]] = %c0 to %c16 step %c1
// CHECK: memref.load %{{.*}}[%[[I]], %[[J]], %[[K]]]
func.func @small(%in: memref<4x8x16xf32>, %out: memref<4x8x16xf32>) {
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

// 64 x 1024 iterations (counting the inner sequential loop) stay parallel
// over the outer dim.
// CHECK-LABEL: func.func @large
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c64) step (%c1)
// CHECK: scf.for
func.func @large(%in: memref<64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    scf.for %j = %c0 to %c1024 step %c1 {
      %v = memref.load %in[%i, %j] : memref<64x1024xf32>
      memref.store %v, %in[%i, %j] : memref<64x1024xf32>
    }
    scf.reduce
  }
  return
}
