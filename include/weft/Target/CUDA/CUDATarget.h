//===- CUDATarget.h - Compile weft IR to CUDA kernels -----------*- C++ -*-===//
//
// The CUDA implementation of the target seam (weft/Target/Target.h): every
// loop nest a kernel, NVVM to PTX to cubins embedded in the host object,
// launched through the `mgpu*` entry points of the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_CUDA_CUDATARGET_H
#define WEFT_TARGET_CUDA_CUDATARGET_H

#include "weft/Target/Target.h"

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>

namespace weft {

/// The GPUs every kernel is assembled for: Hopper (H100, H200), then Ampere
/// (A100). The host object embeds the first one's cubin only (upstream's
/// #gpu.select_object picks one object); the others are assembled, so
/// checked, but not carried yet.
constexpr const char *kCudaChips[] = {"sm_90", "sm_80"};
/// The PTX version the kernels are written in: sm_90 needs PTX 8.0, and
/// PTX 8.1 (CUDA 12.1) lets a kernel take kCudaMaxParameterBytes.
constexpr const char *kCudaPtxFeatures = "+ptx81";
/// The bytes of parameters a kernel may take from PTX 8.1 on, on Volta and
/// newer (ptxas refuses more): weft-gpu-merge-launches fills launches to it.
constexpr int64_t kCudaMaxParameterBytes = 32764;

/// The CUDA toolkit whose ptxas assembles the kernels and whose libdevice
/// they link: $CUDA_HOME, else the one found when Weft was built.
std::string cudaToolkitPath();

/// Adds the lowering of weft IR (after the weft-level passes) to the LLVM
/// dialect with GPU kernels: linalg, bufferization, loops, one kernel per
/// loop nest (weft-gpu-launch-loops), device memory
/// (weft-gpu-device-memory), NVVM, and the cubins of `format` ("bin", or
/// "isa" for PTX text) for every chip of kCudaChips.
void buildLowerToNVVMPipeline(mlir::OpPassManager &pm,
                              const LoweringOptions &options,
                              llvm::StringRef format = "bin");

/// Test tool: the same lowering up to the kernels, which then run as loops
/// on the CPU (weft-gpu-emulate-launches), with the CPU target's host code.
void buildEmulatedCUDAPipeline(mlir::OpPassManager &pm,
                               const LoweringOptions &options);

/// Registers `weft-lower-to-nvvm` for weft-opt.
void registerCUDAPipelines();

/// The CUDA target.
const Target &cudaTarget();

/// `--target=cuda-emulation`, a test tool: the CUDA target's kernels run
/// one thread at a time on the CPU, in an executable of the emulation's
/// runtime, so
/// that they are checked against the CPU backend without a GPU. Never a
/// GPU result.
const Target &cudaEmulationTarget();

} // namespace weft

#endif // WEFT_TARGET_CUDA_CUDATARGET_H
