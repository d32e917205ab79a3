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

//===----------------------------------------------------------------------===//
// Allocation
//===----------------------------------------------------------------------===//
//
// finalize-memref-to-llvm{use-generic-functions} allocates through these.
// Freed blocks are kept by size and handed out again, so a model run
// repeatedly does not pay page faults for its temporaries after the first
// run. A 64-byte header before each block records its size. Under the CPU
// emulation of a CUDA device these allocations are the device's
// (gpu.alloc): its backend observes them with their exact size.

#include "core/CompiledAllocations.h"

#include "weft/runtime/Contract.h"

#include <cstdlib>
#include <map>
#include <mutex>

namespace {
constexpr size_t kHeader = 64;
// Blocks start at 64-byte boundaries (aligned_alloc(64) plus the header):
// the CUDA target's kernels rely on it under the emulation.
static_assert(kHeader % weft::runtime::kDeviceBufferAlignment == 0 &&
                  64 % weft::runtime::kDeviceBufferAlignment == 0,
              "emulated device allocations must be kDeviceBufferAlignment "
              "aligned");
std::mutex cacheMutex;
std::multimap<size_t, void *> &freeBlocks() {
  static auto *blocks = new std::multimap<size_t, void *>();
  return *blocks;
}

void *allocateBlock(size_t bytes, bool &fresh) {
  size_t rounded = (bytes + 63) / 64 * 64;
  fresh = false;
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = freeBlocks().find(rounded);
    if (it != freeBlocks().end()) {
      void *block = it->second;
      freeBlocks().erase(it);
      return static_cast<char *>(block) + kHeader;
    }
  }
  void *block = std::aligned_alloc(64, rounded + kHeader);
  if (!block)
    return nullptr;
  fresh = true;
  *static_cast<size_t *>(block) = rounded;
  return static_cast<char *>(block) + kHeader;
}

weft::runtime::AllocationObserver observer{};

/// A block handed to compiled code.
void *handOut(size_t bytes) {
  bool fresh;
  void *pointer = allocateBlock(bytes, fresh);
  if (pointer && observer.allocated)
    observer.allocated(pointer, bytes, fresh);
  return pointer;
}
} // namespace

void weft::runtime::observeCompiledAllocations(
    const AllocationObserver &watcher) {
  observer = watcher;
}

extern "C" void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return handOut(bytes);
}

extern "C" void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment,
                                                    size_t bytes) {
  // Blocks are 64-byte aligned, enough for every alignment MLIR requests
  // on this target.
  return alignment <= 64 ? handOut(bytes) : nullptr;
}

extern "C" void _mlir_memref_to_llvm_free(void *pointer) {
  if (!pointer)
    return;
  if (observer.freed)
    observer.freed(pointer);
  void *block = static_cast<char *>(pointer) - kHeader;
  std::lock_guard<std::mutex> lock(cacheMutex);
  freeBlocks().emplace(*static_cast<size_t *>(block), block);
}
