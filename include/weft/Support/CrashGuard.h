//===- CrashGuard.h - A crash ends promptly and names its pass --*- C++ -*-===//
//
// A compiler crash must fail a job, not hang it: LLVM's crash handler
// symbolizes the stack by running `llvm-symbolizer`, allocating on a heap
// the crash may have corrupted, and a process stuck there never exits.
// The guard prints which pass was running, bounds the handler's time, and
// turns symbolization off when no symbolizer can be found.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_SUPPORT_CRASHGUARD_H
#define WEFT_SUPPORT_CRASHGUARD_H

namespace mlir {
class PassManager;
} // namespace mlir

namespace weft {

/// Installs the crash handler of a tool named `tool`. Call it first in
/// main, before llvm::InitLLVM: handlers run in the order they were added,
/// and this one must run before the stack printer.
void installCrashGuard(const char *tool);

/// Makes `passes` record the pass each thread runs, so that a crash in it
/// prints "<tool>: error: crashed in pass '<pass>' on '<op>'".
void guardPasses(mlir::PassManager &passes);

/// Seconds a crashed process may spend printing its stack before it is
/// ended.
constexpr unsigned kCrashReportSeconds = 5;

} // namespace weft

#endif // WEFT_SUPPORT_CRASHGUARD_H
