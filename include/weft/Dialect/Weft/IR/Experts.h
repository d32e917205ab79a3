//===- Experts.h - Which parameters are a mixture's experts -----*- C++ -*-===//
//
// A mixture of experts stacks its experts' weights ([experts, in, out]) and
// runs them as one batched matmul over the dispatched tokens. Expert
// parallelism splits those weights, and the planner prices them apart: both
// recognise them here.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_EXPERTS_H
#define WEFT_DIALECT_WEFT_IR_EXPERTS_H

#include "mlir/IR/Value.h"

namespace weft {

/// Whether `parameter` is stacked expert weights: 3-D [experts, ...] and
/// read by a weft.matmul, directly or through views.
bool isStackedExpertWeight(mlir::Value parameter);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_EXPERTS_H
