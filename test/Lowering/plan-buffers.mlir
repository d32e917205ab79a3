// RUN: weft-opt %s -split-input-file -weft-plan-buffers | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-plan-buffers="free-arena=false" | FileCheck %s --check-prefix=KEEP

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
// Without free-arena the arena is left to the deallocation pipeline.
// KEEP-LABEL: func.func @chain
// KEEP: memref.alloc() {alignment = 64 : i64} : memref<8192xi8>
// KEEP-NOT: memref.dealloc
// KEEP: return
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

// -----

// A caller's arena is live while its callees run, one at a time: the peak
// is the caller's 4096 bytes and its larger callee's 2048, not the sum of
// all three arenas.
// CHECK: module attributes {weft.memory_plan = {buffers = 3 : i64, peak_bytes = 6144 : i64, unplanned_bytes = 7168 : i64}}
// CHECK-LABEL: func.func private @small
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1024xi8>
// CHECK-LABEL: func.func private @large
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2048xi8>
// CHECK-LABEL: func.func @caller
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<4096xi8>
func.func private @small(%in: memref<256xf32>) {
  %t = memref.alloc() : memref<256xf32>
  memref.copy %in, %t : memref<256xf32> to memref<256xf32>
  memref.copy %t, %in : memref<256xf32> to memref<256xf32>
  memref.dealloc %t : memref<256xf32>
  return
}
func.func private @large(%in: memref<512xf32>) {
  %t = memref.alloc() : memref<512xf32>
  memref.copy %in, %t : memref<512xf32> to memref<512xf32>
  memref.copy %t, %in : memref<512xf32> to memref<512xf32>
  memref.dealloc %t : memref<512xf32>
  return
}
func.func @caller(%in: memref<1024xf32>, %p: memref<256xf32>, %q: memref<512xf32>) {
  %a = memref.alloc() : memref<1024xf32>
  memref.copy %in, %a : memref<1024xf32> to memref<1024xf32>
  call @small(%p) : (memref<256xf32>) -> ()
  call @large(%q) : (memref<512xf32>) -> ()
  memref.copy %a, %in : memref<1024xf32> to memref<1024xf32>
  memref.dealloc %a : memref<1024xf32>
  return
}

// -----

// A loop: %sum is carried through it, and the loop's result may be %sum
// itself, so %sum lives until the loop's result is last read (by the copy
// into %late): %late may not take its bytes. The iteration's temporary %t
// lives, for the plan, as long as the loop (each iteration reuses its
// place), so %late, born after the loop, takes %t's. %next, yielded to the
// next iteration, escapes and is left to the allocator.
// CHECK: module attributes {weft.memory_plan = {buffers = 3 : i64, peak_bytes = 2048 : i64, unplanned_bytes = 3072 : i64}}
// CHECK-LABEL: func.func @carried
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2048xi8>
// CHECK: memref.view %[[ARENA]][%c0{{.*}}][] : memref<2048xi8> to memref<256xf32>
// CHECK: scf.for
// CHECK: memref.view %[[ARENA]][%c1024{{.*}}][] : memref<2048xi8> to memref<256xf32>
// CHECK: memref.alloc() : memref<256xf32>
// CHECK: scf.yield
// CHECK: memref.view %[[ARENA]][%c1024{{.*}}][] : memref<2048xi8> to memref<256xf32>
func.func @carried(%in: memref<256xf32>, %out: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %sum = memref.alloc() : memref<256xf32>
  memref.copy %in, %sum : memref<256xf32> to memref<256xf32>
  %last = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %sum) -> (memref<256xf32>) {
    %t = memref.alloc() : memref<256xf32>
    memref.copy %acc, %t : memref<256xf32> to memref<256xf32>
    %next = memref.alloc() : memref<256xf32>
    memref.copy %t, %next : memref<256xf32> to memref<256xf32>
    scf.yield %next : memref<256xf32>
  }
  %late = memref.alloc() : memref<256xf32>
  memref.copy %last, %late : memref<256xf32> to memref<256xf32>
  memref.copy %late, %out : memref<256xf32> to memref<256xf32>
  return
}
