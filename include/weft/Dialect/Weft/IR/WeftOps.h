//===- WeftOps.h - Weft ops -------------------------------------*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTOPS_H
#define WEFT_DIALECT_WEFT_IR_WEFTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftInterfaces.h"

namespace weft {

/// Infers the numpy-broadcast shape of `operands` with `elementType`; on
/// failure emits an error at `loc` naming `opName` and the clashing dims.
llvm::LogicalResult
inferBroadcastResult(std::optional<mlir::Location> loc, llvm::StringRef opName,
                     mlir::ValueRange operands, mlir::Type elementType,
                     llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Infers the result of reducing `input` over `axes`.
llvm::LogicalResult
inferReductionResult(std::optional<mlir::Location> loc, llvm::StringRef opName,
                     mlir::Type input, llvm::ArrayRef<int64_t> axes,
                     bool keepdims, llvm::SmallVectorImpl<mlir::Type> &inferred);

/// The numpy broadcast of two shapes, or failure if they clash. A dynamic
/// dim broadcast with a static dim > 1 takes that dim.
llvm::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

} // namespace weft

#define GET_OP_CLASSES
#include "weft/Dialect/Weft/IR/WeftOps.h.inc"

#endif // WEFT_DIALECT_WEFT_IR_WEFTOPS_H
