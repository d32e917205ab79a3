//===- DeviceAllocations.h - The emulated device's memory -------*- C++ -*-===//
//
// Under the CPU emulation of a CUDA device (weftc --target=cuda-emulation)
// the device's memory is host memory; this records which of it is device
// memory, so that the emulated kernels' accesses are checked against it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_LIB_EMULATION_DEVICEALLOCATIONS_H
#define WEFT_RUNTIME_LIB_EMULATION_DEVICEALLOCATIONS_H

#include <cstddef>
#include <cstdint>

namespace weft::runtime::emulation {

/// The device allocations: the model's buffers, and the compiled code's
/// (its gpu.alloc) while an emulated device exists.
void recordAllocation(const void *begin, size_t bytes);
void forgetAllocation(const void *begin);

/// Ends the run with one line when `bytes` bytes at `address`, reached
/// through a buffer whose data starts at `base`, are not all inside the
/// device allocation holding `base` (or no allocation holds it: a host
/// pointer); `kind` and `name` name the accessor ("kernel", "main #3").
void checkAccess(uintptr_t base, uintptr_t address, int64_t bytes, bool isWrite,
                 const char *kind, const char *name);

} // namespace weft::runtime::emulation

#endif // WEFT_RUNTIME_LIB_EMULATION_DEVICEALLOCATIONS_H
