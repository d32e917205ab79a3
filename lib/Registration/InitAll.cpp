//===- InitAll.cpp - The one place that registers everything -------------===//

#include "weft/InitAllDialects.h"
#include "weft/InitAllPasses.h"
#include "weft/InitAllTargets.h"

#include "weft/Conversion/Passes.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"
#include "weft/Lowering/Passes.h"
#include "weft/Target/CPU/CPUTarget.h"
#include "weft/Target/CUDA/CUDATarget.h"
#include "weft/Target/GPU/GPUPipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include <mutex>

// Weft lowers through most of upstream MLIR (linalg, bufferization, the
// LLVM conversions, shard), so its tools register all of it.
void weft::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<weft::WeftDialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  weft::registerShardBufferizationModels(registry);
  weft::registerWeftBufferizationModels(registry);
  // gpu-module-to-binary translates kernels to LLVM IR within a pass.
  mlir::registerAllToLLVMIRTranslations(registry);
}

void weft::registerAllPasses() {
  // A pipeline registered twice is a fatal error; the tools and the
  // compiler library may each ask.
  static std::once_flag registered;
  std::call_once(registered, [] {
    mlir::registerAllPasses();
    weft::registerWeftPasses();
    weft::registerWeftPipelines();
    weft::registerWeftConversionPasses();
    weft::registerWeftLoweringPasses();
    weft::registerCPUPipelines();
    weft::registerGPUPipelines();
    weft::registerCUDAPipelines();
  });
}

static const weft::Target *const allTargets[] = {
    &weft::cpuTarget(), &weft::cudaTarget(), &weft::cudaEmulationTarget()};

const weft::Target *weft::lookupTarget(llvm::StringRef name) {
  for (const Target *target : allTargets)
    if (target->name() == name)
      return target;
  return nullptr;
}

std::string weft::targetNames() {
  std::string names;
  for (const Target *target : allTargets)
    names += (names.empty() ? "" : ", ") + target->name().str();
  return names;
}
