
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
