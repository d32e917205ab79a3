//===- Passes.td - Weft conversion passes ------------------*- tablegen -*-===//

#ifndef WEFT_CONVERSION_PASSES_TD
#define WEFT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertWeftToLinalg : Pass<"convert-weft-to-linalg"> {
  let summary = "Lower weft ops to linalg, tensor, arith and math on tensors";
  let description = [{
    Every weft op becomes destination-passing linalg ops on tensors (mostly
    `linalg.generic`, so elementwise chains fuse), tensor reshapes and
    slices, and arith/math scalar code. Broadcasting becomes indexing maps;
    reductions and attention become reduction generics; softmax, layer norm
    and RMS norm over trailing dims become row kernels (an `scf.forall` over
    rows whose body makes its passes over one row while it is in cache);
    contractions become generics that BLAS or tiling can pick up
    later. An op configuration the CPU backend does not handle (grouped
    convolution) is an error at that op.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // WEFT_CONVERSION_PASSES_TD
