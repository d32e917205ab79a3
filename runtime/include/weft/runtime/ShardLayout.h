//===- ShardLayout.h - Which part of a tensor a rank holds ------*- C++ -*-===//
//
// The mesh and the shardings of a partitioned model, as the manifest writes
// them, and the copies between a global tensor and one rank's shard. weftc
// uses them to lay out the weights file (one block per distinct shard), the
// runtime to slice inputs, find its weights and assemble outputs.
//
// A sharding spec has one token per dim, comma-separated: "-" for a whole
// dim, else the mesh axes that split it, major first, joined by '.', and an
// optional "xB" when the dim holds B interleaved blocks (a fused QKV
// weight): "-,1x3" splits dim 1 over mesh axis 1, part by part. A "z"
// suffix lays a dim split over one axis out in head/tail pairs (context
// parallelism's load-balanced sequence, see zigzagChunk): "-,1z,-".
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_SHARDLAYOUT_H
#define WEFT_RUNTIME_SHARDLAYOUT_H

#include "weft/runtime/CApi.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::runtime {

struct MeshShape {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;

  int64_t numRanks() const;
  /// Row-major coordinates of `rank` (the last axis varies fastest).
  std::vector<int64_t> coordinates(int64_t rank) const;
  /// "dp=2,tp=2".
  std::string describe() const;
  /// Parses describe()'s form ("" for no mesh; spaces around an item are
  /// allowed): NAME=SIZE items, SIZE >= 1, each name once. False when
  /// malformed, with why in `error` (when given). The one parser of mesh
  /// text: the compiler's (weft::Mesh::parse) and the runtime's.
  static bool parse(const std::string &text, MeshShape &mesh,
                    std::string *error = nullptr);
};

struct DimSplit {
  std::vector<int> axes;
  int64_t blocks = 1;
  bool zigzag = false;
};

/// Context parallelism balances a causal mask's work by cutting the sequence
/// into 2n chunks for n ranks and giving the rank at position r chunks r and
/// 2n-1-r (an early and a late one): its `half`-th chunk (0 or 1). The
/// compiler's reshards and the runtime's slicing both place chunks by it.
inline int64_t zigzagChunk(int64_t position, int64_t half, int64_t parts) {
  return half == 0 ? position : 2 * parts - 1 - position;
}

struct ShardSpec {
  std::vector<DimSplit> dims;

  /// Parses a spec for a tensor of `rank` dims; false on a malformed spec.
  static bool parse(const std::string &text, size_t rank, ShardSpec &spec);
  /// Whether every axis it names is an axis of `mesh`, each at most once.
  bool fits(const MeshShape &mesh) const;
  std::string str() const;
  /// For people: the mesh axis names splitting each dim ("tp, -"; "dp+tp"
  /// for two axes, "tp (3 blocks)" for a packed dim), or "replicated".
  std::string describe(const MeshShape &mesh) const;
  bool isReplicated() const;

  std::vector<int64_t> localShape(const std::vector<int64_t> &global,
                                  const MeshShape &mesh) const;
  /// How many distinct shards there are (the product of the split axes).
  int64_t numShards(const MeshShape &mesh) const;
  /// Which shard a rank at `coordinates` holds.
  int64_t shardIndex(const std::vector<int64_t> &coordinates,
                     const MeshShape &mesh) const;
  /// Copies shard `shard` of the global tensor into `local` (extract) or
  /// back into its place in the global tensor (insert).
  void extract(const void *global, void *local,
               const std::vector<int64_t> &globalShape, size_t elementSize,
               int64_t shard, const MeshShape &mesh) const;
  void insert(const void *local, void *global,
              const std::vector<int64_t> &globalShape, size_t elementSize,
              int64_t shard, const MeshShape &mesh) const;

private:
  void copy(const void *global, void *local,
            const std::vector<int64_t> &globalShape, size_t elementSize,
            int64_t shard, const MeshShape &mesh, bool toLocal) const;
};

/// The sharding of a model buffer, as its manifest entry says ("" is a
/// scalar's).
ShardSpec bufferSpec(const weft_buffer_info *info);

/// Copies an N-d box between two strided arrays (strides in elements).
void copyStrided(const char *source, const int64_t *sourceStrides, char *dest,
                 const int64_t *destStrides, const int64_t *sizes, int rank,
                 size_t elementSize);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_SHARDLAYOUT_H
