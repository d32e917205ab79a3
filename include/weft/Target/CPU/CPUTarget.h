//===- CPUTarget.h - Compile weft IR to native CPU code ---------*- C++ -*-===//
//
// The CPU implementation of the target seam (weft/Target/Target.h).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_CPU_CPUTARGET_H
#define WEFT_TARGET_CPU_CPUTARGET_H

#include "weft/Target/Target.h"

#include "mlir/Pass/PassManager.h"

#include <string>

namespace weft {

/// Adds the lowering of weft IR (after the weft-level passes) to the LLVM
/// dialect: linalg on tensors, bufferization with results as out-params,
/// deallocation, loops, and the LLVM conversions.
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm,
                              const LoweringOptions &options);

/// The end of the CPU lowering, as pass pipeline text: loops on memrefs
/// (with `openMP`, their OpenMP regions too) to the LLVM dialect, with
/// polynomial math and bf16 emulated in f32.
std::string hostLoopsToLLVMPipeline(bool openMP);

/// Registers `weft-lower-to-llvm` for weft-opt.
void registerCPUPipelines();

/// The CPU target: native code for the host, OpenMP loops, OpenBLAS
/// GEMMs, collectives over MPI.
const Target &cpuTarget();

/// A target whose executables link Weft's runtime (the CPU target, and the
/// CUDA ones: the runtime carries their mgpu* functions and loads the CUDA
/// driver at run time): libweft_runtime*.a and libweft_contract.a,
/// OpenBLAS, libomp, and for a partitioned model the MPI world.
class RuntimeLinkedTarget : public Target {
public:
  bool link(llvm::ArrayRef<std::string> objects, llvm::StringRef output,
            llvm::StringRef runtimeDirectory, bool partitioned,
            bool sharedLibrary, std::string &error) const override;
};

} // namespace weft

#endif // WEFT_TARGET_CPU_CPUTARGET_H
