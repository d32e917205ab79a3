//===- GPUPipelines.cpp - What every GPU target shares --------------------===//

#include "weft/Target/GPU/GPUPipelines.h"
#include "weft/Target/GPU/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

std::string weft::gpuKernelsPipeline(const LoweringOptions &options,
                                     const GPUKernelsOptions &kernels) {
  return "weft-attention-to-library{callee=" + kernels.attention.str() + "}," +
         bufferizedLinalgPipeline(options) +
         "weft-contractions-to-blas{callee=" + kernels.gemm.str() +
         " require-unit-strides=1 tf32=" + (options.allowTf32 ? "1" : "0") +
         "},"
         "weft-strided-copies-to-loops,"
         "func.func(weft-gpu-row-reductions,weft-gpu-tiled-transposes),"
         "func.func(convert-linalg-to-parallel-loops,scf-forall-to-parallel),"
         "weft-gpu-launch-loops,"
         "weft-gpu-merge-launches{max-parameter-bytes=" +
         std::to_string(kernels.maxParameterBytes) +
         "},weft-gpu-device-memory,weft-gpu-assume-alignment,"
         "weft-gpu-kernel-report,";
}

std::string weft::emulatedKernelsToLLVMPipeline() {
  return "weft-gpu-emulate-launches," + hostLoopsToLLVMPipeline(
                                            /*openMP=*/false);
}

void weft::registerGPUPipelines() {
  registerWeftGPUPasses();
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
