// RUN: weft-opt %s --weft-gpu-emulate-launches=check-accesses=false | FileCheck %s

// check-accesses=false runs the kernels unchecked, and so runs ops whose
// accesses the checks cannot see.
// CHECK-LABEL: func.func @copy
// CHECK-NOT:     func.call
// CHECK:         scf.for
// CHECK:           memref.copy
func.func @copy(%a: memref<4xf32>, %b: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.copy %a, %b : memref<4xf32> to memref<4xf32>
    gpu.terminator
  }
  return
}
