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
