// RUN: weft-opt %s -split-input-file --weft-fuse-elementwise | FileCheck %s
// RUN: weft-opt %s -split-input-file --linalg-fuse-elementwise-ops | FileCheck %s --check-prefix=UPSTREAM

// Elementwise chains fuse; the elementwise producer of a GEMM is not fused
// into it (upstream's fusion does), so the GEMM stays a plain
// multiply-accumulate for weft-contractions-to-blas. What reads the GEMM's
// result was never a fusion candidate (the GEMM reduces).
// CHECK-LABEL: func.func @gemm_between_elementwise
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.addf
// CHECK-NEXT: math.exp
// CHECK-NEXT: linalg.yield
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK-NEXT: linalg.yield
// CHECK: linalg.generic
// CHECK: math.tanh
// UPSTREAM-LABEL: func.func @gemm_between_elementwise
// UPSTREAM: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// UPSTREAM: math.exp
// UPSTREAM: arith.mulf
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map2 = affine_map<(d0, d1, d2) -> (d2, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @gemm_between_elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%0 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %9 = arith.addf %in, %in_0 : f32
    linalg.yield %9 : f32
  } -> tensor<4x8xf32>
  %2 = tensor.empty() : tensor<4x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%1 : tensor<4x8xf32>) outs(%2 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %9 = math.exp %in : f32
    linalg.yield %9 : f32
  } -> tensor<4x8xf32>
  %4 = tensor.empty() : tensor<4x16xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %5 = linalg.fill ins(%cst : f32) outs(%4 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = linalg.generic {indexing_maps = [#map1, #map2, #map3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%3, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%5 : tensor<4x16xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %9 = arith.mulf %in, %in_0 : f32
    %10 = arith.addf %out, %9 : f32
    linalg.yield %10 : f32
  } -> tensor<4x16xf32>
  %7 = tensor.empty() : tensor<4x16xf32>
  %8 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%6 : tensor<4x16xf32>) outs(%7 : tensor<4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %9 = math.tanh %in : f32
    linalg.yield %9 : f32
  } -> tensor<4x16xf32>
  return %8 : tensor<4x16xf32>
}

// -----

