//===- Flops.h - The FLOPs of weft contractions -----------------*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_FLOPS_H
#define WEFT_DIALECT_WEFT_IR_FLOPS_H

#include "mlir/IR/Operation.h"

#include <cstdint>

namespace weft {

/// Twice the multiply-adds of a contraction (linear, matmul, both products
/// of attention, causal or not), else 0: the FLOPs MFU and the pipeline
/// cost model count (elementwise work is left out, as is customary).
int64_t contractionFlops(mlir::Operation *op);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_FLOPS_H
