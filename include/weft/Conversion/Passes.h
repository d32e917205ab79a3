//===- Passes.h - Weft conversion passes ------------------------*- C++ -*-===//

#ifndef WEFT_CONVERSION_PASSES_H
#define WEFT_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Conversion/Passes.h.inc"

/// Registers how the shard collectives bufferize: into calls of the Weft
/// runtime (see convert-shard-to-weft-runtime).
void registerShardBufferizationModels(mlir::DialectRegistry &registry);

/// Registers how the weft ops that survive convert-weft-to-linalg bufferize
/// (weft.scatter_add: atomic adds into a zeroed table).
void registerWeftBufferizationModels(mlir::DialectRegistry &registry);

} // namespace weft

#endif // WEFT_CONVERSION_PASSES_H
