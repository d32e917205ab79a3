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

/// Whether `value` is a ranked tensor of floats: the values autodiff
/// carries adjoints for.
inline bool isFloatTensor(mlir::Value value) {
  auto type = llvm::dyn_cast<mlir::RankedTensorType>(value.getType());
  return type && llvm::isa<mlir::FloatType>(type.getElementType());
}

/// A `weft.constant` of `type` with every element `value` (converted to the
/// element type, float or integer).
mlir::Value createSplat(mlir::OpBuilder &builder, mlir::Location loc,
                        mlir::RankedTensorType type, double value);

/// A rank-0 `weft.constant` of `element` type.
mlir::Value createScalar(mlir::OpBuilder &builder, mlir::Location loc,
                         mlir::Type element, double value);

class AttentionGradOp;

/// Gives `grad` (without one) the log-sum-exp its forward saves: of the
/// weft.attention that computed its `out` from the same operands, made to
/// save it, or else of a new saving one beside `grad` (which recomputes the
/// forward: that one is in another function).
void readForwardLogSumExp(AttentionGradOp grad);

/// Why the fused attention kernels (weft/runtime/Contract.h) do not take
/// `attention`, a weft.attention or weft.attention_grad (with `backward`,
/// the forward's gradient too), or nullptr when they do.
const char *fusedAttentionRefusal(mlir::Operation *attention, bool backward);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_WEFTBUILDERS_H
