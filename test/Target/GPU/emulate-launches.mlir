// RUN: weft-opt %s -split-input-file -verify-diagnostics --weft-gpu-emulate-launches | FileCheck %s

// A launch becomes loops over its blocks (the last first, as a GPU may run
// them in any order), then its threads (z outermost), and device memory becomes host memory. Each store is checked first: the
// runtime is given the buffer's base, the element's address (base +
// (offset + index * stride) * 4 bytes), its size, that it writes, and the
// kernel's name.
// CHECK-LABEL: func.func private @weft_emulation_check_access(i64, i64, i64, i64, i64)
// The launch runs as a function of its own, never inlined: it takes the
// values it uses and copies the constants.
// CHECK-LABEL: func.func @launch
// CHECK:         %[[HOSTBUF:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    call @launch_kernel_0(%[[HOSTBUF]]) : (memref<8xf32>) -> ()
// CHECK-NEXT:    memref.copy %[[HOSTBUF]], %arg0
// CHECK-NEXT:    memref.dealloc %[[HOSTBUF]]
// CHECK:       func.func private @launch_kernel_0(%[[BUF:.*]]: memref<8xf32>) attributes {passthrough = ["noinline"]}
// CHECK:         %[[NAMES:.*]] = memref.get_global @__weft_kernel_name_0 : memref<{{[0-9]+}}xi8>
// CHECK:         %[[NAMEPTR:.*]] = memref.extract_aligned_pointer_as_index %[[NAMES]]
// CHECK:         %[[NAME:.*]] = arith.index_cast %[[NAMEPTR]] : index to i64
// CHECK:         %[[FOUR:.*]] = arith.constant 4 : index
// CHECK:         %[[WRITE:.*]] = arith.constant 1 : i64
// CHECK:         scf.for %[[IZ:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:      arith.subi
// CHECK-NEXT:      arith.subi %{{.*}}, %[[IZ]]
// CHECK-NEXT:      scf.for %[[IY:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:        arith.subi
// CHECK-NEXT:        arith.subi %{{.*}}, %[[IY]]
// CHECK-NEXT:        scf.for %[[IX:.*]] = %{{.*}} to %[[GX:.*]] step
// CHECK-NEXT:          %[[LASTX:.*]] = arith.subi %[[GX]], %{{.*}}
// CHECK-NEXT:          %[[BX:.*]] = arith.subi %[[LASTX]], %[[IX]]
// CHECK-NEXT:          scf.for %[[TZ:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:            scf.for %[[TY:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:              scf.for %[[TX:.*]] = %{{.*}} to %[[SX:.*]] step
// The thread's linear id (unused here), then the kernel.
// CHECK-COUNT-4:             arith.
// CHECK-NEXT:                %[[BASE:.*]] = arith.muli %[[BX]], %[[SX]]
// CHECK-NEXT:                %[[ID:.*]] = arith.addi %[[BASE]], %[[TX]]
// CHECK-NEXT:                %{{.*}}, %[[OFFSET:.*]], %{{.*}}, %[[STRIDE:.*]] = memref.extract_strided_metadata %[[BUF]]
// CHECK-NEXT:                %[[SCALED:.*]] = arith.muli %[[ID]], %[[STRIDE]]
// CHECK-NEXT:                %[[ELEMENT:.*]] = arith.addi %[[OFFSET]], %[[SCALED]]
// CHECK-NEXT:                %[[START:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK-NEXT:                %[[BYTES:.*]] = arith.muli %[[ELEMENT]], %[[FOUR]]
// CHECK-NEXT:                %[[ADDRESS:.*]] = arith.addi %[[START]], %[[BYTES]]
// CHECK-NEXT:                %[[START64:.*]] = arith.index_cast %[[START]]
// CHECK-NEXT:                %[[ADDRESS64:.*]] = arith.index_cast %[[ADDRESS]]
// CHECK-NEXT:                %[[SIZE64:.*]] = arith.index_cast %[[FOUR]]
// CHECK-NEXT:                func.call @weft_emulation_check_access(%[[START64]], %[[ADDRESS64]], %[[SIZE64]], %[[WRITE]], %[[NAME]])
// CHECK-NEXT:                memref.store %{{.*}}, %[[BUF]][%[[ID]]]
// CHECK-NOT:     gpu.
// CHECK:       memref.global "private" constant @__weft_kernel_name_0 : memref<{{[0-9]+}}xi8> = dense<[108, 97, 117, 110, 99, 104, 32, 35, 48, 32, 40
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

