//===- Sharding.h - Meshes, shardings and annotations ----------*- C++ -*-===//
//
// The SPMD vocabulary is upstream's `shard` dialect: a `shard.grid` is the
// device mesh, `shard.sharding`/`shard.shard` annotate values, and the
// partitioner emits `shard.all_reduce`, `shard.all_gather`, ... . This header
// holds what Weft adds on top: named mesh axes, shardings with a pending-sum
// (partial) state and interleaved (blocked) dims. Each weft op states its
// factor-based sharding rule itself (ShardingRuleOpInterface,
// Dialect/Weft/IR/ShardingRules.cpp); propagation and partitioning read it
// through getShardingRule.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_SHARDING_H
#define WEFT_DIALECT_WEFT_TRANSFORMS_SHARDING_H

#include "weft/Dialect/Weft/IR/ShardingRule.h"

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
  /// The context-parallel axis, if any, whether attention runs over it as a
  /// ring (else as an all-to-all over heads) and whether the ring's sequence
  /// is laid out in head/tail chunk pairs (runtime::zigzagChunk) rather than
  /// one contiguous chunk per rank.
  std::optional<MeshAxis> contextAxis;
  bool contextRing = false;
  bool contextZigzag = false;

  int64_t size(llvm::ArrayRef<MeshAxis> axes) const;
  /// Whether a dim split over `axes` is laid out in head/tail pairs.
  bool isZigzag(llvm::ArrayRef<MeshAxis> axes) const {
    return contextZigzag && contextAxis &&
           llvm::is_contained(axes, *contextAxis);
  }
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
  /// The runtime's spec: "-,1x3" or "-,1z" (see
  /// runtime/include/weft/runtime/ShardLayout.h).
  std::string runtimeSpec(const Mesh &mesh) const;
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

/// Names a tensor for diagnostics: "parameter 'h.0.attn.c_attn.weight'",
/// "input 'input_ids'", or "result 0 of 'weft.reshape'".
std::string describeTensor(mlir::Value value);

/// The sharding rule of `op`, or std::nullopt for an op that states none
/// (not a weft op): its operands and results stay replicated.
std::optional<OpShardingRule> getShardingRule(mlir::Operation *op);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_SHARDING_H
