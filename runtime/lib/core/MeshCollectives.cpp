//===- MeshCollectives.cpp - The collectives compiled code calls ----------===//
//
// A partitioned model calls the functions of weft/runtime/Contract.h:
//   weft_collective_<dtype>(in, out, kind, axes_mask, dim, concat_dim)
//   weft_send_<dtype>(in, out, axes_mask, peer, tag)
//   weft_recv_<dtype>(in, out, axes_mask, peer, tag)
// with unranked memref descriptors (passed as rank + descriptor pointer),
// and weft_mesh_coordinate(axis). The mask names the mesh axes of the group
// (bit a for axis a). Each group has a communicator created at start-up;
// here the data is arranged so that a collective along any tensor dim
// becomes one call on contiguous blocks.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/Collectives.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/ShardLayout.h"
#include "weft/runtime/Trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace weft::runtime {

namespace {

World *currentWorld = nullptr;
double collectiveTimeoutSeconds = kDefaultCollectiveTimeout;
int64_t runningStep = -1;

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

/// Buffers a collective arranges its data in, kept from call to call: a
/// step's collectives reuse the last step's pages instead of faulting in
/// and zeroing fresh ones (megabytes for a gradient bucket).
class Scratch {
public:
  char *get(size_t bytes) {
    if (bytes > capacity) {
      storage.reset(new char[bytes]);
      capacity = bytes;
    }
    return storage.get();
  }

private:
  std::unique_ptr<char[]> storage;
  size_t capacity = 0;
};
thread_local Scratch scratch[3];

/// `view`'s data dense and row-major: the view itself when it is, else
/// copied into `into`.
const char *dense(const View &view, size_t elementSize, Scratch &into) {
  std::vector<int64_t> strides = rowMajorStrides(view.sizes);
  bool contiguous = true;
  for (size_t d = 0; d < view.sizes.size(); ++d)
    contiguous &= view.sizes[d] == 1 || view.strides[d] == strides[d];
  if (contiguous)
    return view.data;
  char *copy = into.get(view.count() * elementSize);
  copyStrided(view.data, view.strides.data(), copy, strides.data(),
              view.sizes.data(), int(view.sizes.size()), elementSize);
  return copy;
}

/// Shape [outer, n, inner] around `dim`.
void around(const std::vector<int64_t> &sizes, int64_t dim, int64_t &outer,
            int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d)
    (d < dim ? outer : inner) *= d == dim ? 1 : sizes[d];
}

[[noreturn]] void fatal(const std::string &message) {
  fprintf(stderr, "weft: rank %d: %s\n", currentWorld ? currentWorld->rank : -1,
          message.c_str());
  fflush(stderr);
  abort();
}

Communicator &groupOf(int64_t mask) {
  if (!currentWorld)
    fatal("a collective ran before the mesh was set up");
  return currentWorld->group(mask);
}

/// Sends `in` to `peer` along the group's axes; the op's result is `in`.
void send(int64_t inRank, void *inDescriptor, void *outDescriptor, int64_t mask,
          int64_t peer, int64_t tag, weft_dtype dtype) {
  Communicator &group = groupOf(mask);
  size_t elementSize = weft_dtype_size(dtype);
  View in(inRank, inDescriptor, elementSize);
  View out(inRank, outDescriptor, elementSize);
  double start = trace::now();
  const char *packed = dense(in, elementSize, scratch[0]);
  group.send(packed, in.count(), dtype, int(peer), int(tag));
  if (out.data != packed)
    memcpy(out.data, packed, in.count() * elementSize);
  trace::record(trace::Kind::Send, start, trace::now(), peer,
                in.count() * elementSize);
}

/// Receives from `peer` into the op's result, a fresh dense buffer.
void recv(int64_t outRank, void *outDescriptor, int64_t mask, int64_t peer,
          int64_t tag, weft_dtype dtype) {
  Communicator &group = groupOf(mask);
  size_t elementSize = weft_dtype_size(dtype);
  View out(outRank, outDescriptor, elementSize);
  double start = trace::now();
  group.recv(out.data, out.count(), dtype, int(peer), int(tag));
  trace::record(trace::Kind::Recv, start, trace::now(), peer,
                out.count() * elementSize);
}

