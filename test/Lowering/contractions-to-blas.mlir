// RUN: weft-opt %s -split-input-file -weft-contractions-to-blas | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-contractions-to-blas="callee=weft_cuda_gemm require-unit-strides=1" | FileCheck %s --check-prefix=CUBLAS
// RUN: weft-opt %s -split-input-file -weft-contractions-to-blas="callee=weft_cuda_gemm require-unit-strides=1 tf32=1" | FileCheck %s --check-prefix=TF32

// A batched matmul whose rhs is broadcast over the batch: views with
// stride 0 for the broadcast batch dim, then one call.
// CHECK-LABEL: func.func @broadcast_rhs
// CHECK: %[[A:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [4, 2, 3], strides: [6, 3, 1]
// CHECK: %[[B:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [4, 3, 5], strides: [0, 5, 1]
// CHECK: %[[C:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [4, 2, 5], strides: [10, 5, 1]
// CHECK: call @weft_gemm_f32
// CHECK-NOT: linalg.generic
// The CUDA target's callee, for matrices cuBLAS reads (a broadcast batch
// is a strided batch of stride 0).
// CUBLAS-LABEL: func.func private @weft_cuda_gemm_f32
// CUBLAS-LABEL: func.func @broadcast_rhs
// CUBLAS: call @weft_cuda_gemm_f32({{.*}}, %c1_i64)
// Where TF32 is allowed, an f32 GEMM's flags say so (kGemmAccumulate |
// kGemmTf32).
// TF32-LABEL: func.func @broadcast_rhs
// TF32: call @weft_cuda_gemm_f32({{.*}}, %c3_i64)
#lhs = affine_map<(b, m, n, k) -> (b, m, k)>
#rhs = affine_map<(b, m, n, k) -> (k, n)>
#out = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @broadcast_rhs(%a: memref<4x2x3xf32>, %b: memref<3x5xf32>, %c: memref<4x2x5xf32>) {
  linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x2x3xf32>, memref<3x5xf32>) outs(%c : memref<4x2x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A transposed weight (linear with transpose_weight): the view swaps the
// strides, BLAS is told to transpose.
// CHECK-LABEL: func.func @transposed_weight
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [8, 16], strides: [1, 8]
// CHECK: call @weft_gemm_f32
#x = affine_map<(i, j, p) -> (i, p)>
#wt = affine_map<(i, j, p) -> (j, p)>
#y = affine_map<(i, j, p) -> (i, j)>
func.func @transposed_weight(%x: memref<4x8xf32>, %w: memref<16x8xf32>, %y: memref<4x16xf32>) {
  linalg.generic {indexing_maps = [#x, #wt, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x8xf32>, memref<16x8xf32>) outs(%y : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Anything else in the body (here a scale) is not a GEMM: left alone.
// CHECK-LABEL: func.func @scaled_product
// CHECK-NOT: call
// CHECK: linalg.generic
#x2 = affine_map<(i, j, p) -> (i, p)>
#w2 = affine_map<(i, j, p) -> (p, j)>
#y2 = affine_map<(i, j, p) -> (i, j)>
func.func @scaled_product(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>) {
  %c = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [#x2, #w2, #y2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x8xf32>, memref<8x16xf32>) outs(%y : memref<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.mulf %p, %c : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// f64 stays on loops: the runtime's GEMM is f32.
// CHECK-LABEL: func.func @double_precision
// CHECK-NOT: call
func.func @double_precision(%x: memref<4x8xf64>, %w: memref<8x16xf64>, %y: memref<4x16xf64>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, p) -> (i, p)>, affine_map<(i, j, p) -> (p, j)>, affine_map<(i, j, p) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x8xf64>, memref<8x16xf64>) outs(%y : memref<4x16xf64>) {
  ^bb0(%a: f64, %b: f64, %acc: f64):
    %p = arith.mulf %a, %b : f64
    %s = arith.addf %acc, %p : f64
    linalg.yield %s : f64
  }
  return
}

// -----

// A matrix with no contiguous dim (a's rows and columns are both strided,
// [2, 3] with strides 6 and 2): BLAS gets it (its loop fallback), cuBLAS
// cannot, so on the CUDA target it stays a loop nest, then a kernel.
// CHECK-LABEL: func.func @no_unit_stride
// CHECK: call @weft_gemm_f32
// CUBLAS-LABEL: func.func @no_unit_stride
// CUBLAS-NOT: call
// CUBLAS: linalg.generic
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @no_unit_stride(%a: memref<2x3xf32, strided<[6, 2]>>, %b: memref<3x5xf32>, %c: memref<2x5xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3xf32, strided<[6, 2]>>, memref<3x5xf32>) outs(%c : memref<2x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A bf16 product accumulated in f32 (the inputs widened in the body, as a
// --precision bf16 step lowers its contractions): the bf16 GEMM, its
// operands passed as bf16 and f32 views; on a GPU, tensor cores.
// CHECK-LABEL: func.func private @weft_gemm_bf16(memref<*xbf16>, memref<*xbf16>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
// CHECK-LABEL: func.func @bf16_inputs
// CHECK: %[[A:.*]] = memref.cast %{{.*}} : memref<8x4xbf16, strided<[4, 1]>> to memref<*xbf16>
// CHECK: %[[B:.*]] = memref.cast %{{.*}} : memref<4x16xbf16, strided<[16, 1]>> to memref<*xbf16>
// CHECK: %[[C:.*]] = memref.cast %{{.*}} : memref<8x16xf32, strided<[16, 1]>> to memref<*xf32>
// CHECK: call @weft_gemm_bf16(%[[A]], %[[B]], %[[C]], %[[C]], %[[C]], %c1_i64)
// CHECK-NOT: linalg.generic
// TF32 is for f32 inputs only.
// TF32-LABEL: func.func @bf16_inputs
// TF32: call @weft_cuda_gemm_bf16({{.*}}, %c1_i64)
// CUBLAS-LABEL: func.func @bf16_inputs
// CUBLAS: call @weft_cuda_gemm_bf16
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
func.func @bf16_inputs(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %c: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An fp16 product accumulated in f32 (an fp16 model's MatMul): the fp16
// GEMM; on a GPU, tensor cores.
// CHECK-LABEL: func.func private @weft_gemm_f16(memref<*xf16>, memref<*xf16>, memref<*xf32>, memref<*xf32>, memref<*xf32>, i64) attributes {weft.gemm}
// CHECK-LABEL: func.func @f16_inputs
// CHECK: call @weft_gemm_f16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64)
// CHECK-NOT: linalg.generic
// TF32-LABEL: func.func @f16_inputs
// TF32: call @weft_cuda_gemm_f16({{.*}}, %c1_i64)
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
func.func @f16_inputs(%a: memref<8x4xf16>, %b: memref<4x16xf16>, %c: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf16>, memref<4x16xf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: f16, %y: f16, %acc: f32):
    %wx = arith.extf %x : f16 to f32
    %wy = arith.extf %y : f16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A bf16 output is not a GEMM the runtime has: the loops stay.
// CHECK-LABEL: func.func @bf16_accumulator
// CHECK-NOT: call
// CHECK: linalg.generic
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
func.func @bf16_accumulator(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %c: memref<8x16xbf16>) {
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// A zero fill of all of c right before the GEMM: c = a * b (beta = 0, the
// last argument 0) and the fill is gone; the library never reads c.
// The fill may name c through a reshape (both name every element).
// CHECK-LABEL: func.func @zero_fill_overwritten
// CHECK-NOT: linalg.fill
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// TF32-LABEL: func.func @zero_fill_overwritten
// TF32: call @weft_cuda_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c2_i64)
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
func.func @zero_fill_overwritten(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %c: memref<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %rows = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 16] : memref<8x16xf32> into memref<2x4x16xf32>
  linalg.fill ins(%zero : f32) outs(%rows : memref<2x4x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The fill stays, and the GEMM accumulates, where c is read between them,
// where the fill is not zero, and where the GEMM writes only part of what
// was filled.
// CHECK-LABEL: func.func @fill_kept
// CHECK: linalg.fill
// CHECK: memref.copy
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64)
// CHECK: linalg.fill
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64)
// CHECK: linalg.fill
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64)
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
func.func @fill_kept(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %c: memref<8x16xf32>, %d: memref<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  memref.copy %c, %d : memref<8x16xf32> to memref<8x16xf32>
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%one : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %half = memref.subview %d[0, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1]>>
  %rows = memref.subview %a[0, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1]>>
  linalg.fill ins(%zero : f32) outs(%d : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%rows, %b : memref<4x4xf32, strided<[4, 1]>>, memref<4x16xf32>) outs(%half : memref<4x16xf32, strided<[16, 1]>>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A bf16 GEMM's f32 temporary that only a rounding reads: the GEMM writes
// the bf16 buffer itself (beta = 0 after the zero fill), and the fill, the
// rounding and the f32 buffer's passes over memory go.
// CHECK-LABEL: func.func @rounded_result
// CHECK-NOT: linalg.fill
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64) : (memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, memref<*xbf16>, i64) -> ()
// CHECK-NOT: linalg.generic
// CHECK: return
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
func.func @rounded_result(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %d: memref<8x16xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d : memref<8x16xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %c : memref<8x16xf32>
  return
}

// -----

// A bias broadcast into the f32 temporary, in a function without an arena
// to hold a bias vector for the epilogue: the broadcast writes the bf16
// buffer instead (rounded) and the GEMM accumulates into it; the reader
// also computes a square from c, which it now reads widened from the bf16
// buffer.
// CHECK-LABEL: func.func @rounded_bias
// CHECK: linalg.generic {{.*}} ins(%arg2 : memref<16xf32>) outs(%arg3 : memref<8x16xbf16>)
// CHECK:   arith.truncf
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64)
// CHECK: linalg.generic {{.*}} ins(%arg3 : memref<8x16xbf16>) outs(%arg4 : memref<8x16xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT:   %[[WIDE:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT:   %[[SQUARE:.*]] = arith.mulf %[[WIDE]], %[[WIDE]]
// CHECK-NEXT:   linalg.yield %[[SQUARE]] : f32
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
#bias = affine_map<(i, j) -> (j)>
func.func @rounded_bias(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %bias: memref<16xf32>, %d: memref<8x16xbf16>, %sq: memref<8x16xf32>) {
  %c = memref.alloc() : memref<8x16xf32>
  linalg.generic {indexing_maps = [#bias, #e], iterator_types = ["parallel", "parallel"]}
      ins(%bias : memref<16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d, %sq : memref<8x16xbf16>, memref<8x16xf32>) {
  ^bb0(%v: f32, %out: bf16, %out2: f32):
    %r = arith.truncf %v : f32 to bf16
    %s = arith.mulf %v, %v : f32
    linalg.yield %r, %s : bf16, f32
  }
  return
}

// -----

// Where the f32 result is an argument (the caller reads it), the GEMM
// writes f32 and the rounding stays. Where an op between the fill and the
// rounding uses bytes of the arena the plan also gave the bf16 buffer
// (the GEMM's lhs), the GEMM writes bf16 into the f32 buffer's own bytes
// and the rounding becomes a copy of them.
// CHECK-LABEL: func.func @rounded_kept
// CHECK: call @weft_gemm_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK: linalg.generic
// CHECK:   arith.truncf
// CHECK: %[[OWN:.*]] = memref.view %[[ARENA:.*]][%c0][] : memref<1024xi8> to memref<8x16xbf16>
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK: %[[READ:.*]] = memref.view %[[ARENA]][%c0][] : memref<1024xi8> to memref<8x16xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[READ]] : memref<8x16xbf16>) outs(%{{.*}} : memref<8x16xbf16>)
// CHECK-NOT:   arith.truncf
// CHECK: memref.copy
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
func.func @rounded_kept(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %c: memref<8x16xf32>, %d: memref<8x16xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c512 = arith.constant 512 : index
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d : memref<8x16xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  // The arena: the f32 temporary at bytes 0..511, the bf16 buffer at
  // 512..767, which the GEMM's lhs (a copy) also uses before the rounding.
  %arena = memref.alloc() : memref<1024xi8>
  %t = memref.view %arena[%c0][] : memref<1024xi8> to memref<8x16xf32>
  %lhs = memref.view %arena[%c512][] : memref<1024xi8> to memref<8x4xbf16>
  %r16 = memref.view %arena[%c512][] : memref<1024xi8> to memref<8x16xbf16>
  memref.copy %a, %lhs : memref<8x4xbf16> to memref<8x4xbf16>
  linalg.fill ins(%zero : f32) outs(%t : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%lhs, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%t : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<8x16xf32>) outs(%r16 : memref<8x16xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.copy %r16, %d : memref<8x16xbf16> to memref<8x16xbf16>
  return
}

// -----

// A reader that only rounds c but moves its elements (a head view's
// transpose): the GEMM writes bf16 into the first half of c's own bytes in
// the arena, and the reader reads them as they are (no truncf left): the
// rounding happens once, as before. The bias broadcast goes: the bias,
// rounded to c's bf16 into a vector in 32 more bytes of the arena (from
// 1024, on 256 bytes), is added by the GEMM's epilogue (kGemmBias, beta =
// 0) in f32 before c's rounding (as before, the f32 bias rounded first).
// CHECK-LABEL: func.func @rounded_in_place
// CHECK: %[[ARENA:.*]] = memref.alloc() : memref<1056xi8>
// CHECK: %[[VECTOR:.*]] = memref.view %[[ARENA]][%c1024][] : memref<1056xi8> to memref<16xbf16>
// CHECK: %[[NARROW:.*]] = memref.view %[[ARENA]][%[[AT:.*]]][] : memref<1056xi8> to memref<8x16xbf16>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%arg2 : memref<16xf32>) outs(%[[VECTOR]] : memref<16xbf16>)
// CHECK:   arith.truncf
// CHECK-NOT: linalg.generic
// CHECK: %[[BIAS:.*]] = memref.cast %[[VECTOR]] : memref<16xbf16> to memref<*xbf16>
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]], %{{.*}}, %c4_i64)
// CHECK: %[[READ:.*]] = memref.view %[[ARENA]][%[[AT]]][] : memref<1056xi8> to memref<8x16xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[READ]] : memref<8x16xbf16>) outs(%arg3 : memref<16x8xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: bf16):
// CHECK-NEXT:   linalg.yield %[[IN]] : bf16
// CHECK-NOT: memref<8x16xf32>
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
#bias = affine_map<(i, j) -> (j)>
func.func @rounded_in_place(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %bias: memref<16xf32>, %d: memref<16x8xbf16>) {
  %c512 = arith.constant 512 : index
  %arena = memref.alloc() : memref<1024xi8>
  %c = memref.view %arena[%c512][] : memref<1024xi8> to memref<8x16xf32>
  linalg.generic {indexing_maps = [#bias, #e], iterator_types = ["parallel", "parallel"]}
      ins(%bias : memref<16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #t], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d : memref<16x8xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %arena : memref<1024xi8>
  return
}

// -----

// The f32 buffer's bytes after the rounding: a row kernel that only stores
// into them (a buffer born there) ends its life, and the GEMM writes bf16;
// one that loads from them might read the f32 result, and the GEMM writes
// f32.
// CHECK-LABEL: func.func @rounded_then_stored
// CHECK: call @weft_gemm_bf16_bf16(
// CHECK-LABEL: func.func @rounded_then_loaded
// CHECK: call @weft_gemm_bf16(
// CHECK: arith.truncf
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
func.func @rounded_then_stored(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %d: memref<8x16xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %arena = memref.alloc() : memref<1024xi8>
  %c = memref.view %arena[%c0][] : memref<1024xi8> to memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d : memref<8x16xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  %next = memref.view %arena[%c0][] : memref<1024xi8> to memref<8xf32>
  scf.forall (%i) in (8) {
    memref.store %zero, %next[%i] : memref<8xf32>
  }
  return
}
func.func @rounded_then_loaded(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %d: memref<8x16xbf16>, %copy: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %arena = memref.alloc() : memref<1024xi8>
  %c = memref.view %arena[%c0][] : memref<1024xi8> to memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %wx = arith.extf %x : bf16 to f32
    %wy = arith.extf %y : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d : memref<8x16xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  %next = memref.view %arena[%c0][] : memref<1024xi8> to memref<8xf32>
  scf.forall (%i) in (8) {
    %v = memref.load %next[%i] : memref<8xf32>
    memref.store %v, %copy[%i] : memref<8xf32>
  }
  return
}

// -----

// An f32 bias broadcast over c: the GEMM's epilogue adds the bias vector
// itself (kGemmBias, beta = 0) and the broadcast goes.
// CHECK-LABEL: func.func @bias_epilogue
// CHECK-NOT: linalg.generic
// CHECK: %[[BIAS:.*]] = memref.cast %arg2 : memref<16xf32> to memref<*xf32>
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]], %{{.*}}, %c4_i64)
// CHECK-NOT: linalg.generic
// CUBLAS-LABEL: func.func @bias_epilogue
// CUBLAS: call @weft_cuda_gemm_f32({{.*}}, %c4_i64)
// TF32-LABEL: func.func @bias_epilogue
// TF32: call @weft_cuda_gemm_f32({{.*}}, %c6_i64)
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
#bias = affine_map<(i, j) -> (j)>
func.func @bias_epilogue(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %bias: memref<16xf32>, %c: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#bias, #e], iterator_types = ["parallel", "parallel"]}
      ins(%bias : memref<16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The bias vector is written between the broadcast and the GEMM, or the
// broadcast runs along c's rows (not the GEMM's n): the broadcast stays
// and the GEMM accumulates onto it.
// CHECK-LABEL: func.func @bias_kept
// CHECK: linalg.generic
// CHECK: linalg.fill
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64)
// CHECK: linalg.generic
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c1_i64)
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
#bias = affine_map<(i, j) -> (j)>
#rows = affine_map<(i, j) -> (i)>
func.func @bias_kept(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %bias: memref<16xf32>, %c: memref<8x16xf32>, %r: memref<8xf32>, %d: memref<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#bias, #e], iterator_types = ["parallel", "parallel"]}
      ins(%bias : memref<16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %v : f32
  }
  linalg.fill ins(%zero : f32) outs(%bias : memref<16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#rows, #e], iterator_types = ["parallel", "parallel"]}
      ins(%r : memref<8xf32>) outs(%d : memref<8x16xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%d : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A weight's gradient dW = x^T dy and its bias's, the columns of dy summed
// into zeros: the GEMM's epilogue writes the sums (kGemmBiasGradient) and
// the fill and the sum go. The sum's vector is made before the GEMM.
// CHECK-LABEL: func.func @bias_gradient
// CHECK: %[[DB:.*]] = memref.view
// CHECK-NOT: linalg
// CHECK: %[[VECTOR:.*]] = memref.cast %[[DB]] : memref<16xf32> to memref<*xf32>
// CHECK: call @weft_gemm_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[VECTOR]], %{{.*}}, %c8_i64)
// CHECK-NOT: linalg
// CUBLAS-LABEL: func.func @bias_gradient
// CUBLAS: call @weft_cuda_gemm_bf16({{.*}}, %c8_i64)
#xt = affine_map<(i, j, p) -> (p, i)>
#dy = affine_map<(i, j, p) -> (p, j)>
#dw = affine_map<(i, j, p) -> (i, j)>
#rows = affine_map<(j, p) -> (p, j)>
#cols = affine_map<(j, p) -> (j)>
func.func @bias_gradient(%x: memref<32x8xbf16>, %dy: memref<32x16xbf16>, %dw: memref<8x16xf32>, %out: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %arena = memref.alloc() : memref<1024xi8>
  linalg.fill ins(%zero : f32) outs(%dw : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#xt, #dy, #dw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<32x8xbf16>, memref<32x16xbf16>) outs(%dw : memref<8x16xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %wa = arith.extf %a : bf16 to f32
    %wb = arith.extf %b : bf16 to f32
    %p = arith.mulf %wa, %wb : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %db = memref.view %arena[%c0][] : memref<1024xi8> to memref<16xf32>
  linalg.fill ins(%zero : f32) outs(%db : memref<16xf32>)
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<32x16xbf16>) outs(%db : memref<16xf32>) {
  ^bb0(%v: bf16, %acc: f32):
    %w = arith.extf %v : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  memref.copy %db, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// dy is written between the GEMM and the sum (the sum reads other
// values than the GEMM did), or the sum is not plain: both stay.
// CHECK-LABEL: func.func @bias_gradient_kept
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK-NEXT: linalg.fill {{.*}} outs(%arg1
// CHECK-NEXT: linalg.fill {{.*}} outs(%arg3
// CHECK-NEXT: linalg.generic
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK-NEXT: linalg.fill {{.*}} outs(%arg5
// CHECK-NEXT: linalg.generic
// CHECK: arith.mulf
#xt = affine_map<(i, j, p) -> (p, i)>
#dy = affine_map<(i, j, p) -> (p, j)>
#dw = affine_map<(i, j, p) -> (i, j)>
#rows = affine_map<(j, p) -> (p, j)>
#cols = affine_map<(j, p) -> (j)>
func.func @bias_gradient_kept(%x: memref<32x8xf32>, %dy: memref<32x16xf32>, %dw: memref<8x16xf32>, %db: memref<16xf32>, %dw2: memref<8x16xf32>, %db2: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%dw : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#xt, #dy, #dw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<32x8xf32>, memref<32x16xf32>) outs(%dw : memref<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%dy : memref<32x16xf32>)
  linalg.fill ins(%zero : f32) outs(%db : memref<16xf32>)
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<32x16xf32>) outs(%db : memref<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%dw2 : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#xt, #dy, #dw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<32x8xf32>, memref<32x16xf32>) outs(%dw2 : memref<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%db2 : memref<16xf32>)
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<32x16xf32>) outs(%db2 : memref<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %q = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The plan gave the sum's vector bytes of x, which the GEMM reads: the
// epilogue writes a slot of its own after the arena's bytes instead, which
// the sum's place copies into the vector.
// CHECK-LABEL: func.func @bias_gradient_over_a
// CHECK: %[[ARENA:.*]] = memref.alloc() : memref<1088xi8>
// CHECK: %[[SLOT:.*]] = memref.view %[[ARENA]][%c1024{{.*}}][] : memref<1088xi8> to memref<16xf32>
// CHECK: %[[VECTOR:.*]] = memref.cast %[[SLOT]] : memref<16xf32> to memref<*xf32>
// CHECK: call @weft_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[VECTOR]], %{{.*}}, %c8_i64)
// CHECK: %[[DB:.*]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<1088xi8> to memref<16xf32>
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic {{.*}} ins(%[[SLOT]] : memref<16xf32>) outs(%[[DB]] : memref<16xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
// CHECK-NOT: linalg
#xt = affine_map<(i, j, p) -> (p, i)>
#dy = affine_map<(i, j, p) -> (p, j)>
#dw = affine_map<(i, j, p) -> (i, j)>
#rows = affine_map<(j, p) -> (p, j)>
#cols = affine_map<(j, p) -> (j)>
func.func @bias_gradient_over_a(%dy: memref<32x16xf32>, %dw: memref<8x16xf32>, %out: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %arena = memref.alloc() : memref<1024xi8>
  %x = memref.view %arena[%c0][] : memref<1024xi8> to memref<32x8xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#xt, #dy, #dw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<32x8xf32>, memref<32x16xf32>) outs(%dw : memref<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %db = memref.view %arena[%c0][] : memref<1024xi8> to memref<16xf32>
  linalg.fill ins(%zero : f32) outs(%db : memref<16xf32>)
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<32x16xf32>) outs(%db : memref<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  memref.copy %db, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// A bf16 weight gradient the GEMM writes rounded, and its bias's gradient,
// which is only read rounded to bf16: the epilogue writes the sums rounded
// (a bf16 slot after the arena's bytes), the same values the rounding
// reader makes of the f32 sums; the sum's place widens the slot into the
// vector.
// CHECK-LABEL: func.func @bias_gradient_rounded
// CHECK: %[[ARENA:.*]] = memref.alloc() : memref<4128xi8>
// CHECK: %[[SLOT:.*]] = memref.view %[[ARENA]][%c4096{{.*}}][] : memref<4128xi8> to memref<16xbf16>
// CHECK: %[[VECTOR:.*]] = memref.cast %[[SLOT]] : memref<16xbf16> to memref<*xbf16>
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[VECTOR]], %{{.*}}, %c8_i64)
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic {{.*}} ins(%[[SLOT]] : memref<16xbf16>) outs(%[[DB:.*]] : memref<16xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: linalg.generic {{.*}} ins(%[[DB]] : memref<16xf32>) outs(%arg3 : memref<16xf32>)
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
// Read unrounded, the sums stay the sum's.
// CHECK-LABEL: func.func @bias_gradient_read_wide
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
#xt = affine_map<(i, j, p) -> (p, i)>
#dy = affine_map<(i, j, p) -> (p, j)>
#dw = affine_map<(i, j, p) -> (i, j)>
#rows = affine_map<(j, p) -> (p, j)>
#cols = affine_map<(j, p) -> (j)>
#e = affine_map<(i, j) -> (i, j)>
#v = affine_map<(j) -> (j)>
func.func @bias_gradient_rounded(%x: memref<32x8xbf16>, %dy: memref<32x16xbf16>, %dwb: memref<8x16xbf16>, %out: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c2048 = arith.constant 2048 : index
  %arena = memref.alloc() : memref<4096xi8>
  %dw = memref.view %arena[%c0][] : memref<4096xi8> to memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#xt, #dy, #dw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<32x8xbf16>, memref<32x16xbf16>) outs(%dw : memref<8x16xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %wa = arith.extf %a : bf16 to f32
    %wb = arith.extf %b : bf16 to f32
    %p = arith.mulf %wa, %wb : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %db = memref.view %arena[%c2048][] : memref<4096xi8> to memref<16xf32>
  linalg.fill ins(%zero : f32) outs(%db : memref<16xf32>)
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<32x16xbf16>) outs(%db : memref<16xf32>) {
  ^bb0(%v: bf16, %acc: f32):
    %w = arith.extf %v : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%db : memref<16xf32>) outs(%out : memref<16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.truncf %v : f32 to bf16
    %w = arith.extf %r : bf16 to f32
    linalg.yield %w : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%dw : memref<8x16xf32>) outs(%dwb : memref<8x16xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}
func.func @bias_gradient_read_wide(%x: memref<32x8xbf16>, %dy: memref<32x16xbf16>, %dwb: memref<8x16xbf16>, %out: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c2048 = arith.constant 2048 : index
  %arena = memref.alloc() : memref<4096xi8>
  %dw = memref.view %arena[%c0][] : memref<4096xi8> to memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#xt, #dy, #dw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<32x8xbf16>, memref<32x16xbf16>) outs(%dw : memref<8x16xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %wa = arith.extf %a : bf16 to f32
    %wb = arith.extf %b : bf16 to f32
    %p = arith.mulf %wa, %wb : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %db = memref.view %arena[%c2048][] : memref<4096xi8> to memref<16xf32>
  linalg.fill ins(%zero : f32) outs(%db : memref<16xf32>)
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<32x16xbf16>) outs(%db : memref<16xf32>) {
  ^bb0(%v: bf16, %acc: f32):
    %w = arith.extf %v : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%db : memref<16xf32>) outs(%out : memref<16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %w = arith.mulf %v, %v : f32
    linalg.yield %w : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%dw : memref<8x16xf32>) outs(%dwb : memref<8x16xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// GELU's tanh form on a bf16 GEMM's rounded result, in a kernel that reads
// only c and writes c rounded (the pre-activation) and the GELU: the
// GEMM's epilogue writes both (kGemmGelu, aux = the pre-activation) and
// the kernel goes.
// CHECK-LABEL: func.func @gelu_forward
// CHECK-NOT: linalg.fill
// CHECK: %[[ACT:.*]] = memref.cast %{{.*}} : memref<8x16xbf16, strided<[16, 1]>> to memref<*xbf16>
// CHECK: %[[PRE:.*]] = memref.cast %{{.*}} : memref<8x16xbf16, strided<[16, 1]>> to memref<*xbf16>
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %[[ACT]], %[[ACT]], %[[PRE]], %c16_i64)
// CHECK-NOT: linalg.generic
// CHECK: return
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
func.func @gelu_forward(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %pre: memref<8x16xbf16>, %act: memref<8x16xbf16>) {
  %zero = arith.constant 0.0 : f32
  %cubic = arith.constant 0.044715 : f32
  %k = arith.constant 0.7978845608028654 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %c = memref.alloc() : memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%xa: bf16, %yb: bf16, %acc: f32):
    %wx = arith.extf %xa : bf16 to f32
    %wy = arith.extf %yb : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%pre, %act : memref<8x16xbf16>, memref<8x16xbf16>) {
  ^bb0(%v: f32, %o1: bf16, %o2: bf16):
    %r = arith.truncf %v : f32 to bf16
    %x = arith.extf %r : bf16 to f32
    %sq = arith.mulf %x, %x : f32
    %x3 = arith.mulf %sq, %x : f32
    %t = arith.mulf %x3, %cubic : f32
    %poly = arith.addf %x, %t : f32
    %u = arith.mulf %poly, %k : f32
    %th = math.tanh %u : f32
    %onePlus = arith.addf %th, %one : f32
    %hx = arith.mulf %x, %half : f32
    %g = arith.mulf %hx, %onePlus : f32
    %gr = arith.truncf %g : f32 to bf16
    linalg.yield %r, %gr : bf16, bf16
  }
  memref.dealloc %c : memref<8x16xf32>
  return
}

// -----

// GELU's erf form: no epilogue computes it; the GEMM writes the rounded
// result and the kernel stays.
// CHECK-LABEL: func.func @gelu_erf_stays
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK: linalg.generic
// CHECK:   math.erf
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
func.func @gelu_erf_stays(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %pre: memref<8x16xbf16>, %act: memref<8x16xbf16>) {
  %zero = arith.constant 0.0 : f32
  %r2 = arith.constant 0.70710678118654757 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %c = memref.alloc() : memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%xa: bf16, %yb: bf16, %acc: f32):
    %wx = arith.extf %xa : bf16 to f32
    %wy = arith.extf %yb : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%pre, %act : memref<8x16xbf16>, memref<8x16xbf16>) {
  ^bb0(%v: f32, %o1: bf16, %o2: bf16):
    %r = arith.truncf %v : f32 to bf16
    %x = arith.extf %r : bf16 to f32
    %s = arith.mulf %x, %r2 : f32
    %e = math.erf %s : f32
    %onePlus = arith.addf %one, %e : f32
    %hx = arith.mulf %half, %x : f32
    %g = arith.mulf %hx, %onePlus : f32
    %gr = arith.truncf %g : f32 to bf16
    linalg.yield %r, %gr : bf16, bf16
  }
  memref.dealloc %c : memref<8x16xf32>
  return
}

// -----

// GELU's gradient: a kernel that reads only a bf16 GEMM's c (rounded) and
// the pre-activation and writes grad * gelu'(pre), rounded. The GEMM's
// epilogue computes it (kGemmGeluGradient, aux read) into the kernel's
// output, after the copy that still reads the output's bytes (the plan gave
// them to another value until then), and the kernel goes.
// CHECK-LABEL: func.func @gelu_gradient
// CHECK: %[[OUT:.*]] = memref.view %{{.*}}[%c768][] : memref<1024xi8> to memref<8x16xbf16>
// CHECK: memref.copy %[[OUT]], %arg3
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c32_i64)
// CHECK-NOT: linalg.generic
// CHECK: memref.copy %[[OUT]], %arg4
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
func.func @gelu_gradient(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %preArg: memref<8x16xbf16>, %old: memref<8x16xbf16>, %d: memref<8x16xbf16>) {
  %c0 = arith.constant 0 : index
  %c512 = arith.constant 512 : index
  %c768 = arith.constant 768 : index
  %zero = arith.constant 0.0 : f32
  %cubic = arith.constant 0.044715 : f32
  %cubic3 = arith.constant 0.134145 : f32
  %k = arith.constant 0.7978845608028654 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %arena = memref.alloc() : memref<1024xi8>
  %c = memref.view %arena[%c0][] : memref<1024xi8> to memref<8x16xf32>
  %pre = memref.view %arena[%c512][] : memref<1024xi8> to memref<8x16xbf16>
  %out = memref.view %arena[%c768][] : memref<1024xi8> to memref<8x16xbf16>
  memref.copy %preArg, %pre : memref<8x16xbf16> to memref<8x16xbf16>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%xa: bf16, %yb: bf16, %acc: f32):
    %wx = arith.extf %xa : bf16 to f32
    %wy = arith.extf %yb : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  memref.copy %out, %old : memref<8x16xbf16> to memref<8x16xbf16>
  linalg.generic {indexing_maps = [#e, #e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c, %pre : memref<8x16xf32>, memref<8x16xbf16>) outs(%out : memref<8x16xbf16>) {
  ^bb0(%v: f32, %pv: bf16, %o: bf16):
    %r = arith.truncf %v : f32 to bf16
    %g = arith.extf %r : bf16 to f32
    %x = arith.extf %pv : bf16 to f32
    %sq = arith.mulf %x, %x : f32
    %x3 = arith.mulf %sq, %x : f32
    %t = arith.mulf %cubic, %x3 : f32
    %poly = arith.addf %t, %x : f32
    %u = arith.mulf %k, %poly : f32
    %th = math.tanh %u : f32
    %q = arith.mulf %sq, %cubic3 : f32
    %q1 = arith.addf %q, %one : f32
    %du = arith.mulf %q1, %k : f32
    %th2 = arith.mulf %th, %th : f32
    %slope = arith.subf %one, %th2 : f32
    %sd = arith.mulf %slope, %du : f32
    %hx = arith.mulf %x, %half : f32
    %right = arith.mulf %hx, %sd : f32
    %onePlus = arith.addf %th, %one : f32
    %left = arith.mulf %onePlus, %half : f32
    %dgelu = arith.addf %left, %right : f32
    %res = arith.mulf %g, %dgelu : f32
    %rr = arith.truncf %res : f32 to bf16
    linalg.yield %rr : bf16
  }
  memref.copy %out, %d : memref<8x16xbf16> to memref<8x16xbf16>
  memref.dealloc %arena : memref<1024xi8>
  return
}

// -----

// The plan may lend an output argument's bytes to a temporary before the
// output's value is written: a GEMM's f32 c that is an argument, rounded
// by the next op and then written all over again (a copy of all of it),
// writes the bf16 buffer itself as a temporary's would. An argument that
// nothing writes again keeps the f32 GEMM (the caller reads it).
// CHECK-LABEL: func.func @rounded_argument
// CHECK: call @weft_gemm_bf16_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK-NOT: arith.truncf
// CHECK: linalg.generic {{.*}} ins(%arg4 : memref<8x16xf32>) outs(%arg2 : memref<8x16xf32>)
// CHECK: call @weft_gemm_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64)
// CHECK: arith.truncf
#x = affine_map<(i, j, p) -> (i, p)>
#w = affine_map<(i, j, p) -> (p, j)>
#y = affine_map<(i, j, p) -> (i, j)>
#e = affine_map<(i, j) -> (i, j)>
func.func @rounded_argument(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %c: memref<8x16xf32>, %d: memref<8x16xbf16>, %final: memref<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%xa: bf16, %yb: bf16, %acc: f32):
    %wx = arith.extf %xa : bf16 to f32
    %wy = arith.extf %yb : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d : memref<8x16xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%final : memref<8x16xf32>) outs(%c : memref<8x16xf32>) {
  ^bb0(%v: f32, %out: f32):
    linalg.yield %v : f32
  }
  // The same with nothing after the rounding: the argument keeps c.
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>) {
  ^bb0(%xa: bf16, %yb: bf16, %acc: f32):
    %wx = arith.extf %xa : bf16 to f32
    %wy = arith.extf %yb : bf16 to f32
    %p = arith.mulf %wx, %wy : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x16xf32>) outs(%d : memref<8x16xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}
