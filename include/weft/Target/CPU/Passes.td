//===- Passes.td - CPU backend passes ----------------------*- tablegen -*-===//

#ifndef WEFT_TARGET_CPU_PASSES_TD
#define WEFT_TARGET_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def WeftTileColumnReductions : Pass<"weft-tile-column-reductions"> {
  let summary = "Sum over rows along the rows, in tiles of columns";
  let description = [{
    A `linalg.generic` on memrefs whose innermost loop is a reduction while
    every operand is contiguous along one parallel loop (a sum over the
    rows of a row-major matrix: a bias's gradient, a norm's scale
    gradient) would loop down each column, its inner loop striding by a
    row, which LLVM vectorizes with gathers. The contiguous loop is tiled
    by `columns` (the tiles a parallel loop) and made innermost in each
    tile, whose loops are sequential: the tile adds row after row over its
    columns with contiguous loads. Each column still adds its rows in
    order.

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(j, i) -> (i, j)>, affine_map<(j, i) -> (j)>],
                    iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<512x256xf32>) outs(%sum : memref<256xf32>) {...}
    // becomes
    scf.parallel (%j) = (%c0) to (%c256) step (%c64) {
      scf.for %i = %c0 to %c512 step %c1 {
        scf.for %jj = %c0 to %c64 step %c1 {
          // %tile[%jj] += %rows[%i, %jj]
        }
      }
    }
    ```
  }];
  let options = [
    Option<"columns", "columns", "int64_t", /*default=*/"64",
           "Columns of each tile">
  ];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect",
    "::mlir::affine::AffineDialect"
  ];
}

def WeftSerializeInnerLoop : Pass<"weft-serialize-inner-loop"> {
  let summary = "Keep the innermost dim of a parallel loop nest sequential";
  let description = [{
    Splits each multi-dimensional `scf.parallel` into a parallel loop over
    all dims but the last and an `scf.for` over the last. OpenMP then
    collapses only the outer dims (recovering their indices with
    division), while the innermost loop keeps unit-stride accesses that
    LLVM vectorizes.

    A nest with fewer than `min-parallel-work` innermost iterations in all
    (static bounds) becomes sequential entirely: forking and joining a
    parallel region would cost more than the loop. So does a nest that adds
    into memory atomically (`memref.atomic_rmw addf`, as `weft.scatter_add`
    bufferizes), its atomic adds becoming a load, an add and a store: the
    sums then run in program order, and a training run repeats bit for bit.
  }];
  let options = [
    Option<"minParallelWork", "min-parallel-work", "int64_t",
           /*default=*/"32768",
           "Iterations below which a loop nest stays sequential">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // WEFT_TARGET_CPU_PASSES_TD
