

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
