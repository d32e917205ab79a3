// RUN: weft-opt %s -split-input-file --weft-gpu-assume-alignment | FileCheck %s

// The runtime's buffers (a public function's arguments, allocations) are
// 64-byte aligned; a view at a static byte shift or offset keeps the
// largest power of two dividing it. Each kernel reads its own statement of
// what is known, where it says more than the element's size.
// CHECK-LABEL: func.func @views
// CHECK:         %[[ARENA:.*]] = gpu.alloc () : memref<4096xi8>
// CHECK:         %[[AT16:.*]] = memref.view %[[ARENA]][%c16]
// CHECK:         %[[AT4:.*]] = memref.view %[[ARENA]][%c4]
// CHECK:         %[[ROW:.*]] = memref.subview %arg0[2, 0] [1, 64] [1, 1]
// CHECK:         gpu.launch
// CHECK-DAG:       %[[X:.*]] = memref.assume_alignment %arg0, 64 : memref<8x64xf32>
// CHECK-DAG:       %[[A:.*]] = memref.assume_alignment %[[AT16]], 16 : memref<64xf32>
// CHECK-DAG:       %[[R:.*]] = memref.assume_alignment %[[ROW]], 64 : memref<64xf32, strided<[1], offset: 128>>
// CHECK-NOT:       memref.assume_alignment
// CHECK:           memref.load %[[X]]
// CHECK:           memref.load %[[A]]
// CHECK:           memref.load %[[AT4]]
// CHECK:           memref.store %{{.*}}, %[[R]]
func.func @views(%x: memref<8x64xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %arena = gpu.alloc () : memref<4096xi8>
  %at16 = memref.view %arena[%c16][] : memref<4096xi8> to memref<64xf32>
  %at4 = memref.view %arena[%c4][] : memref<4096xi8> to memref<64xf32>
  %row = memref.subview %x[2, 0] [1, 64] [1, 1] : memref<8x64xf32> to memref<64xf32, strided<[1], offset: 128>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %a = memref.load %x[%c1, %tx] : memref<8x64xf32>
    %b = memref.load %at16[%tx] : memref<64xf32>
    %c = memref.load %at4[%tx] : memref<64xf32>
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    memref.store %t, %row[%tx] : memref<64xf32, strided<[1], offset: 128>>
    gpu.terminator
  }
  gpu.dealloc %arena : memref<4096xi8>
  return
}

// -----

// A private function's argument is as aligned as every call's operand: 16
// bytes where one call passes a view at byte 16 and the other the arena.
// A function called with a view at byte 4 states nothing.
// CHECK-LABEL: func.func private @layer
// CHECK:         gpu.launch
// CHECK-NEXT:      memref.assume_alignment %arg0, 16 : memref<64xf32>
// CHECK-LABEL: func.func private @unaligned
// CHECK:         gpu.launch
// CHECK-NOT:       memref.assume_alignment
// CHECK:           gpu.terminator
func.func private @layer(%x: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}
func.func private @unaligned(%x: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}
func.func @step() {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %arena = gpu.alloc () : memref<1024xi8>
  %a = memref.view %arena[%c0][] : memref<1024xi8> to memref<64xf32>
  %b = memref.view %arena[%c16][] : memref<1024xi8> to memref<64xf32>
  %c = memref.view %arena[%c4][] : memref<1024xi8> to memref<64xf32>
  call @layer(%a) : (memref<64xf32>) -> ()
  call @layer(%b) : (memref<64xf32>) -> ()
  call @unaligned(%c) : (memref<64xf32>) -> ()
  gpu.dealloc %arena : memref<1024xi8>
  return
}

// -----

// A view a thread takes of its neighbours (weft-gpu-launch-loops) is as
// aligned as its source and its offsets allow: the column is a multiple of
// 4 (16 bytes of f32), the row any (a 256-byte stride); a column that is
// any index says nothing.
// CHECK-LABEL: func.func @neighbours
// CHECK:           %[[X:.*]] = memref.assume_alignment %arg0, 64
// CHECK:           %[[FOUR:.*]] = memref.subview %[[X]][%{{.*}}, %[[COL:.*]]] [1, 4] [1, 1]
// CHECK-NEXT:      %[[ALIGNED:.*]] = memref.assume_alignment %[[FOUR]], 16
// CHECK-NEXT:      memref.load %[[ALIGNED]][%c0
// CHECK:           %[[ANY:.*]] = memref.subview %[[X]][%{{.*}}, %{{.*}}] [1, 4] [1, 1]
// CHECK-NEXT:      memref.load %[[ANY]][%c0
func.func @neighbours(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %col = arith.muli %tx, %c4 : index
    %four = memref.subview %x[%bx, %col] [1, 4] [1, 1] : memref<8x64xf32> to memref<4xf32, strided<[1], offset: ?>>
    %v = memref.load %four[%c0] : memref<4xf32, strided<[1], offset: ?>>
    %any = memref.subview %x[%bx, %tx] [1, 4] [1, 1] : memref<8x64xf32> to memref<4xf32, strided<[1], offset: ?>>
    %w = memref.load %any[%c0] : memref<4xf32, strided<[1], offset: ?>>
    %s = arith.addf %v, %w : f32
    memref.store %s, %y[%bx, %tx] : memref<8x64xf32>
    gpu.terminator
  }
  return
}

// -----

// A public function the module also calls is as aligned as those calls'
// operands too, not only as the runtime's buffers: here a view at byte 4.
// CHECK-LABEL: func.func @called_entry
// CHECK:         gpu.launch
// CHECK-NOT:       memref.assume_alignment
// CHECK:           gpu.terminator
func.func @called_entry(%x: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}
func.func @caller() {
  %c4 = arith.constant 4 : index
  %arena = gpu.alloc () : memref<1024xi8>
  %c = memref.view %arena[%c4][] : memref<1024xi8> to memref<64xf32>
  call @called_entry(%c) : (memref<64xf32>) -> ()
  gpu.dealloc %arena : memref<1024xi8>
  return
}
