//===- ShardingRule.h - Factor-based sharding rules of ops ------*- C++ -*-===//
//
// What an op's ShardingRuleOpInterface returns. Kept apart from the mesh
// and sharding types (Transforms/Sharding.h) so that the ops can state
// their rules without depending on the partitioner.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_SHARDINGRULE_H
#define WEFT_DIALECT_WEFT_IR_SHARDINGRULE_H

#include "llvm/ADT/SmallVector.h"
#include <cstdint>

namespace weft {

/// What may happen to a factor (a loop dimension of an op) on the mesh.
enum class FactorKind {
  /// Splitting it splits every tensor it appears in.
  Parallel,
  /// It appears in operands only; splitting it leaves each rank with a
  /// partial sum of the result.
  Reduction,
  /// It must stay whole on every rank (a softmax axis, normalized dims, a
  /// sliced dim...).
  Whole,
  /// Attention's sequence: whole, except over the mesh's context-parallel
  /// axis, where the partitioner runs the op as a ring or an all-to-all.
  Context,
};

/// Shardy-style sharding rule: each tensor dim of an op maps to a factor
/// (or to none, for a broadcast dim of size 1). Tensors that share a
/// factor must split it the same way.
struct OpShardingRule {
  llvm::SmallVector<FactorKind> kinds;
  /// [operand][dim] and [result][dim] -> factor, or -1.
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandFactors;
  llvm::SmallVector<llvm::SmallVector<int64_t>> resultFactors;
  /// [operand][dim] -> how many interleaved blocks the factor is in that
  /// dim (a split's operand holds its equal parts as blocks).
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandBlocks;
  /// The same for the results (a concat of equal parts makes blocks).
  llvm::SmallVector<llvm::SmallVector<int64_t>> resultBlocks;

  /// For an op with a Context factor: the factor (its heads) that the
  /// all-to-all form splits over the context axis instead.
  int64_t headFactor = -1;
  int64_t addFactor(FactorKind kind) {
    kinds.push_back(kind);
    return kinds.size() - 1;
  }
};

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_SHARDINGRULE_H
