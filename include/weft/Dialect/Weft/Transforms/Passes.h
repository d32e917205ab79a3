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

/// Partitioning for a device mesh: the presets' shardings, propagated,
/// the program partitioned, its collectives bucketed.
struct SPMDPipelineOptions
    : public mlir::PassPipelineOptions<SPMDPipelineOptions> {
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("Mesh axes, e.g. 'dp=2,tp=2'")};
  ListOption<std::string> parallel{
      *this, "parallel", llvm::cl::desc("Strategies: dp, megatron, cp, ep")};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Split norm regions on the sequence dim over tp"),
      llvm::cl::init(false)};
  Option<int64_t> zero{*this, "zero", llvm::cl::desc("ZeRO stage over dp"),
                       llvm::cl::init(0)};
  Option<std::string> contextAttention{
      *this, "context-attention",
      llvm::cl::desc(
          "How attention runs over cp: ring, ring-contiguous or all-to-all"),
      llvm::cl::init("ring")};
  Option<bool> padUneven{
      *this, "pad-uneven",
      llvm::cl::desc("Pad a dim that does not divide by its mesh axis"),
      llvm::cl::init(false)};
  Option<bool> localReplicas{
      *this, "local-replicas",
      llvm::cl::desc("The dp replicas step alone (weft-local-replicas)"),
      llvm::cl::init(false)};
  Option<double> bucketMb{
      *this, "bucket-mb",
      llvm::cl::desc("Bucket collectives up to this many MiB (0: not here; "
                     "a pipeline buckets each rank's program after the cut)"),
      llvm::cl::init(25.0)};
};

/// Adds partitioning for `options.mesh` to `pm`.
void buildSPMDPipeline(mlir::OpPassManager &pm,
                       const SPMDPipelineOptions &options);

/// Registers the named pipelines (`weft-fuse-idioms`, `weft-spmd`).
void registerWeftPipelines();

} // namespace weft

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_H
