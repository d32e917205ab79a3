//===- Sharding.h - Meshes, shardings and per-op sharding rules -*- C++ -*-===//
//
// The SPMD vocabulary is upstream's `shard` dialect: a `shard.grid` is the
// device mesh, `shard.sharding`/`shard.shard` annotate values, and the
// partitioner emits `shard.all_reduce`, `shard.all_gather`, ... . This header
// holds what Weft adds on top: named mesh axes, shardings with a pending-sum
// (partial) state and interleaved (blocked) dims, and factor-based sharding
// rules for every weft op, shared by propagation and partitioning.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_SHARDING_H
#define WEFT_DIALECT_WEFT_TRANSFORMS_SHARDING_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>
#include <string>

namespace weft {

using MeshAxis = mlir::shard::GridAxis;

/// The device mesh: a `shard.grid` whose axes carry names
/// (`weft.axis_names`), e.g. `dp=2,tp=2`.
struct Mesh {
  std::string symbol;
  llvm::SmallVector<std::string> names;
  llvm::SmallVector<int64_t> sizes;

  int64_t size(llvm::ArrayRef<MeshAxis> axes) const;
  std::optional<MeshAxis> axisNamed(llvm::StringRef name) const;
  /// "tp" or "dp,tp".
  std::string describe(llvm::ArrayRef<MeshAxis> axes) const;

  /// Parses `dp=2,tp=2`; on failure returns std::nullopt and sets `error`.
  static std::optional<Mesh> parse(llvm::StringRef text, std::string &error);
  /// The module's mesh, if it has one.
  static std::optional<Mesh> find(mlir::ModuleOp module);
  /// Creates the `shard.grid` op for this mesh at the start of `module`.
  void materialize(mlir::ModuleOp module) const;
};

/// How one tensor dim is split. The dim is viewed as [blocks, size/blocks]
/// and the inner part is split over `axes` (major to minor), so a rank holds
/// `blocks` interleaved pieces. blocks > 1 describes a fused projection
/// (Q, K and V in one weight) whose parts are each split over the mesh.
struct DimSharding {
  llvm::SmallVector<MeshAxis, 2> axes;
  int64_t blocks = 1;

  bool isSplit() const { return !axes.empty(); }
  bool operator==(const DimSharding &other) const {
    return axes == other.axes && (axes.empty() || blocks == other.blocks);
  }
  bool operator!=(const DimSharding &other) const { return !(*this == other); }
};

/// The sharding of a tensor: a DimSharding per dim, and the axes over which
/// each rank holds a partial sum still to be reduced.
struct TensorSharding {
  llvm::SmallVector<DimSharding> dims;
  llvm::SmallVector<MeshAxis> partial;

  static TensorSharding replicated(int64_t rank) {
    TensorSharding sharding;
    sharding.dims.resize(rank);
    return sharding;
  }
  bool isReplicated() const;
  bool usesAxis(MeshAxis axis) const;
  bool operator==(const TensorSharding &other) const {
    return dims == other.dims && partial == other.partial;
  }
  bool operator!=(const TensorSharding &other) const {
    return !(*this == other);
  }
  /// "[dp], [], [tp]" with " partial(tp)" when partial.
  std::string describe(const Mesh &mesh) const;
  /// Reads what describe() writes (without the partial part).
  static std::optional<TensorSharding> parse(llvm::StringRef text,
                                             const Mesh &mesh);
  /// The runtime's spec: "-,1x3" (see
  /// runtime/include/weft/runtime/ShardLayout.h).
  std::string runtimeSpec() const;
  /// The per-rank shape of a tensor of `shape` (an uneven split rounds up).
  llvm::SmallVector<int64_t> localShape(llvm::ArrayRef<int64_t> shape,
                                        const Mesh &mesh) const;
};

/// A `shard.shard` annotation as read: the value under it (through chained
/// annotations, a preset's on a user's), its sharding, its priority (0 is a
/// user's, the strongest) and the dims it pins whole.
struct Annotation {
  mlir::shard::ShardOp op;
  mlir::Value value;
  TensorSharding sharding;
  int64_t priority = 0;
  llvm::SmallVector<int64_t> pinnedDims;
};

/// Reads every annotation of `function`. Fails, with an error at the
/// annotation, when its sharding is not a `shard.sharding` on `mesh` or
/// names an axis the mesh lacks.
mlir::FailureOr<llvm::SmallVector<Annotation>>
readAnnotations(mlir::Operation *function, const Mesh &mesh);
/// Removes `annotations` from the IR (their users read the annotated value
/// instead) and the `shard.sharding` ops they leave unused.
void dropAnnotations(llvm::ArrayRef<Annotation> annotations);

/// Reads a `shard.sharding` op (with Weft's `weft.blocks` extension).
TensorSharding readSharding(mlir::shard::ShardingOp op, int64_t rank);
/// Creates a `shard.sharding` op for `sharding` (partial state is not part
/// of an annotation).
mlir::shard::ShardingOp createShardingOp(mlir::OpBuilder &builder,
                                         mlir::Location loc,
                                         const TensorSharding &sharding,
                                         const Mesh &mesh);

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

  int64_t addFactor(FactorKind kind) {
    kinds.push_back(kind);
    return kinds.size() - 1;
  }
};

/// Names a tensor for diagnostics: "parameter 'h.0.attn.c_attn.weight'",
/// "input 'input_ids'", or "result 0 of 'weft.reshape'".
std::string describeTensor(mlir::Value value);

/// The sharding rule of `op`, or std::nullopt for an op Weft cannot
/// partition (its operands and results stay replicated).
std::optional<OpShardingRule> getShardingRule(mlir::Operation *op);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_SHARDING_H