// A reduction that is not a multiply-accumulate takes its producer in.
// CHECK-LABEL: func.func @row_max
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK-NEXT: arith.maximumf
// CHECK-NOT: linalg.generic
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_max(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%0 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  } -> tensor<4x8xf32>
  %2 = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]} ins(%1 : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// A transpose read only by a GEMM folds into the GEMM's indexing (the
// weight gradient's g^T x): the library reads g transposed, no copy.
// CHECK-DAG: #[[GT:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-LABEL: func.func @transposed_operand
// CHECK-NOT:   linalg.transpose
// CHECK:       linalg.generic {indexing_maps = [#[[GT]], #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<6x5xf32>, tensor<6x4xf32>)
func.func @transposed_operand(%g: tensor<6x5xf32>, %x: tensor<6x4xf32>, %init: tensor<5x4xf32>) -> tensor<5x4xf32> {
  %e = tensor.empty() : tensor<5x6xf32>
  %t = linalg.transpose ins(%g : tensor<6x5xf32>) outs(%e : tensor<5x6xf32>) permutation = [1, 0]
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%t, %x : tensor<5x6xf32>, tensor<6x4xf32>) outs(%init : tensor<5x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<5x4xf32>
  return %r : tensor<5x4xf32>
}

// -----

// A transpose that would leave the operand's matrix without a contiguous
// dim (the input's innermost dim becomes the batch) stays a copy.
// CHECK-LABEL: func.func @transposed_batch
// CHECK:       linalg.transpose
// CHECK:       linalg.generic
func.func @transposed_batch(%g: tensor<5x6x2xf32>, %x: tensor<2x6x4xf32>, %init: tensor<2x5x4xf32>) -> tensor<2x5x4xf32> {
  %e = tensor.empty() : tensor<2x5x6xf32>
  %t = linalg.transpose ins(%g : tensor<5x6x2xf32>) outs(%e : tensor<2x5x6xf32>) permutation = [2, 0, 1]
  %r = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%t, %x : tensor<2x5x6xf32>, tensor<2x6x4xf32>) outs(%init : tensor<2x5x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x5x4xf32>
  return %r : tensor<2x5x4xf32>
}

// -----

// A producer that other ops read too fuses into its first consumer as an
// extra result (the AdamW moments are stored and read by the update): one
// loop instead of three.
// CHECK-LABEL: func.func @optimizer_update
// CHECK:       %[[FUSED:.*]]:3 = linalg.generic
// CHECK-NOT:   linalg.generic
// CHECK:       return %[[FUSED]]#{{.*}}, %[[FUSED]]#{{.*}}, %[[FUSED]]#
#map = affine_map<(d0) -> (d0)>
func.func @optimizer_update(%p: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %m1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%m, %g : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %c9 = arith.constant 0.9 : f32
    %c1 = arith.constant 0.1 : f32
    %x = arith.mulf %a, %c9 : f32
    %y = arith.mulf %b, %c1 : f32
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %v1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%v, %g : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %c99 = arith.constant 0.999 : f32
    %c01 = arith.constant 0.001 : f32
    %x = arith.mulf %a, %c99 : f32
    %b2 = arith.mulf %b, %b : f32
    %y = arith.mulf %b2, %c01 : f32
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %p1 = linalg.generic {indexing_maps = [#map, #map, #map, #map], iterator_types = ["parallel"]} ins(%p, %m1, %v1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %out: f32):
    %lr = arith.constant 0.01 : f32
    %r = math.sqrt %c : f32
    %q = arith.divf %b, %r : f32
    %u = arith.mulf %q, %lr : f32
    %s = arith.subf %a, %u : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %p1, %m1, %v1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A producer read before its elementwise consumer stays a kernel: the
// fused op, placed at the consumer, would come after that first read.
// CHECK-LABEL: func.func @used_before_consumer
// CHECK:       %[[EXP:.*]] = linalg.generic
// CHECK:       math.exp
// CHECK:       linalg.generic {{.*}} ins(%[[EXP]] : tensor<4x8xf32>)
// CHECK:       arith.addf
// CHECK:       linalg.generic {{.*}} ins(%[[EXP]], %arg0 : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK:       arith.mulf
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @used_before_consumer(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = math.exp %in : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %2 = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]} ins(%1 : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%1, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %2, %3 : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// A producer its consumer broadcasts cannot stay one of the consumer's
// results (each of its elements is read several times): it stays a kernel.
// CHECK-LABEL: func.func @broadcast_scalar
// CHECK:       %[[ROW:.*]] = linalg.generic
// CHECK:       math.sqrt
// CHECK:       linalg.generic {{.*}} ins(%[[ROW]], %arg1 : tensor<4xf32>, tensor<4x8xf32>)
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#vec = affine_map<(d0) -> (d0)>
func.func @broadcast_scalar(%r: tensor<4xf32>, %x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %1 = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]} ins(%r : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = math.sqrt %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %2 = linalg.generic {indexing_maps = [#row, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%1, %x : tensor<4xf32>, tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.divf %b, %a : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  return %1, %2 : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// A transpose that keeps the innermost dim (a head view) becomes a generic
// and fuses with the cast it feeds: one copy, no f32 transposed tensor.
// CHECK-DAG:   #[[HEADS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func.func @head_view_transpose
// CHECK-NOT:   linalg.transpose
// CHECK:       linalg.generic {indexing_maps = [#[[HEADS]], #{{.*}}]{{.*}} ins(%arg0 : tensor<2x4x3x8xf32>) outs(%{{.*}} : tensor<2x3x4x8xbf16>)
// CHECK:       arith.truncf
// CHECK-NOT:   linalg.generic
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @head_view_transpose(%x: tensor<2x4x3x8xf32>) -> tensor<2x3x4x8xbf16> {
  %e = tensor.empty() : tensor<2x3x4x8xf32>
  %t = linalg.transpose ins(%x : tensor<2x4x3x8xf32>) outs(%e : tensor<2x3x4x8xf32>) permutation = [0, 2, 1, 3]
  %e2 = tensor.empty() : tensor<2x3x4x8xbf16>
  %c = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%t : tensor<2x3x4x8xf32>) outs(%e2 : tensor<2x3x4x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %n = arith.truncf %in : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<2x3x4x8xbf16>
  return %c : tensor<2x3x4x8xbf16>
}

// -----

// A transpose that moves the innermost dim stays one (a target tiles it
// through shared memory).
// CHECK-LABEL: func.func @innermost_transpose
// CHECK:       linalg.transpose
// CHECK:       linalg.generic
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @innermost_transpose(%x: tensor<4x8xf32>) -> tensor<8x4xbf16> {
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%x : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<8x4xbf16>
  %c = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%t : tensor<8x4xf32>) outs(%e2 : tensor<8x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %n = arith.truncf %in : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<8x4xbf16>
  return %c : tensor<8x4xbf16>
}

// -----

// A GEMM's [b * s, n] result rounded to bf16 and read back as [b, s, n]
// in f32: the reshape moves onto the GEMM's result and the two casts fuse.
// CHECK-LABEL: func.func @reshape_between_casts
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:       %[[ROWS:.*]] = tensor.expand_shape
// CHECK:       linalg.generic {{.*}} ins(%[[ROWS]] : tensor<2x3x5xf32>) outs(%{{.*}} : tensor<2x3x5xf32>)
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:  arith.truncf
// CHECK-NEXT:  arith.extf
// CHECK-NOT:   linalg.generic
#map = affine_map<(d0, d1) -> (d0, d1)>
#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhs = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @reshape_between_casts(%x: tensor<6x4xbf16>, %w: tensor<4x5xbf16>, %init: tensor<6x5xf32>) -> tensor<2x3x5xf32> {
  %g = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<6x4xbf16>, tensor<4x5xbf16>) outs(%init : tensor<6x5xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %p = arith.mulf %a32, %b32 : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<6x5xf32>
  %e = tensor.empty() : tensor<6x5xbf16>
  %n = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%g : tensor<6x5xf32>) outs(%e : tensor<6x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<6x5xbf16>
  %r = tensor.expand_shape %n [[0, 1], [2]] output_shape [2, 3, 5] : tensor<6x5xbf16> into tensor<2x3x5xbf16>
  %e2 = tensor.empty() : tensor<2x3x5xf32>
  %w32 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r : tensor<2x3x5xbf16>) outs(%e2 : tensor<2x3x5xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<2x3x5xf32>
  return %w32 : tensor<2x3x5xf32>
}

// -----

// One fill two reductions accumulate into (CSE merges their fills) becomes
// a fill each: bufferized, each fills its own buffer instead of one being
// copied, and a target can take each fill into its reduction.
// CHECK-LABEL: func.func @shared_fill
// CHECK:       %[[F1:.*]] = linalg.fill
// CHECK:       linalg.generic {{.*}} outs(%[[F1]] : tensor<4xf32>)
// CHECK:       %[[F2:.*]] = linalg.fill
// CHECK:       linalg.generic {{.*}} outs(%[[F2]] : tensor<4xf32>)
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @shared_fill(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %1 = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %2 = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]} ins(%y : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.maximumf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %1, %2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A widening cast several elementwise ops read (CSE merged the cast each
// of them had: a bf16 pre-activation read by GELU and by its gradient) is
// widened again in each, so no f32 copy is stored: two loops, each reading
// the bf16 values.
// CHECK-LABEL: func.func @widening_per_reader
// CHECK:       %[[GELU:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<4x8xbf16>)
// CHECK:         arith.extf
// CHECK:         math.erf
// CHECK:       %[[GRAD:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<4x8xbf16>, tensor<4x8xf32>)
// CHECK:         arith.extf
// CHECK:         math.exp
// CHECK-NOT:   linalg.generic
// CHECK:       return %[[GELU]], %[[GRAD]]
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @widening_per_reader(%x: tensor<4x8xbf16>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %w = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xbf16>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = math.erf %in : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %d = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%w, %g : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.mulf %a, %a : f32
    %t = math.exp %s : f32
    %m = arith.mulf %t, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %y, %d : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The same where a generic computes the narrow values (a bf16 bias add)
// and the second reader also reads a reduction of the first's result, so
// the two cannot become one loop: nothing fuses into the shared cast
// before each reader has its own, and what is stored between them is the
// bf16 sum, which each reader widens (the erf fuses into the reduction).
// CHECK-LABEL: func.func @widening_of_generic_per_reader
// CHECK:       %[[SUM:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<4x8xbf16>, tensor<4x8xbf16>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK:       %[[ROWS:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<4x8xbf16>)
// CHECK:         arith.extf
// CHECK:         math.erf
// CHECK:       %[[SECOND:.*]] = linalg.generic {{.*}} ins(%[[SUM]], %arg2, %[[ROWS]] : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4xf32>)
// CHECK:         arith.extf
// CHECK-NOT:   linalg.generic
// CHECK:       return %[[ROWS]], %[[SECOND]]
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @widening_of_generic_per_reader(%x: tensor<4x8xbf16>, %b: tensor<4x8xbf16>, %g: tensor<4x8xf32>, %init: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %n = tensor.empty() : tensor<4x8xbf16>
  %e = tensor.empty() : tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%x, %b : tensor<4x8xbf16>, tensor<4x8xbf16>) outs(%n : tensor<4x8xbf16>) {
  ^bb0(%p: bf16, %q: bf16, %out: bf16):
    %s = arith.addf %p, %q : bf16
    linalg.yield %s : bf16
  } -> tensor<4x8xbf16>
  %w = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<4x8xbf16>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = math.erf %in : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]} ins(%y : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %d = linalg.generic {indexing_maps = [#map, #map, #row, #map], iterator_types = ["parallel", "parallel"]} ins(%w, %g, %r : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %s: f32, %out: f32):
    %m = arith.mulf %a, %c : f32
    %t = arith.addf %m, %s : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %r, %d : tensor<4xf32>, tensor<4x8xf32>
}
