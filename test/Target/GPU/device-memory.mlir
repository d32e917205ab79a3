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

// A constant that only kernels read goes into each kernel that reads it
// (kernel outlining copies the global into the kernel's module): it
// reaches the device with the code, not per call.
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
// CHECK-LABEL: func.func @constant
// CHECK-NOT:     gpu.memcpy
// CHECK:         gpu.launch
// CHECK:           %[[FIRST:.*]] = memref.get_global @table : memref<4xf32>
// CHECK-NEXT:      memref.load %[[FIRST]]
// CHECK:           %[[SECOND:.*]] = memref.get_global @table : memref<4xf32>
// CHECK-NEXT:      memref.load %[[SECOND]]
// CHECK:         gpu.launch
// CHECK:           %[[THIRD:.*]] = memref.get_global @table : memref<4xf32>
// CHECK-NEXT:      memref.load %[[THIRD]]
// CHECK-NOT:     gpu.dealloc
// CHECK:         return
func.func @constant(%out: memref<f32>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %t = memref.get_global @table : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %t[%c0] : memref<4xf32>
    %y = memref.load %t[%c3] : memref<4xf32>
    %s = arith.addf %x, %y : f32
    memref.store %s, %out[] : memref<f32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %t[%c3] : memref<4xf32>
    memref.store %x, %out[] : memref<f32>
    gpu.terminator
  }
  return
}

// -----

// A constant the host code passes on (here a copy) is copied to the device
// at the start of the function and freed at its return.
memref.global "private" constant @host_table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
// CHECK-LABEL: func.func @host_constant
// CHECK:         %[[HOST:.*]] = memref.get_global @host_table : memref<4xf32>
// CHECK-NEXT:    %[[DEVICE:.*]] = gpu.alloc () : memref<4xf32>
// CHECK-NEXT:    gpu.memcpy %[[DEVICE]], %[[HOST]]
// CHECK:         gpu.memcpy %{{.*}}, %[[DEVICE]]
// CHECK:         gpu.dealloc %[[DEVICE]]
// CHECK-NEXT:    return
func.func @host_constant(%out: memref<4xf32>) {
  %t = memref.get_global @host_table : memref<4xf32>
  memref.copy %t, %out : memref<4xf32> to memref<4xf32>
  return
}