void collective(int64_t inRank, void *inDescriptor, void *outDescriptor,
                int64_t kindValue, int64_t mask, int64_t dim, int64_t concatDim,
                weft_dtype dtype) {
  Communicator &group = groupOf(mask);
  size_t elementSize = weft_dtype_size(dtype);
  View in(inRank, inDescriptor, elementSize);
  View out(inRank, outDescriptor, elementSize);
  // Timed until the function returns.
  struct Recorded {
    int64_t label, bytes;
    double start;
    ~Recorded() {
      trace::record(trace::Kind::Collective, start, trace::now(), label, bytes);
    }
  } recorded{kindValue, int64_t(in.count() * elementSize), trace::now()};
  int64_t parts = group.size();
  const size_t bytes = in.count() * elementSize;
  const char *packed = dense(in, elementSize, scratch[0]);
  std::vector<int64_t> outStrides = rowMajorStrides(out.sizes);
  int rank = int(in.sizes.size());
  switch (CollectiveKind(kindValue)) {
  case CollectiveKind::AllReduce:
    // In place in the (dense) result.
    if (out.data != packed)
      memcpy(out.data, packed, bytes);
    if (currentWorld->gradientSync.appliesTo(mask))
      currentWorld->gradientSync.allReduce(group, out.data, in.count(), dtype);
    else
      group.allReduce(out.data, in.count(), dtype, ReduceOp::Sum);
    return;
  case CollectiveKind::AllGather: {
    // Gathered blocks arrive as [parts, outer, n, inner]; the result is
    // [outer, parts * n, inner].
    char *gathered = scratch[1].get(bytes * parts);
    group.allGather(packed, gathered, in.count(), dtype);
    int64_t outer, inner;
    around(in.sizes, dim, outer, inner);
    int64_t n = in.sizes[dim];
    int64_t sizes[4] = {parts, outer, n, inner};
    int64_t from[4] = {outer * n * inner, n * inner, inner, 1};
    int64_t to[4] = {n * inner, parts * n * inner, inner, 1};
    copyStrided(gathered, from, out.data, to, sizes, 4, elementSize);
    return;
  }
  case CollectiveKind::ReduceScatter: {
    // [outer, parts * n, inner] -> blocks [parts, outer, n, inner].
    int64_t outer, inner;
    around(in.sizes, dim, outer, inner);
    int64_t n = in.sizes[dim] / parts;
    char *blocks = scratch[1].get(bytes);
    int64_t sizes[4] = {parts, outer, n, inner};
    int64_t from[4] = {n * inner, parts * n * inner, inner, 1};
    int64_t to[4] = {outer * n * inner, n * inner, inner, 1};
    copyStrided(packed, from, blocks, to, sizes, 4, elementSize);
    group.reduceScatter(blocks, out.data, out.count(), dtype, ReduceOp::Sum);
    return;
  }
  case CollectiveKind::AllToAll: {
    // Block p of the send buffer is this rank's input sliced at
    // [p * m, (p + 1) * m) along `dim` (the split dim); block p received
    // goes to [p * n, (p + 1) * n) along `concatDim`.
    std::vector<int64_t> pieceSizes = in.sizes;
    pieceSizes[dim] /= parts;
    int64_t pieceCount = in.count() / parts;
    std::vector<int64_t> inStrides = rowMajorStrides(in.sizes);
    std::vector<int64_t> pieceStrides = rowMajorStrides(pieceSizes);
    char *send = scratch[1].get(bytes);
    char *recv = scratch[2].get(bytes);
    for (int64_t p = 0; p < parts; ++p)
      copyStrided(packed + p * pieceSizes[dim] * inStrides[dim] * elementSize,
                  inStrides.data(), send + p * pieceCount * elementSize,
                  pieceStrides.data(), pieceSizes.data(), rank, elementSize);
    group.allToAll(send, recv, pieceCount, dtype);
    for (int64_t p = 0; p < parts; ++p)
      copyStrided(recv + p * pieceCount * elementSize, pieceStrides.data(),
                  out.data + p * pieceSizes[concatDim] * outStrides[concatDim] *
                                 elementSize,
                  outStrides.data(), pieceSizes.data(), rank, elementSize);
    return;
  }
  case CollectiveKind::Shift: {
    if (parts == 1) {
      memcpy(out.data, packed, bytes);
      return;
    }
    int64_t offset = ((dim % parts) + parts) % parts;
    int me = group.rank();
    // Sends are buffered, so every rank sends before it receives.
    group.send(packed, in.count(), dtype, int((me + offset) % parts),
               kShiftTag);
    group.recv(out.data, in.count(), dtype, int((me - offset + parts) % parts),
               kShiftTag);
    return;
  }
  }
  fatal("unknown collective kind " + std::to_string(kindValue));
}

} // namespace

void setCollectiveTimeout(double seconds) {
  collectiveTimeoutSeconds = seconds;
}
double collectiveTimeout() { return collectiveTimeoutSeconds; }
void setCurrentStep(int64_t step) { runningStep = step; }
int64_t currentStep() { return runningStep; }

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

void reportRankError(int worldRank, const std::string &line) {
  fprintf(stderr, "%s\n", line.c_str());
  fflush(stderr);
  const char *runDir = std::getenv("WEFT_RUN_DIR");
  if (!runDir || worldRank < 0)
    return;
  std::string path =
      std::string(runDir) + "/rank" + std::to_string(worldRank) + ".error";
  if (FILE *file = fopen(path.c_str(), "a")) {
    fprintf(file, "%s\n", line.c_str());
    fclose(file);
  }
}

} // namespace weft::runtime

using weft::runtime::collective;
using weft::runtime::recv;
using weft::runtime::send;

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
  }                                                                            \
  void weft_send_##NAME(int64_t inRank, void *in, int64_t outRank, void *out,  \
                        int64_t mask, int64_t peer, int64_t tag) {             \
    (void)outRank;                                                             \
    send(inRank, in, out, mask, peer, tag, DTYPE);                             \
  }                                                                            \
  void weft_recv_##NAME(int64_t inRank, void *in, int64_t outRank, void *out,  \
                        int64_t mask, int64_t peer, int64_t tag) {             \
    (void)inRank;                                                              \
    (void)in;                                                                  \
    recv(outRank, out, mask, peer, tag, DTYPE);                                \
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
