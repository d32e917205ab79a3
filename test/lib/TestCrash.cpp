//===- TestCrash.cpp - A pass that crashes, for the crash guard's tests ---===//
//
// `weft-test-crash` dereferences a null pointer, as a miscompiled or buggy
// pass would: the tools' crash guard (weft/Support/CrashGuard.h) must end
// the process promptly and name this pass. Test builds only.
//
//===----------------------------------------------------------------------===//

#include "weft/InitAllPasses.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

namespace {
struct TestCrashPass
    : public mlir::PassWrapper<TestCrashPass,
                               mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestCrashPass)

  llvm::StringRef getArgument() const final { return "weft-test-crash"; }
  llvm::StringRef getDescription() const final {
    return "Crash (a test of the tools' crash guard)";
  }
  void runOnOperation() final {
    // volatile: the compiler may not fold the fault away.
    volatile int *null = nullptr;
    *null = 1;
  }
};
} // namespace

void weft::registerTestPasses() { mlir::PassRegistration<TestCrashPass>(); }
