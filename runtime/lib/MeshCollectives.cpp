//===- MeshCollectives.cpp - The collectives compiled code calls ----------===//
//
// A partitioned model calls
//   weft_collective_<dtype>(in, out, kind, axes_mask, dim, concat_dim)
// with unranked memref descriptors (passed as rank + descriptor pointer),
// and weft_mesh_coordinate(axis). The kind is a shard collective; the mask
// names the mesh axes of the group (bit a for axis a). Each group has a
// communicator created at start-up; here the data is arranged so that a
// collective along any tensor dim becomes one call on contiguous blocks.
//
//===----------------------------------------------------------------------===//

#include "weft/Collectives.h"
#include "weft/ShardLayout.h"
#include "weft/Trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace weft::runtime {

namespace {

World *currentWorld = nullptr;

struct StridedDescriptor {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizesAndStrides[];
};

/// A memref argument: data, shape and strides (in elements).
struct View {
  char *data;
  std::vector<int64_t> sizes, strides;

  View(int64_t rank, void *descriptor, size_t elementSize) {
    auto *d = static_cast<StridedDescriptor *>(descriptor);
    data = d->aligned + d->offset * elementSize;
    sizes.assign(d->sizesAndStrides, d->sizesAndStrides + rank);
    strides.assign(d->sizesAndStrides + rank, d->sizesAndStrides + 2 * rank);
  }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
};

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return strides;
}

/// Copies `view` into a dense row-major buffer.
std::vector<char> pack(const View &view, size_t elementSize) {
  std::vector<char> dense(view.count() * elementSize);
  std::vector<int64_t> strides = rowMajorStrides(view.sizes);
  copyStrided(view.data, view.strides.data(), dense.data(), strides.data(),
              view.sizes.data(), int(view.sizes.size()), elementSize);
  return dense;
}

/// Shape [outer, n, inner] around `dim`.
void around(const std::vector<int64_t> &sizes, int64_t dim, int64_t &outer,
            int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d)
    (d < dim ? outer : inner) *= d == dim ? 1 : sizes[d];
}

enum Kind : int64_t {
  AllReduce = 0,
  AllGather = 1,
  ReduceScatter = 2,
  AllToAll = 3,
  Send = 4, // dim: the peer on the group's axes; concat_dim: the tag
  Recv = 5,
};

[[noreturn]] void fatal(const std::string &message) {
  fprintf(stderr, "weft: rank %d: %s\n", currentWorld ? currentWorld->rank : -1,
          message.c_str());
  fflush(stderr);
  abort();
}

void collective(int64_t inRank, void *inDescriptor, void *outDescriptor,
                int64_t kind, int64_t mask, int64_t dim, int64_t concatDim,
                weft_dtype dtype) {
  if (!currentWorld)
    fatal("a collective ran before the mesh was set up");
  Communicator &group = currentWorld->group(mask);
  size_t elementSize = weft_dtype_size(dtype);
  View in(inRank, inDescriptor, elementSize);
  View out(inRank, outDescriptor, elementSize);
  if (kind == Recv) {
    // The result is a fresh dense buffer: the message lands in it.
    double start = trace::now();
    group.recv(out.data, out.count(), dtype, int(dim), int(concatDim));
    trace::record(trace::Kind::Recv, start, trace::now(), dim,
                  out.count() * elementSize);
    return;
  }
  double start = trace::now();
  // Timed until the function returns.
  struct Recorded {
    trace::Kind kind;
    int64_t label, bytes;
    double start;
    ~Recorded() { trace::record(kind, start, trace::now(), label, bytes); }
  } recorded{kind == Send ? trace::Kind::Send : trace::Kind::Collective,
             kind == Send ? dim : kind, int64_t(in.count() * elementSize),
             start};
  int64_t parts = group.size();
  std::vector<char> dense = pack(in, elementSize);
  std::vector<int64_t> outStrides = rowMajorStrides(out.sizes);
  int rank = int(in.sizes.size());
  switch (kind) {
  case Send:
    group.send(dense.data(), in.count(), dtype, int(dim), int(concatDim));
    memcpy(out.data, dense.data(), dense.size());
    return;
  case AllReduce:
    group.allReduce(dense.data(), in.count(), dtype, ReduceOp::Sum);
    memcpy(out.data, dense.data(), dense.size());
    return;
  case AllGather: {
    // Gathered blocks arrive as [parts, outer, n, inner]; the result is
    // [outer, parts * n, inner].
    std::vector<char> gathered(dense.size() * parts);
    group.allGather(dense.data(), gathered.data(), in.count(), dtype);
    int64_t outer, inner;
    around(in.sizes, dim, outer, inner);
    int64_t n = in.sizes[dim];
    int64_t sizes[4] = {parts, outer, n, inner};
    int64_t from[4] = {outer * n * inner, n * inner, inner, 1};
    int64_t to[4] = {n * inner, parts * n * inner, inner, 1};
    copyStrided(gathered.data(), from, out.data, to, sizes, 4, elementSize);
    return;
  }
  case ReduceScatter: {
    // [outer, parts * n, inner] -> blocks [parts, outer, n, inner].
    int64_t outer, inner;
    around(in.sizes, dim, outer, inner);
    int64_t n = in.sizes[dim] / parts;
    std::vector<char> blocks(dense.size());
    int64_t sizes[4] = {parts, outer, n, inner};
    int64_t from[4] = {n * inner, parts * n * inner, inner, 1};
    int64_t to[4] = {outer * n * inner, n * inner, inner, 1};
    copyStrided(dense.data(), from, blocks.data(), to, sizes, 4, elementSize);
    group.reduceScatter(blocks.data(), out.data, out.count(), dtype,
                        ReduceOp::Sum);
    return;
  }
  case AllToAll: {
    // Block p of the send buffer is this rank's input sliced at
    // [p * m, (p + 1) * m) along `dim` (the split dim); block p received
    // goes to [p * n, (p + 1) * n) along `concatDim`.
    std::vector<int64_t> pieceSizes = in.sizes;
    pieceSizes[dim] /= parts;
    int64_t pieceCount = in.count() / parts;
    std::vector<int64_t> inStrides = rowMajorStrides(in.sizes);
    std::vector<int64_t> pieceStrides = rowMajorStrides(pieceSizes);
    std::vector<char> send(dense.size()), recv(dense.size());
    for (int64_t p = 0; p < parts; ++p)
      copyStrided(dense.data() +
                      p * pieceSizes[dim] * inStrides[dim] * elementSize,
                  inStrides.data(), send.data() + p * pieceCount * elementSize,
                  pieceStrides.data(), pieceSizes.data(), rank, elementSize);
    group.allToAll(send.data(), recv.data(), pieceCount, dtype);
    for (int64_t p = 0; p < parts; ++p)
      copyStrided(recv.data() + p * pieceCount * elementSize,
                  pieceStrides.data(),
                  out.data + p * pieceSizes[concatDim] * outStrides[concatDim] *
                                 elementSize,
                  outStrides.data(), pieceSizes.data(), rank, elementSize);
    return;
  }
  }
  fatal("unknown collective kind " + std::to_string(kind));
}

} // namespace

