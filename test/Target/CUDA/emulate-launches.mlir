// RUN: weft-opt %s -split-input-file -verify-diagnostics --weft-gpu-emulate-launches | FileCheck %s

// A launch becomes loops over its blocks, then its threads (z outermost),
// and device memory becomes host memory.
// CHECK-LABEL: func.func @launch
// CHECK:         %[[BUF:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         scf.for %[[BZ:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:      scf.for %[[BY:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:        scf.for %[[BX:.*]] = %{{.*}} to %[[GX:.*]] step
// CHECK-NEXT:          scf.for %[[TZ:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:            scf.for %[[TY:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:              scf.for %[[TX:.*]] = %{{.*}} to %[[SX:.*]] step
// CHECK-NEXT:                %[[BASE:.*]] = arith.muli %[[BX]], %[[SX]]
// CHECK-NEXT:                %[[ID:.*]] = arith.addi %[[BASE]], %[[TX]]
// CHECK-NEXT:                memref.store %{{.*}}, %[[BUF]][%[[ID]]]
// CHECK:         memref.copy %[[BUF]], %arg0
// CHECK:         memref.dealloc %[[BUF]]
// CHECK-NOT:     gpu.
func.func @launch(%out: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %buf = gpu.alloc () : memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %i = arith.addi %base, %tx : index
    memref.store %one, %buf[%i] : memref<8xf32>
    gpu.terminator
  }
  gpu.memcpy %out, %buf : memref<8xf32>, memref<8xf32>
  gpu.dealloc %buf : memref<8xf32>
  return
}

// -----

// Threads that wait for each other cannot run one at a time.
func.func @barrier() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{weft-gpu-emulate-launches: this op synchronizes the threads of a block, which the emulation runs one at a time}}
    gpu.barrier
    gpu.terminator
  }
  return
}
