//===- WeftBuilders.h - Small helpers that build weft values ----*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTBUILDERS_H
#define WEFT_DIALECT_WEFT_IR_WEFTBUILDERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace weft {

/// The ranked tensor type of `value` (weft values are ranked tensors).
inline mlir::RankedTensorType tensorTypeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType());
}

/// A `weft.constant` of `type` with every element `value` (converted to the
/// element type, float or integer).
mlir::Value createSplat(mlir::OpBuilder &builder, mlir::Location loc,
                        mlir::RankedTensorType type, double value);

/// A rank-0 `weft.constant` of `element` type.
mlir::Value createScalar(mlir::OpBuilder &builder, mlir::Location loc,
                         mlir::Type element, double value);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_WEFTBUILDERS_H
