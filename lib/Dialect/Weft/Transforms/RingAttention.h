//===- RingAttention.h - Attention with its sequence split over a ring ---===//
//
// The local form of `weft.attention` and `weft.attention_grad` when the
// partitioner splits their sequence over the context-parallel axis in ring
// mode (weft-partition).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_DIALECT_WEFT_TRANSFORMS_RINGATTENTION_H
#define WEFT_LIB_DIALECT_WEFT_TRANSFORMS_RINGATTENTION_H

#include "weft/Dialect/Weft/Transforms/Sharding.h"

#include "mlir/IR/Builders.h"

namespace weft {

/// The ring: the context axis of `mesh`. Its rank at position r holds
/// chunks r and 2n-1-r of 2n (zigzag, runtime::zigzagChunk) or chunk r of
/// n.
struct Ring {
  const Mesh &mesh;
  MeshAxis axis;
  bool zigzag;
};

/// `attention(q, k, v)` for this rank's query chunk: the key/value chunks
/// travel around the ring (shard.shift) and each block is folded into the
/// running row maximum, sum and output (online softmax). `q`, `k`, `v` are
/// the local chunks.
mlir::Value buildRingAttention(mlir::OpBuilder &builder, mlir::Location loc,
                               const Ring &ring, mlir::Value q, mlir::Value k,
                               mlir::Value v, bool causal, double scale);

/// The gradients of that attention for this rank's chunks: one ring of the
/// keys rebuilds each query row's log-sum-exp, a second carries the keys,
/// the values and their gradient accumulators, which arrive home after a
/// full turn.
llvm::SmallVector<mlir::Value, 3>
buildRingAttentionGrad(mlir::OpBuilder &builder, mlir::Location loc,
                       const Ring &ring, mlir::Value q, mlir::Value k,
                       mlir::Value v, mlir::Value out, mlir::Value outGrad,
                       bool causal, double scale);

} // namespace weft

#endif // WEFT_LIB_DIALECT_WEFT_TRANSFORMS_RINGATTENTION_H
