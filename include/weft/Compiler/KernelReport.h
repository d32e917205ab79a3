//===- KernelReport.h - A GPU program's kernels priced on a GPU -*- C++ -*-===//
//
// `weftc --target=cuda --report=kernels`: every launch and library call of
// a compiled program (ProgramReport::launches) priced on a named GPU by a
// roofline with achievable ceilings, the totals of a step (launches, HBM
// bytes, time, tokens/s, MFU), as text or JSON. The ceilings are stated in
// docs/cuda-backend.md.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_COMPILER_KERNELREPORT_H
#define WEFT_COMPILER_KERNELREPORT_H

#include "weft/Compiler/Compiler.h"
#include "weft/Planner/CostModel.h"

#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace weft {

/// The fractions of a GPU's peaks that a kernel can reach (the best
/// measured figures, ../shared/GUIDE.md §9), and what a launch costs.
struct KernelCeilings {
  double tensorCoreGemm = 0.80; // of the bf16 (or fp16) tensor-core peak
  double cudaCoreFlops = 0.80;  // of the FP32 peak, without tensor cores
  double memory = 0.90;         // of HBM bandwidth
  /// Fused attention, of the bf16 peak: cuDNN's measured 288 TFLOP/s
  /// forward and 348 backward on an H100 (head dim 64, sequence 1024,
  /// causal; FlashAttention-3 paper), FlashAttention's FLOP count.
  double attentionForward = 288.0 / 989.0;
  double attentionBackward = 348.0 / 989.0;
  /// Per launch or library call: the host's launch and the kernel's
  /// start, without CUDA graphs (3-5 us measured; the low end).
  double launchSeconds = 3e-6;
};

/// One launch priced: the seconds of one run and what bounds it.
struct PricedLaunch {
  double seconds = 0;
  std::string bound; // "compute", "memory" or "launch"
  /// More than 64 K elements of work on fewer blocks than the GPU has
  /// multiprocessors.
  bool undersized = false;
};

struct KernelPrediction {
  std::string gpu;
  std::vector<PricedLaunch> launches; // as ProgramReport::launches
  int64_t launchesPerStep = 0;
  double hbmBytesPerStep = 0;
  double stepSeconds = 0;
  double tokensPerSecond = 0; // 0: not a training step
  double mfu = 0;             // the step's FLOPs against the bf16 peak
  /// Of the contractions' FLOPs (a training step's count; else the library
  /// GEMMs'), the fraction that runs on tensor cores.
  double matmulFlopsOnTensorCores = 0;
  int64_t undersizedLaunches = 0;
};

/// The GPU of a planner preset by a short name: a100, h100 or h200;
/// std::nullopt for any other.
std::optional<planner::Gpu> gpuByName(const std::string &name);

KernelPrediction predictKernels(const ProgramReport &program,
                                const planner::Gpu &gpu,
                                const KernelCeilings &ceilings = {});

/// The report as JSON: the GPU and ceilings, every launch with its price,
/// the buffers of the memory plan, the totals.
llvm::json::Value kernelReportJSON(const ProgramReport &program,
                                   const KernelPrediction &prediction,
                                   const planner::Gpu &gpu,
                                   const KernelCeilings &ceilings = {});

/// The report as text: the totals, then the launches that take the most
/// time.
void printKernelReport(const ProgramReport &program,
                       const KernelPrediction &prediction,
                       llvm::raw_ostream &os);

} // namespace weft

#endif // WEFT_COMPILER_KERNELREPORT_H
