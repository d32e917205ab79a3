//===- GPUPipelines.h - What every GPU target shares ------------*- C++ -*-===//
//
// A GPU target (lib/Target/<vendor>) lowers weft IR to host functions that
// launch gpu.launch kernels, with these passes; then its own conversion
// takes the kernels to its ISA (CUDA: NVVM, PTX, cubins). The emulation
// runs the same kernels as checked loops on the CPU instead.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_GPU_GPUPIPELINES_H
#define WEFT_TARGET_GPU_GPUPIPELINES_H

#include "weft/Lowering/Pipeline.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace weft {

/// The runtime functions a GPU target's host code calls (weft/runtime/
/// Contract.h), and the most bytes of parameters one kernel may take.
struct GPUKernelsOptions {
  llvm::StringRef attention;
  llvm::StringRef gemm;
  int64_t maxParameterBytes;
};

/// Everything up to the kernels as gpu.launch ops in host functions, with
/// the host's buffers in device memory, as pass pipeline text ending in a
/// comma. Each bf16 attention becomes a host call of an `attention`
/// function and each GEMM whose operands a column-major library reads one
/// of a `gemm` function.
std::string gpuKernelsPipeline(const LoweringOptions &options,
                               const GPUKernelsOptions &kernels);

/// Test tool: the kernels of gpuKernelsPipeline run as loops on the CPU,
/// their device accesses checked (weft-gpu-emulate-launches); the host code
/// is lowered as a CPU program's, one thread at a time.
std::string emulatedKernelsToLLVMPipeline();

/// Registers the gpu-dialect passes and `weft-emulated-gpu-to-llvm` for
/// weft-opt.
void registerGPUPipelines();

} // namespace weft

#endif // WEFT_TARGET_GPU_GPUPIPELINES_H
