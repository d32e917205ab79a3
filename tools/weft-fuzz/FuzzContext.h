//===- FuzzContext.h - The MLIR context of the IR fuzz targets --*- C++ -*-===//
//
// Creating an MLIRContext per input would dominate a target's time, and one
// kept forever grows with every attribute and type an input uniques; the
// targets that build IR share a context and replace it now and then.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TOOLS_WEFT_FUZZ_FUZZCONTEXT_H
#define WEFT_TOOLS_WEFT_FUZZ_FUZZCONTEXT_H

namespace mlir {
class DialectRegistry;
class MLIRContext;
} // namespace mlir

namespace weft::fuzz {

/// A single-threaded context with the dialects `registerDialects` adds,
/// replaced by a fresh one every 256 calls.
mlir::MLIRContext &
reusedContext(void (*registerDialects)(mlir::DialectRegistry &));

} // namespace weft::fuzz

#endif // WEFT_TOOLS_WEFT_FUZZ_FUZZCONTEXT_H
