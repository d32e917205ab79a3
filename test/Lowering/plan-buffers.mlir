// RUN: weft-opt %s -weft-plan-buffers | FileCheck %s

// %a and %b are both live during the copy from %a to %b. %a is dead when %c
// is born, so %c reuses %a's bytes (offset 0), and %b's view of it keeps
// %b alive until %c is filled. The arena is the peak (2 x 4096 bytes), not
// the sum (4096 + 4096 + 1024).
// CHECK: module attributes {weft.memory_plan = {buffers = 3 : i64, peak_bytes = 8192 : i64, unplanned_bytes = 9216 : i64}}
// CHECK-LABEL: func.func @chain
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8192xi8>
// CHECK: memref.view %[[ARENA]][%c0{{.*}}][] : memref<8192xi8> to memref<1024xf32>
// CHECK: memref.view %[[ARENA]][%c4096{{.*}}][] : memref<8192xi8> to memref<1024xf32>
// CHECK: memref.view %[[ARENA]][%c0{{.*}}][] : memref<8192xi8> to memref<256xf32>
// CHECK-NOT: memref.dealloc %{{.*}} : memref<1024xf32>
// CHECK: memref.dealloc %[[ARENA]]
// CHECK-NEXT: return
func.func @chain(%in: memref<1024xf32>, %out: memref<256xf32>) {
  %a = memref.alloc() : memref<1024xf32>
  memref.copy %in, %a : memref<1024xf32> to memref<1024xf32>
  %b = memref.alloc() : memref<1024xf32>
  memref.copy %a, %b : memref<1024xf32> to memref<1024xf32>
  %c = memref.alloc() : memref<256xf32>
  %sub = memref.subview %b[0] [256] [1] : memref<1024xf32> to memref<256xf32, strided<[1]>>
  memref.copy %sub, %c : memref<256xf32, strided<[1]>> to memref<256xf32>
  memref.copy %c, %out : memref<256xf32> to memref<256xf32>
  memref.dealloc %a : memref<1024xf32>
  memref.dealloc %b : memref<1024xf32>
  memref.dealloc %c : memref<256xf32>
  return
}
