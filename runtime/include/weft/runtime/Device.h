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
#include <string>

namespace weft::runtime {

class Device {
public:
  virtual ~Device() = default;
  virtual const char *name() const = 0;
  /// Whether the host reads and writes the device's memory directly: then
  /// the entry takes the host's buffers and nothing is copied.
  virtual bool sharesHostMemory() const { return false; }
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

/// The first CUDA GPU of this machine, through the driver (libcuda.so.1,
/// loaded when first asked for), or null with `error` saying why there is
/// none ("libcuda.so.1 cannot be loaded", "cuInit: no CUDA-capable device is
/// detected").
std::unique_ptr<Device> createCudaDevice(std::string &error);

/// A test tool (weftc --target=cuda-emulation): host memory standing for a
/// GPU's, each allocation recorded so that every access of an emulated
/// kernel is checked to fall inside the allocation it addresses.
std::unique_ptr<Device> createEmulatedCudaDevice();

/// The device a manifest names (kCpuDevice, ...), or null with `error`.
std::unique_ptr<Device> createDevice(const std::string &kind,
                                     std::string &error);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_DEVICE_H
