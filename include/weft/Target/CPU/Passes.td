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

#endif // WEFT_TARGET_CPU_PASSES_TD