// A block's threads run phase by phase: one loop over the threads up to
// the barrier, one after it, one from the shuffle on. Shared memory is one
// buffer for the launch; values that cross a phase boundary are kept per
// thread, and the shuffle's partner value comes from a slot every thread
// filled in the phase before: lane ^ 1, when that lane is below the width.
// CHECK-LABEL: func.func @phases
// CHECK:         %[[SHARED:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         %[[KEPT:.*]] = memref.alloc(%[[THREADS:.*]]) : memref<?xf32>
// CHECK:         %[[SUMS:.*]] = memref.alloc(%[[THREADS]]) : memref<?xf32>
// CHECK:         %[[SLOT:.*]] = memref.alloc(%[[THREADS]]) : memref<?xf32>
// The first phase, up to the barrier.
// CHECK:         memref.store %{{.*}}, %[[SHARED]][%{{.*}}] : memref<8xf32>
// CHECK-NEXT:    memref.store %{{.*}}, %[[KEPT]][%{{.*}}] : memref<?xf32>
// The second reads the other threads' shared values and fills the slots.
// CHECK:         memref.load %[[KEPT]]
// CHECK:         memref.load %[[SHARED]]
// CHECK:         memref.store %{{.*}}, %[[SUMS]]
// CHECK-NEXT:    memref.store %{{.*}}, %[[SLOT]]
// The third is the shuffle's.
// CHECK:         %[[OWN:.*]] = memref.load %[[SUMS]][%[[TID:.*]]]
// CHECK:         %[[LANE:.*]] = arith.remui %[[TID]], %c32
// CHECK:         %[[PARTNER:.*]] = arith.xori %[[LANE]]
// CHECK:         %[[VALID:.*]] = arith.cmpi ult, %[[PARTNER]]
// CHECK:         %[[FROM:.*]] = arith.select %[[VALID]]
// CHECK:         %[[THEIRS:.*]] = memref.load %[[SLOT]][%[[FROM]]]
// CHECK:         arith.select %[[VALID]], %[[THEIRS]], %[[OWN]]
// CHECK:         memref.dealloc %[[SHARED]]
func.func @phases(%out: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c7 = arith.constant 7 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) workgroup(%shared : memref<8xf32, #gpu.address_space<workgroup>>) {
    %i = arith.index_cast %tx : index to i32
    %v = arith.sitofp %i : i32 to f32
    memref.store %v, %shared[%tx] : memref<8xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %mirror = arith.subi %c7, %tx : index
    %w = memref.load %shared[%mirror] : memref<8xf32, #gpu.address_space<workgroup>>
    %sum = arith.addf %v, %w : f32
    %one = arith.constant 1 : i32
    %width = arith.constant 8 : i32
    %partner, %valid = gpu.shuffle xor %sum, %one, %width : f32
    memref.store %partner, %out[%tx] : memref<8xf32>
    gpu.terminator
  }
  return
}

// -----

// A barrier that only some threads reach is not a phase boundary.
func.func @divergent_barrier(%flag: i1) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.if %flag {
      // expected-error @+1 {{weft-gpu-emulate-launches: the emulation runs a block's threads phase by phase between barriers and shuffles, which must be at the kernel's top level}}
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// A kernel's own stack buffer is not device memory: its accesses are not
// checked; the device buffer's load is (is_write 0).
// CHECK-LABEL: func.func @private_buffer
// CHECK:         %[[READ:.*]] = arith.constant 0 : i64
// CHECK:         memref.alloca
// CHECK-NOT:     func.call
// CHECK:         memref.store %{{.*}}, %[[STACK:.*]][
// CHECK-NOT:     func.call
// CHECK:         memref.load %[[STACK]][
// CHECK:         func.call @weft_emulation_check_access(%{{.*}}, %{{.*}}, %{{.*}}, %[[READ]], %{{.*}})
// CHECK-NEXT:    memref.load %arg0[
func.func @private_buffer(%in: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %stack = memref.alloca() : memref<1xf32>
    memref.store %one, %stack[%c0] : memref<1xf32>
    %a = memref.load %stack[%c0] : memref<1xf32>
    %b = memref.load %in[%c0] : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// An access the checks do not know how to see is refused, not run unchecked.
func.func @unchecked_copy(%a: memref<4xf32>, %b: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{weft-gpu-emulate-launches: cannot check the device memory accesses of this op}}
    memref.copy %a, %b : memref<4xf32> to memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// A launch and a GEMM the kernel report numbered (weft.launch_id) first
// tell the runtime their number, which counts the bytes each touches under
// it ($WEFT_EMULATION_COUNTS).
// CHECK-LABEL: func.func @numbered
// CHECK:         %[[SEVEN:.*]] = arith.constant 7 : i64
// CHECK:         call @weft_emulation_launch(%[[SEVEN]]) : (i64) -> ()
// CHECK-NEXT:    call @numbered_kernel_0(%arg0)
// CHECK:         %[[EIGHT:.*]] = arith.constant 8 : i64
// CHECK:         call @weft_emulation_launch(%[[EIGHT]]) : (i64) -> ()
// CHECK-NEXT:    call @weft_emulated_gemm_f32
func.func private @weft_emulated_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @numbered(%buf: memref<8xf32>, %a: memref<*xf32>, %accumulate: i64) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %v = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    memref.store %v, %buf[%tx] : memref<8xf32>
    gpu.terminator
  } {weft.launch_id = 7 : i64}
  call @weft_emulated_gemm_f32(%a, %a, %a, %a, %a, %accumulate) {weft.launch_id = 8 : i64} : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  return
}

