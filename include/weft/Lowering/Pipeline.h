//===- Pipeline.h - The lowering every target starts with -------*- C++ -*-===//

#ifndef WEFT_LOWERING_PIPELINE_H
#define WEFT_LOWERING_PIPELINE_H

#include <string>

namespace weft {

struct LoweringOptions {
  /// 0 skips the tensor-level fusion of elementwise ops.
  unsigned optLevel = 2;
  /// Activation recomputation of a training step: none, selective or full
  /// (see weft-recompute).
  std::string recompute = "none";
  /// The function recomputation applies to (its first result is the loss).
  std::string lossFunction;
  /// f32 GEMMs may multiply as TF32 on tensor cores (a GPU target's).
  bool allowTf32 = false;
  /// A GPU target's host code tells the runtime where each launch of the
  /// kernel report starts, which $WEFT_PROFILE_LAUNCHES times (each mark
  /// synchronizes the host with the GPU: a profile, not a fast run).
  bool profileLaunches = false;
};

/// The first part of every target's lowering, as pass pipeline text ending
/// in a comma: weft to linalg on tensors (a partitioned program's shard ops
/// to runtime calls), elementwise fusion and recomputation, bufferization
/// with results as out-params, the buffer plan and deallocation. What
/// follows works on loops over memrefs.
std::string bufferizedLinalgPipeline(const LoweringOptions &options);

/// The end of a host program's lowering, as pass pipeline text: loops on
/// memrefs (with `openMP`, their OpenMP regions too) to the LLVM dialect,
/// with polynomial math and bf16 emulated in f32. The CPU target's code
/// ends so, and the host code of the GPU kernels' emulation.
std::string hostLoopsToLLVMPipeline(bool openMP);

} // namespace weft

#endif // WEFT_LOWERING_PIPELINE_H
