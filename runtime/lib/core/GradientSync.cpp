//===- GradientSync.cpp - The gradients' all-reduce algorithms ------------===//
//
// weftc --grad-sync: the data-parallel all-reduces as explicit algorithms
// over a communicator's buffered sends and receives, so that each runs as
// written whatever the MPI library would have chosen, and each step of it
// waits under the watchdog. docs/spmd.md has the traffic of each.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/Collectives.h"

#include "core/Bf16.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace weft::runtime {

namespace {

/// The tag of every message of these algorithms: messages between two
/// ranks with one tag arrive in order, and every rank runs the same
/// all-reduces in the same order. (MPI guarantees tags up to 32767.)
constexpr int kGradSyncTag = 32000;
/// The tree sends its data in pieces of this many bytes, so that a level
/// forwards one piece while the next arrives.
constexpr size_t kTreeSegmentBytes = 256 * 1024;

[[noreturn]] void unsupported(weft_dtype dtype) {
  fprintf(stderr,
          "error: --grad-sync cannot sum %s data (f32, f64, bf16, i32 and "
          "i64 only)\n",
          weft_dtype_name(dtype));
  fflush(stderr);
  abortWorld();
}

/// into[i] += from[i].
template <typename T>
void addInto(void *into, const void *from, size_t count) {
  T *a = static_cast<T *>(into);
  const T *b = static_cast<const T *>(from);
  for (size_t i = 0; i < count; ++i)
    a[i] += b[i];
}

void addInto(void *into, const void *from, size_t count, weft_dtype dtype) {
  switch (dtype) {
  case WEFT_F32:
    return addInto<float>(into, from, count);
  case WEFT_F64:
    return addInto<double>(into, from, count);
  case WEFT_I32:
    return addInto<int32_t>(into, from, count);
  case WEFT_I64:
    return addInto<int64_t>(into, from, count);
  case WEFT_BF16: {
    uint16_t *a = static_cast<uint16_t *>(into);
    const uint16_t *b = static_cast<const uint16_t *>(from);
    for (size_t i = 0; i < count; ++i)
      a[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
    return;
  }
  default:
    unsupported(dtype);
  }
}

/// `count` elements cut into `parts` pieces, as even as they come: piece i
/// is [begin(i), begin(i + 1)).
struct Pieces {
  size_t count, parts;
  size_t begin(size_t i) const {
    return count / parts * i + std::min(i, count % parts);
  }
  size_t size(size_t i) const { return begin(i + 1) - begin(i); }
};

class Algorithms {
public:
  /// `buffer` receives the pieces to add: kept by the caller, so that a
  /// bucket's worth is not allocated on every all-reduce.
  Algorithms(Communicator &group, char *data, size_t count, weft_dtype dtype,
             std::vector<char> &buffer)
      : group(group), data(data), count(count), dtype(dtype),
        elementSize(weft_dtype_size(dtype)), buffer(buffer) {}

  /// Ring reduce-scatter over `group`: afterwards this rank holds the sum
  /// of piece (rank + 1) mod n, which it returns.
  size_t ringReduceScatter(Communicator &ring, const Pieces &pieces) {
    int n = ring.size(), r = ring.rank();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    for (int s = 0; s + 1 < n; ++s) {
      size_t out = size_t(r - s + n) % n, in = size_t(r - s - 1 + 2 * n) % n;
      ring.send(at(pieces.begin(out)), pieces.size(out), dtype, right,
                kGradSyncTag);
      ring.recv(scratch(pieces.size(in)), pieces.size(in), dtype, left,
                kGradSyncTag);
      addInto(at(pieces.begin(in)), buffer.data(), pieces.size(in), dtype);
    }
    return size_t(r + 1) % n;
  }

  /// The matching ring all-gather: each rank starts with the summed piece
  /// ringReduceScatter left it.
  void ringAllGather(Communicator &ring, const Pieces &pieces) {
    int n = ring.size(), r = ring.rank();
    int right = (r + 1) % n, left = (r + n - 1) % n;
    for (int s = 0; s + 1 < n; ++s) {
      size_t out = size_t(r + 1 - s + n) % n, in = size_t(r - s + n) % n;
      ring.send(at(pieces.begin(out)), pieces.size(out), dtype, right,
                kGradSyncTag);
      ring.recv(at(pieces.begin(in)), pieces.size(in), dtype, left,
                kGradSyncTag);
    }
  }

  void ring() {
    Pieces pieces{count, size_t(group.size())};
    ringReduceScatter(group, pieces);
    ringAllGather(group, pieces);
  }

  /// A binary tree in heap order (rank r's children are 2r+1 and 2r+2):
  /// each piece is summed up to rank 0, then sent back down.
  void tree() {
    int n = group.size(), r = group.rank();
    int parent = (r - 1) / 2;
    std::vector<int> children;
    for (int child : {2 * r + 1, 2 * r + 2})
      if (child < n)
        children.push_back(child);
    size_t segment = std::max<size_t>(1, kTreeSegmentBytes / elementSize);
    for (size_t begin = 0; begin < count; begin += segment) {
      size_t length = std::min(segment, count - begin);
      for (int child : children) {
        group.recv(scratch(length), length, dtype, child, kGradSyncTag);
        addInto(at(begin), buffer.data(), length, dtype);
      }
      if (r != 0)
        group.send(at(begin), length, dtype, parent, kGradSyncTag);
    }
    for (size_t begin = 0; begin < count; begin += segment) {
      size_t length = std::min(segment, count - begin);
      if (r != 0)
        group.recv(at(begin), length, dtype, parent, kGradSyncTag);
      for (int child : children)
        group.send(at(begin), length, dtype, child, kGradSyncTag);
    }
  }

  /// Rank r serves piece r: every rank pushes each piece to its owner,
  /// which adds them in rank order and sends the sum to every rank.
  void parameterServer() {
    int n = group.size(), r = group.rank();
    Pieces pieces{count, size_t(n)};
    for (int owner = 0; owner < n; ++owner)
      if (owner != r)
        group.send(at(pieces.begin(owner)), pieces.size(owner), dtype, owner,
                   kGradSyncTag);
    size_t mine = pieces.size(r);
    std::vector<char> sum(mine * elementSize);
    bool first = true;
    for (int peer = 0; peer < n; ++peer) {
      const char *part = at(pieces.begin(r));
      if (peer != r) {
        group.recv(scratch(mine), mine, dtype, peer, kGradSyncTag);
        part = buffer.data();
      }
      if (first)
        std::copy(part, part + mine * elementSize, sum.begin());
      else
        addInto(sum.data(), part, mine, dtype);
      first = false;
    }
    std::copy(sum.begin(), sum.end(), at(pieces.begin(r)));
    for (int peer = 0; peer < n; ++peer)
      if (peer != r)
        group.send(at(pieces.begin(r)), mine, dtype, peer, kGradSyncTag);
    for (int owner = 0; owner < n; ++owner)
      if (owner != r)
        group.recv(at(pieces.begin(owner)), pieces.size(owner), dtype, owner,
                   kGradSyncTag);
  }

  /// Reduce-scatter inside the node, all-reduce this rank's piece with the
  /// ranks of the same place on the other nodes, all-gather inside the
  /// node.
  void hierarchical(Communicator &node, Communicator &across) {
    Pieces pieces{count, size_t(node.size())};
    size_t piece = ringReduceScatter(node, pieces);
    Algorithms(across, at(pieces.begin(piece)), pieces.size(piece), dtype,
               buffer)
        .ring();
    ringAllGather(node, pieces);
  }

private:
  char *at(size_t element) { return data + element * elementSize; }
  char *scratch(size_t elements) {
    buffer.resize(elements * elementSize);
    return buffer.data();
  }

  Communicator &group;
  char *data;
  size_t count;
  weft_dtype dtype;
  size_t elementSize;
  std::vector<char> &buffer;
};

} // namespace

/// A group's node and cross-node communicators, made once.
struct GradientSync::Hierarchy {
  std::unique_ptr<Communicator> node, across;
};

GradientSync::GradientSync() = default;
GradientSync::~GradientSync() = default;

void GradientSync::choose(GradSync chosen, int64_t chosenAxes) {
  algorithm = chosen;
  axes = chosenAxes;
  hierarchies.clear();
}

GradientSync::Hierarchy &GradientSync::hierarchyOf(Communicator &group) {
  std::unique_ptr<Hierarchy> &known = hierarchies[&group];
  if (known)
    return *known;
  int ranksPerNode = 0;
  if (const char *value = std::getenv("WEFT_RANKS_PER_NODE"))
    ranksPerNode = std::atoi(value);
  auto hierarchy = std::make_unique<Hierarchy>();
  hierarchy->node = group.splitByNode(ranksPerNode);
  // Every node must hold as many of the group's ranks: the pieces of the
  // reduce-scatter inside a node are all-reduced across the nodes.
  int64_t sizes[2] = {hierarchy->node->size(), -hierarchy->node->size()};
  group.allReduce(sizes, 2, WEFT_I64, ReduceOp::Max);
  if (sizes[0] != -sizes[1]) {
    fprintf(stderr,
            "error: rank %d: --grad-sync hierarchical needs as many ranks of "
            "the group on every node, and its nodes hold %lld to %lld "
            "(WEFT_RANKS_PER_NODE sets a node's ranks)\n",
            group.rank(), (long long)-sizes[1], (long long)sizes[0]);
    fflush(stderr);
    abortWorld();
  }
  hierarchy->across = group.split(hierarchy->node->rank(), group.rank());
  known = std::move(hierarchy);
  return *known;
}

void GradientSync::allReduce(Communicator &group, void *data, size_t count,
                             weft_dtype dtype) {
  if (group.size() == 1)
    return;
  Algorithms algorithms(group, static_cast<char *>(data), count, dtype,
                        received);
  switch (algorithm) {
  case GradSync::Library:
    group.allReduce(data, count, dtype, ReduceOp::Sum);
    return;
  case GradSync::Ring:
    return algorithms.ring();
  case GradSync::Tree:
    return algorithms.tree();
  case GradSync::ParameterServer:
    return algorithms.parameterServer();
  case GradSync::Hierarchical: {
    Hierarchy &hierarchy = hierarchyOf(group);
    return algorithms.hierarchical(*hierarchy.node, *hierarchy.across);
  }
  }
}

} // namespace weft::runtime
