// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(weft-gpu-merge-launches)' | FileCheck %s
// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(weft-gpu-merge-launches{max-parameter-bytes=64})' | FileCheck %s --check-prefix=SMALL

// Two kernels writing distinct buffers run as one launch: the blocks of the
// first, then those of the second, each block finding its part by its id.
// CHECK-LABEL: func.func @independent
// CHECK:         gpu.launch blocks([[B:%[a-z0-9]+]], {{.*}}) in ({{%[a-z0-9]+}} = %c6{{.*}}) threads({{.*}}) in ({{%[a-z0-9]+}} = %c256
// CHECK:           [[BELOW:%[0-9]+]] = arith.cmpi ult, [[B]], %c4
// CHECK-NEXT:      scf.if [[BELOW]] {
// CHECK-NOT:           arith.subi
// CHECK:             memref.store {{.*}} %arg0
// CHECK:           } else {
// CHECK:             arith.subi [[B]], %c4
// CHECK:             memref.store {{.*}} %arg1
// CHECK:         } {weft.block_segments = array<i64: 0, 4>}
// CHECK-NOT:     gpu.launch
// SMALL-LABEL: func.func @independent
// SMALL-COUNT-2: gpu.launch
// SMALL-NOT:     weft.block_segments
func.func @independent(%x: memref<1024xf32>, %y: memref<512xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tx : index
    memref.store %one, %x[%i] : memref<1024xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tx : index
    memref.store %one, %y[%i] : memref<512xf32>
    gpu.terminator
  }
  return
}

// -----

