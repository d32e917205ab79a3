//===- Passes.h - Target-independent lowering passes ------------*- C++ -*-===//

#ifndef WEFT_LOWERING_PASSES_H
#define WEFT_LOWERING_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

#include "weft/runtime/Contract.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Lowering/Passes.h.inc"

} // namespace weft

#endif // WEFT_LOWERING_PASSES_H