World::World(MeshShape mesh, int rank, GroupFactory factory)
    : mesh(std::move(mesh)), rank(rank),
      coordinates(this->mesh.coordinates(rank)), factory(std::move(factory)) {}

Communicator &World::group(int64_t mask) {
  auto it = groups.find(mask);
  if (it != groups.end())
    return *it->second;
  std::vector<int> axes;
  for (int axis = 0; axis < int(mesh.sizes.size()); ++axis)
    if (mask & (int64_t(1) << axis))
      axes.push_back(axis);
  return *groups.emplace(mask, factory(axes)).first->second;
}

void World::createGroups(const std::vector<int64_t> &masks) {
  for (int64_t mask : masks)
    group(mask);
}

void setCurrentWorld(World *world) { currentWorld = world; }

} // namespace weft::runtime

using weft::runtime::collective;

extern "C" {

/// Whether the compiled code should call weft_pipeline_mark.
bool weft_tracing() { return weft::runtime::trace::enabled(); }

/// The start of a pipeline instruction (weft-pipeline-cut): kind 0 forward,
/// 1 backward, 2 optimizer.
void weft_pipeline_mark(int64_t kind, int64_t chunk, int64_t microbatch) {
  using namespace weft::runtime;
  if (!trace::enabled())
    return;
  double now = trace::now();
  trace::record(kind == 0   ? trace::Kind::Forward
                : kind == 1 ? trace::Kind::Backward
                            : trace::Kind::Optimizer,
                now, now, chunk, microbatch);
}

int64_t weft_mesh_coordinate(int64_t axis) {
  using namespace weft::runtime;
  if (!currentWorld || axis < 0 ||
      axis >= int64_t(currentWorld->coordinates.size()))
    fatal("mesh coordinate " + std::to_string(axis) + " is not available");
  return currentWorld->coordinates[axis];
}

#define WEFT_COLLECTIVE(NAME, DTYPE)                                           \
  void weft_collective_##NAME(int64_t inRank, void *in, int64_t outRank,       \
                              void *out, int64_t kind, int64_t mask,           \
                              int64_t dim, int64_t concatDim) {                \
    (void)outRank;                                                             \
    collective(inRank, in, out, kind, mask, dim, concatDim, DTYPE);            \
  }
WEFT_COLLECTIVE(f32, WEFT_F32)
WEFT_COLLECTIVE(f64, WEFT_F64)
WEFT_COLLECTIVE(f16, WEFT_F16)
WEFT_COLLECTIVE(bf16, WEFT_BF16)
WEFT_COLLECTIVE(i64, WEFT_I64)
WEFT_COLLECTIVE(i32, WEFT_I32)
WEFT_COLLECTIVE(i1, WEFT_BOOL)
#undef WEFT_COLLECTIVE

} // extern "C"
