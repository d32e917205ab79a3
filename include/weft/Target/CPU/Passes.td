//===- Passes.td - CPU backend passes ----------------------*- tablegen -*-===//

#ifndef WEFT_TARGET_CPU_PASSES_TD
#define WEFT_TARGET_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def WeftFuseElementwise : Pass<"weft-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg ops, keeping GEMMs intact";
  let description = [{
    Upstream elementwise fusion, except that nothing is fused into a
    multiply-accumulate contraction: those stay plain so that
    `weft-contractions-to-blas` can hand them to BLAS.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def WeftContractionsToBlas : Pass<"weft-contractions-to-blas"> {
  let summary = "Replace f32 GEMM-shaped linalg.generic on memrefs by BLAS calls";
  let description = [{
    A `linalg.generic` on memrefs whose body is `out + a * b` over one
    reduction dim, with `a` indexed by (batch..., m, k) and `b` by
    (batch..., k, n) in any order and layout, becomes a call of the runtime's
    `weft_gemm_f32(a, b, c)` (`c += a * b`). Each operand is passed as a
    strided view of shape [batch..., rows, cols] built with
    `memref.reinterpret_cast`; a broadcast batch dim gets stride 0.
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect"
  ];
}

def WeftApproximateMath : Pass<"weft-approximate-math"> {
  let summary = "Polynomial approximations of erf, tanh, exp and log";
  let description = [{
    Replaces libm calls, one per element and never vectorized, by upstream's
    polynomial approximations (f32 accuracy within a few ulp), which LLVM
    vectorizes with the surrounding loop.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def WeftPlanBuffers : Pass<"weft-plan-buffers", "::mlir::ModuleOp"> {
  let summary = "Place temporary buffers in one arena by liveness";
  let description = [{
    Every statically shaped `memref.alloc` in a function's entry block gets
    an offset in a single arena, allocated once per call: buffers whose live
    ranges (from the allocation to the last use of it or of a view of it)
    do not overlap share memory. Offsets are chosen greedily, largest
    buffer first, at the lowest 64-byte aligned offset free for its whole
    live range. The deallocations of planned buffers are dropped; the arena
    is freed before each return. The module attribute `weft.memory_plan`
    records the arena size (the peak of temporary memory), the sum of the
    planned buffers, and their number.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"
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
    parallel region would cost more than the loop.
  }];
  let options = [
    Option<"minParallelWork", "min-parallel-work", "int64_t",
           /*default=*/"32768",
           "Iterations below which a loop nest stays sequential">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

#endif // WEFT_TARGET_CPU_PASSES_TD
