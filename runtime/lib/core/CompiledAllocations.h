//===- CompiledAllocations.h - Compiled code's allocations ------*- C++ -*-===//
//
// The compiled code allocates its temporaries through the core's caching
// allocator (MemrefSupport.cpp). A backend whose device memory is host
// memory (the emulation) learns of each block handed out and given back,
// so that it can tell device memory from host memory.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_LIB_CORE_COMPILEDALLOCATIONS_H
#define WEFT_RUNTIME_LIB_CORE_COMPILEDALLOCATIONS_H

#include <cstddef>

namespace weft::runtime {

struct AllocationObserver {
  /// `fresh`: the block is new memory, not one the cache hands out again.
  void (*allocated)(const void *begin, size_t bytes, bool fresh);
  void (*freed)(const void *begin);
};

/// From now on, `observer` hears of every block compiled code gets and
/// gives back; one observer per process.
void observeCompiledAllocations(const AllocationObserver &observer);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_LIB_CORE_COMPILEDALLOCATIONS_H
