//===- KernelReport.cpp - A GPU program's kernels priced on a GPU ---------===//

#include "weft/Compiler/KernelReport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <numeric>

using namespace weft;

/// Work beyond which a launch should fill the GPU: 64 K elements.
static constexpr int64_t kLargeLaunchElements = 64 * 1024;

std::optional<planner::Gpu> weft::gpuByName(const std::string &name) {
  std::string preset = name == "a100"   ? "dgx-a100-80g"
                       : name == "h100" ? "dgx-h100"
                       : name == "h200" ? "h200"
                                        : "";
  if (preset.empty())
    return std::nullopt;
  return planner::Cluster::preset(preset, 1)->gpu;
}

static int64_t blocksOf(const ProgramReport::Launch &launch) {
  return std::accumulate(launch.grid.begin(), launch.grid.end(), int64_t(1),
                         std::multiplies<>());
}

KernelPrediction weft::predictKernels(const ProgramReport &program,
                                      const planner::Gpu &gpu,
                                      const KernelCeilings &ceilings) {
  KernelPrediction prediction;
  prediction.gpu = gpu.model;
  double matmulFlops = 0, tensorCoreFlops = 0;
  for (const ProgramReport::Launch &launch : program.launches) {
    PricedLaunch &priced = prediction.launches.emplace_back();
    double peak = launch.tensorCores ? (!launch.tf32       ? gpu.peakBf16
                                        : gpu.peakTf32 > 0 ? gpu.peakTf32
                                                           : gpu.peakFp32) *
                                           ceilings.tensorCoreGemm
                                     : gpu.peakFp32 * ceilings.cudaCoreFlops;
    double flops = double(launch.flops);
    if (launch.kind == "attention") {
      bool forward = llvm::StringRef(launch.library).ends_with("forward");
      peak = gpu.peakBf16 *
             (forward ? ceilings.attentionForward : ceilings.attentionBackward);
      flops = double(launch.kernelFlops);
    }
    double bytes = double(launch.bytesRead + launch.bytesWritten);
    double compute = flops / peak;
    double memory = bytes / (gpu.memoryBandwidth * ceilings.memory);
    double work = std::max(compute, memory);
    priced.seconds = work + ceilings.launchSeconds;
    priced.bound = work < ceilings.launchSeconds ? "launch"
                   : compute >= memory           ? "compute"
                                                 : "memory";
    priced.undersized = launch.kind == "kernel" &&
                        launch.elements > kLargeLaunchElements &&
                        blocksOf(launch) < gpu.multiprocessors;
    prediction.launchesPerStep += launch.runs;
    prediction.hbmBytesPerStep += bytes * double(launch.runs);
    prediction.stepSeconds += priced.seconds * double(launch.runs);
    prediction.undersizedLaunches += priced.undersized ? launch.runs : 0;
    if (launch.kind != "kernel") {
      matmulFlops += double(launch.flops) * double(launch.runs);
      if (launch.tensorCores)
        tensorCoreFlops += double(launch.flops) * double(launch.runs);
    }
  }
  // A training step's contractions all count, the GEMMs left as kernels
  // too.
  if (program.stepFlops > 0)
    matmulFlops = program.stepFlops;
  if (matmulFlops > 0)
    prediction.matmulFlopsOnTensorCores = tensorCoreFlops / matmulFlops;
  if (prediction.stepSeconds > 0) {
    if (program.tokensPerStep)
      prediction.tokensPerSecond =
          double(program.tokensPerStep) / prediction.stepSeconds;
    prediction.mfu = program.stepFlops / prediction.stepSeconds / gpu.peakBf16;
  }
  return prediction;
}