// -----

// A merged launch (weft-gpu-merge-launches) runs as its parts, the last
// first, each keeping only its own branch of the dispatch, so that its
// barriers are at its top level again; the runtime is told where each
// later part starts, to count its bytes on their own.
// CHECK-LABEL: func.func private @weft_emulation_launch_part()
// CHECK-LABEL: func.func @merged
// CHECK:         call @merged_kernel_0(
// CHECK:       func.func private @merged_kernel_0
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c1{{.*}} step
// CHECK:           memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<4xf32>
// CHECK-NOT:       scf.if
// CHECK:         call @weft_emulation_launch_part()
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c2{{.*}} step
// CHECK:           memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK-NOT:       scf.if
// CHECK:         return
func.func @merged(%x: memref<8xf32>, %y: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %bx_ = gpu.alloc () : memref<8xf32>
  %by_ = gpu.alloc () : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c3, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1)
             workgroup(%s : memref<4xf32, #gpu.address_space<workgroup>>) {
    %first = arith.cmpi ult, %bx, %c2 : index
    scf.if %first {
      memref.store %one, %s[%tx] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %v = memref.load %s[%tx] : memref<4xf32, #gpu.address_space<workgroup>>
      %base = arith.muli %bx, %sx : index
      %i = arith.addi %base, %tx : index
      memref.store %v, %bx_[%i] : memref<8xf32>
    } else {
      memref.store %one, %s[%tx] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %v = memref.load %s[%tx] : memref<4xf32, #gpu.address_space<workgroup>>
      memref.store %v, %by_[%tx] : memref<4xf32>
    }
    gpu.terminator
  } {weft.block_segments = array<i64: 0, 2>}
  gpu.memcpy %x, %bx_ : memref<8xf32>, memref<8xf32>
  gpu.memcpy %y, %by_ : memref<4xf32>, memref<4xf32>
  return
}

// -----

// A stated alignment becomes the runtime's check of it, made before the
// launch for a buffer the kernel takes from host code: the address of the
// view's first byte (aligned pointer + offset * 4 bytes), the alignment,
// the kernel's name. The kernel reads the buffer itself.
// CHECK-LABEL: func.func private @weft_emulation_check_alignment(i64, i64, i64)
// CHECK-LABEL: func.func @aligned
// CHECK:         %[[VIEW:.*]] = memref.subview
// CHECK:         %[[NAMES:.*]] = memref.get_global @__weft_kernel_name_
// CHECK:         %[[NAME:.*]] = arith.index_cast %{{.*}} : index to i64
// CHECK:         %[[ALIGN:.*]] = arith.constant 16 : i64
// CHECK:         %[[BASE:.*]], %[[OFFSET:.*]], %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[VIEW]]
// CHECK:         %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[VIEW]]
// CHECK:         %[[C4:.*]] = arith.constant 4 : index
// CHECK:         %[[SKIP:.*]] = arith.muli %[[OFFSET]], %[[C4]]
// CHECK:         %[[FIRST:.*]] = arith.addi %[[PTR]], %[[SKIP]]
// CHECK:         %[[ADDRESS:.*]] = arith.index_cast %[[FIRST]] : index to i64
// CHECK:         call @weft_emulation_check_alignment(%[[ADDRESS]], %[[ALIGN]], %[[NAME]])
// CHECK:         call @aligned_kernel_0(%[[VIEW]])
// CHECK:       func.func private @aligned_kernel_0
// CHECK-NOT:     memref.assume_alignment
// CHECK:         return
func.func @aligned(%x: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %view = memref.subview %x[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %a = memref.assume_alignment %view, 16 : memref<4xf32, strided<[1], offset: 4>>
    memref.store %one, %a[%tx] : memref<4xf32, strided<[1], offset: 4>>
    gpu.terminator
  }
  return
}