// The second kernel reads what the first writes: two launches, in order.
// CHECK-LABEL: func.func @dependent
// CHECK:         gpu.launch
// CHECK:           memref.store {{.*}} %arg0
// CHECK:         gpu.launch
// CHECK:           memref.load %arg0
// CHECK-NOT:     weft.block_segments
func.func @dependent(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<256xf32>
    memref.store %v, %y[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}

// -----

// A kernel that does not depend on its neighbours moves up to the first
// wave: the first and third kernels merge, the second reads the first's
// output and runs after them. Reading the same buffer is no dependence.
// CHECK-LABEL: func.func @waves
// CHECK:         gpu.launch
// CHECK:           memref.store {{.*}} %arg1
// CHECK:           memref.store {{.*}} %arg3
// CHECK:         } {weft.block_segments = array<i64: 0, 1>}
// CHECK:         gpu.launch
// CHECK:           memref.load %arg1
// CHECK:           memref.store {{.*}} %arg2
// CHECK-NOT:     gpu.launch
func.func @waves(%in: memref<256xf32>, %x: memref<256xf32>, %y: memref<256xf32>, %z: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %in[%tx] : memref<256xf32>
    memref.store %v, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<256xf32>
    memref.store %v, %y[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %in[%tx] : memref<256xf32>
    memref.store %v, %z[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}

// -----

// A call of unknown effects between two kernels keeps them apart.
// CHECK-LABEL: func.func @library_call_between
// CHECK:         gpu.launch
// CHECK:         call @library
// CHECK:         gpu.launch
// CHECK-NOT:     weft.block_segments
func.func private @library()
func.func @library_call_between(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  call @library() : () -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %y[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}

// -----

// A GEMM writes only its c (weft/runtime/Contract.h): the kernels on
// either side touch other buffers, so they merge, after the GEMM.
// CHECK-LABEL: func.func @around_a_gemm
// CHECK:         call @weft_cuda_gemm_f32
// CHECK:         gpu.launch
// CHECK:           memref.store {{.*}} %arg3
// CHECK:           memref.store {{.*}} %arg4
// CHECK:         } {weft.block_segments = array<i64: 0, 1>}
// CHECK-NOT:     gpu.launch
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @around_a_gemm(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf32>, %x: memref<256xf32>, %y: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  %accumulate = arith.constant 0 : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  %ua = memref.cast %a : memref<16x16xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<16x16xf32> to memref<*xf32>
  %uc = memref.cast %c : memref<16x16xf32> to memref<*xf32>
  call @weft_cuda_gemm_f32(%ua, %ub, %uc, %uc, %uc, %accumulate) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %y[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}

// -----

// A kernel reading the GEMM's c runs after it, and so after the kernel
// writing the GEMM's a: three ops in their order.
// CHECK-LABEL: func.func @through_a_gemm
// CHECK:         gpu.launch
// CHECK:           memref.store {{.*}} %arg0
// CHECK:         call @weft_cuda_gemm_f32
// CHECK:         gpu.launch
// CHECK:           memref.load %arg2
// CHECK-NOT:     weft.block_segments
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @through_a_gemm(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf32>, %y: memref<16x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  %accumulate = arith.constant 0 : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    memref.store %one, %a[%c0, %tx] : memref<16x16xf32>
    gpu.terminator
  }
  %ua = memref.cast %a : memref<16x16xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<16x16xf32> to memref<*xf32>
  %uc = memref.cast %c : memref<16x16xf32> to memref<*xf32>
  call @weft_cuda_gemm_f32(%ua, %ub, %uc, %uc, %uc, %accumulate) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %v = memref.load %c[%c0, %tx] : memref<16x16xf32>
    memref.store %v, %y[%c0, %tx] : memref<16x16xf32>
    gpu.terminator
  }
  return
}

// -----

// A bias gradient's second sum (reading the first's partial sums) and a
// kernel after a GEMM: the first sum joins the kernel after the GEMM, the
// second follows that launch. Three ops where the kernels' waves made four.
// CHECK-LABEL: func.func @across_a_gemm
// CHECK:         call @weft_cuda_gemm_f32
// CHECK:         gpu.launch
// CHECK:           memref.store {{.*}} %arg3
// CHECK:           memref.store {{.*}} %arg5
// CHECK:         } {weft.block_segments = array<i64: 0, 1>}
// CHECK:         gpu.launch
// CHECK:           memref.load %arg3
// CHECK-NOT:     gpu.launch
func.func private @weft_cuda_gemm_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
func.func @across_a_gemm(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf32>, %partial: memref<256xf32>, %bias: memref<256xf32>, %y: memref<16x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  %accumulate = arith.constant 0 : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %partial[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %partial[%tx] : memref<256xf32>
    memref.store %v, %bias[%tx] : memref<256xf32>
    gpu.terminator
  }
  %ua = memref.cast %a : memref<16x16xf32> to memref<*xf32>
  %ub = memref.cast %b : memref<16x16xf32> to memref<*xf32>
  %uc = memref.cast %c : memref<16x16xf32> to memref<*xf32>
  call @weft_cuda_gemm_f32(%ua, %ub, %uc, %uc, %uc, %accumulate) : (memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %i = arith.remui %tx, %c16 : index
    %v = memref.load %c[%c0, %i] : memref<16x16xf32>
    memref.store %v, %y[%c0, %i] : memref<16x16xf32>
    gpu.terminator
  }
  return
}

// -----

// Views of one arena: disjoint bytes merge, overlapping bytes do not.
// CHECK-LABEL: func.func @arena_views
// CHECK:         gpu.launch
// CHECK:         } {weft.block_segments = array<i64: 0, 1>}
// CHECK:         gpu.launch
// CHECK-NOT:     weft.block_segments
// CHECK:         return
func.func @arena_views() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  %c2044 = arith.constant 2044 : index
  %one = arith.constant 1.0 : f32
  %arena = memref.alloc() : memref<4096xi8>
  %a = memref.view %arena[%c0][] : memref<4096xi8> to memref<256xf32>
  %b = memref.view %arena[%c1024][] : memref<4096xi8> to memref<256xf32>
  %c = memref.view %arena[%c2044][] : memref<4096xi8> to memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %a[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %b[%tx] : memref<256xf32>
    gpu.terminator
  }
  // Bytes 2044..3067 overlap %b's 1024..2047.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %c[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}

// -----

// A private function's arguments alias where a call passes the same
// buffer; a public function's are distinct buffers.
// CHECK-LABEL: func.func private @callee
// CHECK:         gpu.launch
// CHECK:         gpu.launch
// CHECK-NOT:     weft.block_segments
// CHECK-LABEL: func.func @entry
// CHECK:         gpu.launch
// CHECK:         } {weft.block_segments = array<i64: 0, 1>}
func.func private @callee(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %y[%tx] : memref<256xf32>
    memref.store %v, %y[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}
func.func @entry(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  call @callee(%x, %x) : (memref<256xf32>, memref<256xf32>) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %y[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}

// -----

// Parts share the workgroup buffers of one type, and kernels of different
// block sizes stay apart.
// CHECK-LABEL: func.func @shared_memory
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in ({{%[a-z0-9]+}} = %c32{{.*}}) workgroup([[SHARED:%[a-z0-9]+]] : memref<32xf32, #gpu.address_space<workgroup>>) {
// CHECK-NOT:       workgroup(
// CHECK:           memref.store {{.*}} [[SHARED]]
// CHECK:           memref.store {{.*}} [[SHARED]]
// CHECK:         } {weft.block_segments = array<i64: 0, 2>}
// CHECK:         gpu.launch {{.*}} in ({{%[a-z0-9]+}} = %c64
// CHECK-NOT:     weft.block_segments
func.func @shared_memory(%x: memref<64xf32>, %y: memref<64xf32>, %z: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%s : memref<32xf32, #gpu.address_space<workgroup>>) {
    memref.store %one, %s[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %v = memref.load %s[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    %base = arith.muli %bx, %c32 : index
    %i = arith.addi %base, %tx : index
    memref.store %v, %x[%i] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%s : memref<32xf32, #gpu.address_space<workgroup>>) {
    memref.store %one, %s[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %v = memref.load %s[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    memref.store %v, %y[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %z[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// Column slices of one buffer (a concatenation's parts) touch disjoint
// bytes of the same rows: the kernels writing them merge. Slices that share
// columns do not.
// CHECK-LABEL: func.func @column_slices
// CHECK:         gpu.launch
// CHECK:         } {weft.block_segments = array<i64: 0, 1, 2>}
// CHECK:         gpu.launch
// CHECK:           memref.store {{.*}} offset: 32>>
// CHECK-NOT:     weft.block_segments
// CHECK:         return
func.func @column_slices(%x: memref<8x192xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %a = memref.subview %x[0, 0] [8, 64] [1, 1] : memref<8x192xf32> to memref<8x64xf32, strided<[192, 1]>>
  %b = memref.subview %x[0, 64] [8, 64] [1, 1] : memref<8x192xf32> to memref<8x64xf32, strided<[192, 1], offset: 64>>
  %c = memref.subview %x[0, 128] [8, 64] [1, 1] : memref<8x192xf32> to memref<8x64xf32, strided<[192, 1], offset: 128>>
  %d = memref.subview %x[0, 32] [8, 64] [1, 1] : memref<8x192xf32> to memref<8x64xf32, strided<[192, 1], offset: 32>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %a[%c1, %tx] : memref<8x64xf32, strided<[192, 1]>>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %b[%c1, %tx] : memref<8x64xf32, strided<[192, 1], offset: 64>>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %c[%c1, %tx] : memref<8x64xf32, strided<[192, 1], offset: 128>>
    gpu.terminator
  }
  // Columns 32..95 overlap the first and second slices: after them.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %one, %d[%c1, %tx] : memref<8x64xf32, strided<[192, 1], offset: 32>>
    gpu.terminator
  }
  return
}

// -----

// The second kernel overwrites what the first reads (write after read):
// in one launch its blocks could run before the first's reads, so two
// launches, in order.
// CHECK-LABEL: func.func @overwrites_read
// CHECK:         gpu.launch
// CHECK:           memref.load %arg0
// CHECK:         gpu.launch
// CHECK:           memref.store {{.*}} %arg0
// CHECK-NOT:     weft.block_segments
func.func @overwrites_read(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<256xf32>
    memref.store %v, %y[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %one, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}
