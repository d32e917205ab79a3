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

def ConvertShardToWeftRuntime
    : Pass<"convert-shard-to-weft-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower shard ops of a partitioned program to runtime calls";
  let description = [{
    A rank's coordinate (`shard.process_multi_index`) becomes a call of
    `weft_mesh_coordinate(axis)`, and `shard.all_slice` a `tensor.extract_slice`
    at that coordinate. The collectives (`all_reduce`, `all_gather`,
    `reduce_scatter`, `all_to_all`) and the pipeline messages (`send`,
    `recv`) are lowered by bufferization: their BufferizableOpInterface
    models (registered with the dialects) allocate the result and call
    `weft_collective_<dtype>(in, out, kind, axes_mask, dim, concat_dim)` or
    `weft_send_<dtype>` / `weft_recv_<dtype>(in, out, axes_mask, peer,
    tag)`, which this pass declares (the names and kinds are
    `weft/runtime/Contract.h`'s). Run once more after
    bufferization, the pass erases the `shard.grid` that nothing refers to
    any more. A reduction other than a sum is an error at the op.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::tensor::TensorDialect", "::mlir::memref::MemRefDialect"
  ];
}

#endif // WEFT_CONVERSION_PASSES_TD
