//===- LowerToNVVM.cpp - weft IR to the LLVM dialect with GPU kernels -----===//

#include "weft/Target/CPU/CPUTarget.h"
#include "weft/Target/CUDA/CUDATarget.h"
#include "weft/Target/CUDA/Passes.h"
#include "weft/runtime/Contract.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

std::string weft::cudaToolkitPath() {
  // The toolkit weftc was built with, unless CUDA_HOME names another.
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    return home;
  return WEFT_CUDA_TOOLKIT_DIR;
}

/// Everything up to the kernels as gpu.launch ops in host functions, with
/// the host's buffers in device memory. Each bf16 attention becomes a host
/// call of an `attention` function and each GEMM whose operands cuBLAS
/// reads one of a `gemm` function (cuDNN and cuBLAS, or the emulation's).
static std::string kernelsPipeline(const weft::LoweringOptions &options,
                                   llvm::StringRef attention,
                                   llvm::StringRef gemm) {
  return "weft-attention-to-library{callee=" + attention.str() + "}," +
         weft::bufferizedLinalgPipeline(options) +
         "weft-contractions-to-blas{callee=" + gemm.str() +
         " require-unit-strides=1 tf32=" + (options.allowTf32 ? "1" : "0") +
         "},"
         "weft-strided-copies-to-loops,"
         "func.func(weft-gpu-row-reductions,weft-gpu-tiled-transposes),"
         "func.func(convert-linalg-to-parallel-loops,scf-forall-to-parallel),"
         "weft-gpu-launch-loops,"
         "weft-gpu-merge-launches{max-parameter-bytes=" +
         std::to_string(weft::kCudaMaxParameterBytes) +
         "},weft-gpu-device-memory,weft-gpu-assume-alignment,"
         "weft-gpu-kernel-report,";
}

void weft::buildLowerToNVVMPipeline(OpPassManager &pm,
                                    const LoweringOptions &options,
                                    llvm::StringRef format) {
  std::string pipeline = kernelsPipeline(options, kCudaAttention, kCudaGemm);
  // The runtime learns where each numbered launch starts: its calls make
  // gpu-async-region wait for the GPU, so only in a profiling build.
  if (options.profileLaunches)
    pipeline +=
        std::string("weft-gpu-mark-launches{callee=") + kCudaLaunchMark + "},";
  // Constants go into the kernels' code, not their parameters.
  pipeline += "gpu-launch-sink-index-computations,gpu-kernel-outlining,"
              "weft-gpu-kernel-names,"
              "func.func(gpu-async-region),";
  // Each nvvm-attach-target adds one chip; the binary holds a cubin per chip.
  for (const char *chip : kCudaChips)
    pipeline += std::string("nvvm-attach-target{chip=") + chip +
                " features=" + kCudaPtxFeatures + " O=3},";
  pipeline +=
      "lower-affine,expand-strided-metadata,lower-affine,"
      "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,canonicalize,cse,"
      "reconcile-unrealized-casts),"
      "convert-scf-to-cf,gpu-to-llvm,"
      "finalize-memref-to-llvm{use-generic-functions},"
      "convert-arith-to-llvm,convert-index-to-llvm,convert-cf-to-llvm,"
      "convert-func-to-llvm,"
      "gpu-module-to-binary{format=" +
      format.str() + " toolkit=" + cudaToolkitPath() +
      "},"
      "canonicalize,reconcile-unrealized-casts";
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine("weft-lower-to-nvvm: ") + error);
}

namespace {
struct LowerToNVVMOptions : public PassPipelineOptions<LowerToNVVMOptions> {
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What the kernels become: bin (cubins, assembled by "
                     "ptxas) or isa (PTX text)"),
      llvm::cl::init("bin")};
};
} // namespace

/// The kernels run as loops on the CPU, their device accesses checked; the
/// host code is lowered as the CPU target's, one thread at a time.
static std::string emulatedKernelsToLLVMPipeline() {
  return "weft-gpu-emulate-launches," +
         weft::hostLoopsToLLVMPipeline(/*openMP=*/false);
}

void weft::buildEmulatedCUDAPipeline(OpPassManager &pm,
                                     const LoweringOptions &options) {
  std::string pipeline =
      kernelsPipeline(options, kEmulatedAttention, kEmulatedGemm) +
      emulatedKernelsToLLVMPipeline();
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine("weft-emulate-cuda: ") + error);
}

void weft::registerCUDAPipelines() {
  registerWeftCUDAPasses();
  PassPipelineRegistration<LowerToNVVMOptions>(
      "weft-lower-to-nvvm",
      "Lower weft IR to the LLVM dialect with CUDA kernels (after the weft "
      "passes)",
      [](OpPassManager &pm, const LowerToNVVMOptions &options) {
        buildLowerToNVVMPipeline(pm, LoweringOptions{}, options.format);
      });
  PassPipelineRegistration<>(
      "weft-emulated-gpu-to-llvm",
      "Test tool: lower host code with gpu.launch ops to the LLVM dialect, "
      "the kernels run as checked loops on the CPU",
      [](OpPassManager &pm) {
        std::string error;
        llvm::raw_string_ostream os(error);
        if (failed(parsePassPipeline(emulatedKernelsToLLVMPipeline(), pm, os)))
          llvm::report_fatal_error(llvm::Twine("weft-emulated-gpu-to-llvm: ") +
                                   error);
      });
}

namespace {
/// Its executables link the runtime, whose mgpu* functions run the kernels
/// over the CUDA driver it loads at run time.
class CUDATarget final : public weft::RuntimeLinkedTarget {
public:
  llvm::StringRef name() const override { return "cuda"; }
  llvm::StringRef device() const override { return weft::runtime::kCudaDevice; }
  std::string cannotCompile(bool partitioned) const override {
    if (partitioned)
      return "--target=cuda compiles one-rank programs so far: its "
             "collectives (NCCL) are not built yet";
    return "";
  }
  void buildLowering(OpPassManager &pm,
                     const weft::LoweringOptions &options) const override {
    weft::buildLowerToNVVMPipeline(pm, options);
  }
  bool fusesAttention(llvm::StringRef computeType) const override {
    return computeType == "bf16";
  }
};

/// A test tool, not a GPU: the CUDA target's kernels run on the CPU
/// (weft-gpu-emulate-launches) in an executable of the CPU runtime.
class CUDAEmulationTarget final : public weft::RuntimeLinkedTarget {
public:
  llvm::StringRef name() const override { return "cuda-emulation"; }
  llvm::StringRef device() const override {
    return weft::runtime::kEmulatedCudaDevice;
  }
  // The CPU runtime's collectives serve a partitioned program.
  std::string cannotCompile(bool) const override { return ""; }
  void buildLowering(OpPassManager &pm,
                     const weft::LoweringOptions &options) const override {
    weft::buildEmulatedCUDAPipeline(pm, options);
  }
  bool fusesAttention(llvm::StringRef computeType) const override {
    return computeType == "bf16";
  }
};
} // namespace

const weft::Target &weft::cudaTarget() {
  static const CUDATarget target;
  return target;
}

const weft::Target &weft::cudaEmulationTarget() {
  static const CUDAEmulationTarget target;
  return target;
}
