//===- LowerToNVVM.cpp - weft IR to the LLVM dialect with GPU kernels -----===//

#include "weft/Target/CUDA/CUDATarget.h"
#include "weft/Target/Executable/RuntimeLinkedTarget.h"
#include "weft/Target/GPU/GPUPipelines.h"
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

/// The CUDA target's kernels: the runtime's cuBLASLt GEMMs and cuDNN
/// attention, or the emulation's, and the parameter bytes of PTX 8.1.
static weft::GPUKernelsOptions cudaKernels(bool emulated) {
  if (emulated)
    return {weft::runtime::kEmulatedAttention, weft::runtime::kEmulatedGemm,
            weft::kCudaMaxParameterBytes};
  return {weft::runtime::kCudaAttention, weft::runtime::kCudaGemm,
          weft::kCudaMaxParameterBytes};
}

void weft::buildLowerToNVVMPipeline(OpPassManager &pm,
                                    const LoweringOptions &options,
                                    llvm::StringRef format) {
  std::string pipeline = gpuKernelsPipeline(options, cudaKernels(false));
  // The runtime learns where each numbered launch starts: its calls make
  // gpu-async-region wait for the GPU, so only in a profiling build.
  if (options.profileLaunches)
    pipeline += std::string("weft-gpu-mark-launches{callee=") +
                runtime::kCudaLaunchMark + "},";
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

void weft::buildEmulatedCUDAPipeline(OpPassManager &pm,
                                     const LoweringOptions &options) {
  std::string pipeline = gpuKernelsPipeline(options, cudaKernels(true)) +
                         emulatedKernelsToLLVMPipeline();
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine("weft-emulate-cuda: ") + error);
}

void weft::registerCUDAPipelines() {
  PassPipelineRegistration<LowerToNVVMOptions>(
      "weft-lower-to-nvvm",
      "Lower weft IR to the LLVM dialect with CUDA kernels (after the weft "
      "passes)",
      [](OpPassManager &pm, const LowerToNVVMOptions &options) {
        buildLowerToNVVMPipeline(pm, LoweringOptions{}, options.format);
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
/// (weft-gpu-emulate-launches) in an executable of the emulation's runtime
/// (runtime/lib/emulation), whose GEMMs are the CPU backend's.
class CUDAEmulationTarget final : public weft::RuntimeLinkedTarget {
public:
  llvm::StringRef name() const override { return "cuda-emulation"; }
  llvm::StringRef device() const override {
    return weft::runtime::kEmulatedCudaDevice;
  }
  // The runtime's collectives over MPI serve a partitioned program.
  std::string cannotCompile(bool) const override { return ""; }
  llvm::SmallVector<std::string, 2> runtimeBackends() const override {
    return {weft::runtime::runtimeBackendOf(device().str()),
            weft::runtime::runtimeBackendOf(weft::runtime::kCpuDevice)};
  }
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
