//===- StridedView.h - The memrefs compiled code passes to the runtime ----===//

#ifndef WEFT_RUNTIME_LIB_STRIDEDVIEW_H
#define WEFT_RUNTIME_LIB_STRIDEDVIEW_H

#include <cstdint>

namespace weft::runtime {

/// A ranked f32 memref: element (i0, i1, ...) is at
/// aligned[offset + i0 * strides[0] + i1 * strides[1] + ...].
struct View {
  float *aligned;
  int64_t offset;
  const int64_t *sizes;
  const int64_t *strides;
};

/// Reads the ranked descriptor behind an unranked memref argument:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
inline View viewOf(int64_t rank, void *descriptor) {
  struct Header {
    float *allocated;
    float *aligned;
    int64_t offset;
  };
  auto *header = static_cast<Header *>(descriptor);
  auto *dims = reinterpret_cast<const int64_t *>(header + 1);
  return {header->aligned, header->offset, dims, dims + rank};
}

} // namespace weft::runtime

#endif // WEFT_RUNTIME_LIB_STRIDEDVIEW_H
