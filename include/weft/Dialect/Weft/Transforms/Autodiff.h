//===- Autodiff.h - Reverse-mode differentiation ----------------*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_AUTODIFF_H
#define WEFT_DIALECT_WEFT_TRANSFORMS_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace weft {

/// Adds, next to `func`, a function `name` with the same arguments that
/// returns `func`'s results followed by the gradient of its first result (a
/// scalar float loss) with respect to every `weft.param` argument. Fails
/// with an error at the first op that has no gradient rule.
llvm::FailureOr<mlir::func::FuncOp>
buildGradientFunction(mlir::func::FuncOp func, llvm::StringRef name);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_AUTODIFF_H
