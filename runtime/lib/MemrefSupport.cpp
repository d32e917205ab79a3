//===- MemrefSupport.cpp - Helpers the MLIR LLVM lowering calls -----------===//
//
// finalize-memref-to-llvm lowers a memref.copy between non-contiguous
// memrefs to a call of `memrefCopy` with unranked descriptors. This is
// Weft's definition of it, so executables need no MLIR runtime library.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

/// The layout of a ranked memref descriptor of any rank.
struct StridedDescriptor {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizesAndStrides[]; // sizes[rank], then strides[rank]
};

struct UnrankedDescriptor {
  int64_t rank;
  StridedDescriptor *descriptor;
};

} // namespace

extern "C" void memrefCopy(int64_t elementSize, UnrankedDescriptor *source,
                           UnrankedDescriptor *target) {
  int64_t rank = source->rank;
  const StridedDescriptor *src = source->descriptor;
  const StridedDescriptor *dst = target->descriptor;
  const int64_t *sizes = src->sizesAndStrides;
  const int64_t *srcStrides = src->sizesAndStrides + rank;
  const int64_t *dstStrides = dst->sizesAndStrides + rank;
  const char *from = src->aligned + src->offset * elementSize;
  char *to = dst->aligned + dst->offset * elementSize;
  int64_t total = 1;
  for (int64_t d = 0; d < rank; ++d)
    total *= sizes[d];
  if (total == 0)
    return;
  std::vector<int64_t> index(rank, 0);
  int64_t srcOffset = 0, dstOffset = 0;
  for (int64_t n = 0; n < total; ++n) {
    std::memcpy(to + dstOffset * elementSize, from + srcOffset * elementSize,
                elementSize);
    for (int64_t d = rank - 1; d >= 0; --d) {
      srcOffset += srcStrides[d];
      dstOffset += dstStrides[d];
      if (++index[d] < sizes[d])
        break;
      srcOffset -= srcStrides[d] * sizes[d];
      dstOffset -= dstStrides[d] * sizes[d];
      index[d] = 0;
    }
  }
}
