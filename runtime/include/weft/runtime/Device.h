//===- Device.h - Where a model's buffers live ------------------*- C++ -*-===//
//
// The runtime allocates and moves buffers through a Device so that a CUDA
// device (device memory, streams) can replace the CPU one without changing
// the model code: the compiled entry of a backend receives device pointers.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_DEVICE_H
#define WEFT_RUNTIME_DEVICE_H

#include <cstddef>
#include <memory>

namespace weft::runtime {

class Device {
public:
  virtual ~Device() = default;
  virtual const char *name() const = 0;
  /// Memory for `bytes` bytes aligned to at least 64 bytes, or null.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *pointer) = 0;
  virtual void copyFromHost(void *device, const void *host, size_t bytes) = 0;
  virtual void copyToHost(void *host, const void *device, size_t bytes) = 0;
  /// Waits until all work queued on the device has finished.
  virtual void synchronize() = 0;
};

/// Host memory; copies are memcpy and there is nothing to wait for.
std::unique_ptr<Device> createCpuDevice();

} // namespace weft::runtime

#endif // WEFT_RUNTIME_DEVICE_H