llvm::json::Value weft::kernelReportJSON(const ProgramReport &program,
                                         const KernelPrediction &prediction,
                                         const planner::Gpu &gpu,
                                         const KernelCeilings &ceilings) {
  llvm::json::Array launches;
  for (auto [launch, priced] :
       llvm::zip_equal(program.launches, prediction.launches)) {
    llvm::json::Object entry{
        {"id", launch.id},
        {"kind", launch.kind},
        {"function", launch.function},
        {"index", launch.index},
        {"node", launch.node},
        {"runs", launch.runs},
        {"flops", launch.flops},
        {"bytes_read", launch.bytesRead},
        {"bytes_written", launch.bytesWritten},
        {"elements", launch.elements},
        {"exact", launch.exact},
        {"tensor_cores", launch.tensorCores},
        {"tf32", launch.tf32},
        {"predicted_seconds", priced.seconds},
        {"bound", priced.bound},
        {"undersized", priced.undersized},
    };
    if (launch.kind == "kernel") {
      entry["grid"] = llvm::json::Array(launch.grid);
      entry["block"] = llvm::json::Array(launch.block);
    } else {
      entry["library"] = launch.library;
      entry["shape"] = llvm::json::Array(launch.shape);
      if (launch.kind == "gemm")
        entry["epilogue"] = launch.epilogue;
    }
    if (launch.kind == "attention")
      entry["kernel_flops"] = launch.kernelFlops;
    launches.push_back(std::move(entry));
  }
  llvm::json::Array buffers;
  for (const ProgramReport::DeviceBuffer &buffer : program.deviceBuffers)
    buffers.push_back(llvm::json::Object{
        {"kind", buffer.kind},
        {"type", buffer.type},
        {"shape", llvm::json::Array(buffer.shape)},
        {"element_bits", buffer.elementBits},
        {"elements", buffer.elements},
        {"count", buffer.count},
    });
  return llvm::json::Object{
      {"gpu",
       llvm::json::Object{
           {"name", gpu.model},
           {"multiprocessors", gpu.multiprocessors},
           {"peak_bf16_flops", gpu.peakBf16},
           {"peak_tf32_flops", gpu.peakTf32},
           {"peak_fp32_flops", gpu.peakFp32},
           {"memory_bandwidth", gpu.memoryBandwidth},
       }},
      {"ceilings",
       llvm::json::Object{
           {"tensor_core_gemm", ceilings.tensorCoreGemm},
           {"cuda_core_flops", ceilings.cudaCoreFlops},
           {"memory", ceilings.memory},
           {"launch_seconds", ceilings.launchSeconds},
           {"attention_forward", ceilings.attentionForward},
           {"attention_backward", ceilings.attentionBackward},
       }},
      {"step",
       llvm::json::Object{
           {"flops", program.stepFlops},
           {"tokens", program.tokensPerStep},
       }},
      {"totals",
       llvm::json::Object{
           {"launches_per_step", prediction.launchesPerStep},
           {"hbm_bytes_per_step", prediction.hbmBytesPerStep},
           {"predicted_step_seconds", prediction.stepSeconds},
           {"tokens_per_second", prediction.tokensPerSecond},
           {"mfu", prediction.mfu},
           {"matmul_flops_on_tensor_cores",
            prediction.matmulFlopsOnTensorCores},
           {"undersized_launches", prediction.undersizedLaunches},
       }},
      {"launches", std::move(launches)},
      {"buffers", std::move(buffers)},
  };
}

void weft::printKernelReport(const ProgramReport &program,
                             const KernelPrediction &prediction,
                             llvm::raw_ostream &os) {
  os << "kernels on " << prediction.gpu << ": " << prediction.launchesPerStep
     << " launches per run ("
     << llvm::count_if(program.launches,
                       [](const auto &l) { return l.kind != "kernel"; })
     << " of " << program.launches.size()
     << " distinct launches are library calls), "
     << llvm::format("%.4g", prediction.hbmBytesPerStep / 1e9)
     << " GB of HBM traffic, predicted "
     << llvm::format("%.4g", prediction.stepSeconds * 1e3) << " ms";
  if (prediction.tokensPerSecond > 0)
    os << ", " << llvm::format("%.4g", prediction.tokensPerSecond)
       << " tokens/s";
  if (program.stepFlops > 0)
    os << ", MFU " << llvm::format("%.2f", prediction.mfu * 100) << " %";
  os << "\n";
  os << "matmul FLOPs on tensor cores: "
     << llvm::format("%.1f", prediction.matmulFlopsOnTensorCores * 100)
     << " %; launches with more than 64 K elements of work on fewer blocks "
        "than the GPU's multiprocessors: "
     << prediction.undersizedLaunches << "\n";
  // The launches that take the most time over a run, longest first.
  std::vector<size_t> order(program.launches.size());
  std::iota(order.begin(), order.end(), 0);
  auto total = [&](size_t i) {
    return prediction.launches[i].seconds * double(program.launches[i].runs);
  };
  llvm::sort(order, [&](size_t a, size_t b) { return total(a) > total(b); });
  os << "longest launches (id, runs, us per run, bound, what):\n";
  for (size_t i : llvm::ArrayRef(order).take_front(10)) {
    const ProgramReport::Launch &launch = program.launches[i];
    os << llvm::format("  #%-4lld x%-4lld %10.1f  %-7s ", (long long)launch.id,
                       (long long)launch.runs,
                       prediction.launches[i].seconds * 1e6,
                       prediction.launches[i].bound.c_str())
       << launch.kind << " in " << launch.function;
    if (!launch.node.empty())
      os << " (" << launch.node << ")";
    os << "\n";
  }
}
