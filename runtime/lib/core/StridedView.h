//===- StridedView.h - The memrefs compiled code passes to the runtime ----===//

#ifndef WEFT_RUNTIME_LIB_CORE_STRIDEDVIEW_H
#define WEFT_RUNTIME_LIB_CORE_STRIDEDVIEW_H

#include <cstdint>
#include <vector>

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

/// Calls `row(start)` with the offset of the first element of each row of
/// `view` along dim `inner` (every index of the other dims, a broadcast dim
/// of stride 0 once): with rows contiguous along `inner`, the bytes read
/// are rows, not the span from the first to the last.
template <typename Row>
void forEachRow(int64_t rank, const View &view, int64_t inner, Row row) {
  for (int64_t d = 0; d < rank; ++d)
    if (view.sizes[d] == 0)
      return;
  std::vector<int64_t> index(rank, 0);
  while (true) {
    int64_t start = view.offset;
    for (int64_t d = 0; d < rank; ++d)
      start += index[d] * view.strides[d];
    row(start);
    int64_t d = rank - 1;
    for (; d >= 0; --d) {
      if (d == inner)
        continue;
      int64_t extent = view.strides[d] == 0 ? 1 : view.sizes[d];
      if (++index[d] < extent)
        break;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}

} // namespace weft::runtime

#endif // WEFT_RUNTIME_LIB_CORE_STRIDEDVIEW_H
