//===- Evaluator.h - Reference semantics of the weft dialect ----*- C++ -*-===//
//
// A direct, slow, double-precision evaluator of functions made of weft ops.
// It is the executable definition of each op's semantics: tests compare
// rewrites (fusions, later partitioning and lowering) against it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_REFERENCE_EVALUATOR_H
#define WEFT_DIALECT_WEFT_REFERENCE_EVALUATOR_H

#include "weft/Dialect/Weft/IR/HostTensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace weft {

/// Evaluates `func` on `arguments` (one per function argument, of its
/// shape). Floats are computed in double precision. Emits an error at the
/// offending op and fails on an op it does not know.
llvm::FailureOr<llvm::SmallVector<HostTensor>>
evaluateFunction(mlir::func::FuncOp func, llvm::ArrayRef<HostTensor> arguments);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_REFERENCE_EVALUATOR_H
