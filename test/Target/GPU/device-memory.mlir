// RUN: weft-opt %s -split-input-file --weft-gpu-device-memory | FileCheck %s
// RUN: weft-opt %s -split-input-file --weft-gpu-device-memory | FileCheck %s --check-prefix=DEVICE-ONLY

// No host allocation, free or copy is left anywhere in the output (a
// FileCheck run of CHECK-NOTs alone scans all of it).
// DEVICE-ONLY-NOT: memref.alloc()
// DEVICE-ONLY-NOT: memref.dealloc
// DEVICE-ONLY-NOT: memref.copy

// Host allocations, frees and contiguous copies become device operations;
// a kernel's own memory is left alone.
// CHECK-LABEL: func.func @buffers
// CHECK:         %[[B:.*]] = gpu.alloc () : memref<8xf32>
// CHECK:         gpu.memcpy %[[B]], %arg0 : memref<8xf32>, memref<8xf32>
// CHECK:         gpu.launch
// CHECK:           memref.alloca
// CHECK:         gpu.dealloc %[[B]] : memref<8xf32>
func.func @buffers(%a: memref<8xf32>) {
  %b = memref.alloc() : memref<8xf32>
  memref.copy %a, %b : memref<8xf32> to memref<8xf32>
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %t = memref.alloca() : memref<2xf32>
    gpu.terminator
  }
  memref.dealloc %b : memref<8xf32>
  return
}

// -----

// A constant in host memory is copied to the device at the start of the
// function and freed at its return.
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
// CHECK-LABEL: func.func @constant
// CHECK:         %[[HOST:.*]] = memref.get_global @table : memref<4xf32>
// CHECK-NEXT:    %[[DEVICE:.*]] = gpu.alloc () : memref<4xf32>
// CHECK-NEXT:    gpu.memcpy %[[DEVICE]], %[[HOST]]
// CHECK:         gpu.launch
// CHECK:           memref.load %[[DEVICE]]
// CHECK:         gpu.dealloc %[[DEVICE]]
// CHECK-NEXT:    return
func.func @constant(%out: memref<f32>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %t = memref.get_global @table : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %t[%c0] : memref<4xf32>
    memref.store %x, %out[] : memref<f32>
    gpu.terminator
  }
  return
}
