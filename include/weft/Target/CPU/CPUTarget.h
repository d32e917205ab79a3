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

/// Registers `weft-lower-to-llvm` for weft-opt.
void registerCPUPipelines();

/// The CPU target: native code for the host, OpenMP loops, OpenBLAS
/// GEMMs, collectives over MPI.
const Target &cpuTarget();

} // namespace weft

#endif // WEFT_TARGET_CPU_CPUTARGET_H
