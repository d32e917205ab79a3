//===- WeftDialect.h - Weft dialect -----------------------------*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H
#define WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H

#include "mlir/IR/Dialect.h"

#include "weft/Dialect/Weft/IR/WeftOpsDialect.h.inc"

#endif // WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H
