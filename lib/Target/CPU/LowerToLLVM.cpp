//===- LowerToLLVM.cpp - weft IR to the LLVM dialect ----------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Lowering/Pipeline.h"
#include "weft/Target/CPU/CPUTarget.h"
#include "weft/Target/CPU/Passes.h"
#include "weft/Target/Executable/RuntimeLinkedTarget.h"
#include "weft/runtime/Contract.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

void weft::buildLowerToLLVMPipeline(OpPassManager &pm,
                                    const LoweringOptions &options) {
  // Allocations go through the runtime's caching allocator
  // (use-generic-functions), so repeated runs reuse their buffers.
  std::string pipeline = bufferizedLinalgPipeline(options);
  pipeline += "weft-contractions-to-blas,weft-strided-copies-to-loops,"
              // Parallel dims become OpenMP work-sharing loops; reductions stay
              // sequential inside them.
              "func.func(weft-tile-column-reductions,"
              "convert-linalg-to-parallel-loops,scf-forall-to-parallel),"
              "weft-serialize-inner-loop,"
              "convert-scf-to-openmp," +
              hostLoopsToLLVMPipeline(/*openMP=*/true);
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine("weft-lower-to-llvm: ") + error);
}

void weft::registerCPUPipelines() {
  registerWeftCPUPasses();
  PassPipelineRegistration<>(
      "weft-lower-to-llvm",
      "Lower weft IR to the LLVM dialect for the CPU (after the weft passes)",
      [](OpPassManager &pm) {
        buildLowerToLLVMPipeline(pm, LoweringOptions{});
      });
}

namespace {
class CPUTarget final : public weft::RuntimeLinkedTarget {
public:
  llvm::StringRef name() const override { return "cpu"; }
  llvm::StringRef device() const override { return weft::runtime::kCpuDevice; }
  void buildLowering(OpPassManager &pm,
                     const weft::LoweringOptions &options) const override {
    weft::buildLowerToLLVMPipeline(pm, options);
  }
};
} // namespace

const weft::Target &weft::cpuTarget() {
  static const CPUTarget target;
  return target;
}
