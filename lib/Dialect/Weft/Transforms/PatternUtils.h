//===- PatternUtils.h - Matching helpers for Weft rewrites ------*- C++ -*-===//

#ifndef WEFT_LIB_DIALECT_WEFT_TRANSFORMS_PATTERNUTILS_H
#define WEFT_LIB_DIALECT_WEFT_TRANSFORMS_PATTERNUTILS_H

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace weft {

/// The value of a splat constant (of any shape), if `v` is one.
std::optional<double> getSplatConstant(mlir::Value v);

/// True if `v` is a splat constant within relative `tolerance` of `expected`.
bool isSplatConstant(mlir::Value v, double expected, double tolerance = 1e-4);

/// If `v` is produced by a binary op of type OpTy one of whose operands is
/// `known`, returns the other operand (either order for commutative ops).
template <typename OpTy>
mlir::Value otherOperand(mlir::Value v, mlir::Value known) {
  auto op = v.getDefiningOp<OpTy>();
  if (!op)
    return nullptr;
  if (op.getLhs() == known)
    return op.getRhs();
  if (op.getRhs() == known && OpTy::template hasTrait<mlir::OpTrait::IsCommutative>())
    return op.getLhs();
  return nullptr;
}

/// If `v` is `x * c` or `c * x` with a splat constant c, returns x and sets
/// `factor` to c; also accepts `x / c` with factor 1/c.
mlir::Value matchScaledBy(mlir::Value v, double &factor);

/// If `reduce` averages its input over the trailing axes k..rank-1 with
/// keepdims, returns k.
std::optional<int64_t> trailingMeanAxis(ReduceMeanOp reduce);

/// True if `v` is `x * x` or `pow(x, 2)` for the given x.
bool isSquareOf(mlir::Value v, mlir::Value x);

/// If `v` is `1 / sqrt(e)` as rsqrt(e) or reciprocal(sqrt(e)), returns e.
mlir::Value matchRsqrt(mlir::Value v);

/// Returns `param` shaped as `normalized` (reshaping away leading unit dims),
/// or null if it does not hold exactly one value per normalized position.
mlir::Value asNormalizedParam(mlir::OpBuilder &builder, mlir::Location loc,
                              mlir::Value param,
                              llvm::ArrayRef<int64_t> normalized);

} // namespace weft

#endif // WEFT_LIB_DIALECT_WEFT_TRANSFORMS_PATTERNUTILS_H
