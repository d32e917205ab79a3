//===- CrashGuard.cpp - A crash ends promptly and names its pass ----------===//

#include "weft/Support/CrashGuard.h"

#include "mlir/IR/Operation.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"

#include <cstdlib>
#include <cstring>
#include <execinfo.h>
#include <unistd.h>

namespace {

/// The passes running on one thread, innermost last. The strings belong to
/// the pass objects and the context, which outlive the run.
struct RunningPasses {
  static constexpr int kDepth = 32;
  llvm::StringRef pass[kDepth];
  llvm::StringRef op[kDepth];
  llvm::StringRef symbol[kDepth];
  int depth = 0;
};
thread_local RunningPasses running;

const char *toolName = "weft";

class CrashGuardInstrumentation : public mlir::PassInstrumentation {
  void runBeforePass(mlir::Pass *pass, mlir::Operation *op) override {
    int depth = running.depth++;
    if (depth >= RunningPasses::kDepth)
      return;
    running.pass[depth] =
        pass->getArgument().empty() ? pass->getName() : pass->getArgument();
    running.op[depth] = op->getName().getStringRef();
    auto symbol = op->getAttrOfType<mlir::StringAttr>("sym_name");
    running.symbol[depth] = symbol ? symbol.getValue() : llvm::StringRef();
  }
  void runAfterPass(mlir::Pass *, mlir::Operation *) override {
    --running.depth;
  }
  void runAfterPassFailed(mlir::Pass *, mlir::Operation *) override {
    --running.depth;
  }
};

/// Only write(2) here: the heap may be what crashed.
void put(llvm::StringRef text) {
  while (!text.empty()) {
    ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
    if (written <= 0)
      return;
    text = text.drop_front(written);
  }
}

void reportCrash(void *) {
  // SIGALRM's default action ends the process if printing the stack hangs.
  ::alarm(weft::kCrashReportSeconds);
  put(toolName);
  int depth = std::min(running.depth, RunningPasses::kDepth);
  if (depth == 0) {
    put(": error: crashed outside any pass; its stack follows\n");
    return;
  }
  put(": error: crashed in pass '");
  put(running.pass[depth - 1]);
  put("' on '");
  put(running.op[depth - 1]);
  if (!running.symbol[depth - 1].empty()) {
    put(" @");
    put(running.symbol[depth - 1]);
  }
  put("'; its stack follows\n");
}

} // namespace

void weft::installCrashGuard(const char *tool) {
  toolName = tool;
  // Without a symbolizer, LLVM still looks for one after the crash, and
  // that allocates.
  if (!std::getenv("LLVM_SYMBOLIZER_PATH") &&
      !llvm::sys::findProgramByName("llvm-symbolizer"))
    ::setenv("LLVM_DISABLE_SYMBOLIZATION", "1", /*overwrite=*/0);
  // glibc loads its unwinder on the first backtrace(), by malloc and
  // dlopen: do it now, not in the handler.
  void *frame;
  ::backtrace(&frame, 1);
  llvm::sys::AddSignalHandler(reportCrash, nullptr);
}

void weft::guardPasses(mlir::PassManager &passes) {
  passes.addInstrumentation(std::make_unique<CrashGuardInstrumentation>());
}
