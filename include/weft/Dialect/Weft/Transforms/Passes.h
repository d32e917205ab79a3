//===- Passes.h - Weft transformation passes --------------------*- C++ -*-===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_H
#define WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"

/// Adds canonicalization and every exporter-idiom fusion to `pm`.
void buildFuseIdiomsPipeline(mlir::OpPassManager &pm);

/// Registers the named pipelines (`weft-fuse-idioms`).
void registerWeftPipelines();

} // namespace weft

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_H
