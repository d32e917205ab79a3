//===- Device.h - Where a model's buffers live ------------------*- C++ -*-===//
//
// The runtime allocates and moves buffers through a Device so that a CUDA
// device (device memory, streams) can replace the CPU one without changing
// the model code: the compiled entry of a backend receives device pointers.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_DEVICE_H
#define WEFT_RUNTIME_DEVICE_H

#include "weft/runtime/CApi.h"

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
  /// What the device has done since the process started (weft_device_stats:
  /// the model's copies and the compiled code's launches, synchronizations
  /// and allocations alike); zero for a device that shares host memory.
  virtual weft_device_stats stats() const { return {}; }
};

/// Host memory; copies are memcpy and there is nothing to wait for.
std::unique_ptr<Device> createCpuDevice();

/// What one runtime backend (a folder of runtime/lib and its library,
/// libweft_runtime_<backend>.a) gives the runtime's core: the device a
/// manifest names, and what the process sets up before anything runs.
/// Each backend library registers one with a static BackendRegistration;
/// an executable links the library of its target whole
/// (weft/Target/RuntimeLinkedTarget.h), so the core names no backend.
struct Backend {
  /// The manifest's device (Contract.h: kCpuDevice, kCudaDevice, ...).
  const char *device;
  /// The device, or null with `error` saying why there is none ("the CUDA
  /// driver (libcuda.so.1) cannot be loaded").
  std::unique_ptr<Device> (*createDevice)(std::string &error);
  /// Called first in main, before arguments are read and MPI starts; may
  /// re-execute the process. Null when there is nothing to prepare.
  void (*prepareProcess)(char **argv);
};

class BackendRegistration {
public:
  explicit BackendRegistration(const Backend &backend);
};

/// The backend registered for `device`, or null.
const Backend *findBackend(const std::string &device);

/// The device a manifest names, or null with `error` naming the device and,
/// when no backend of this executable serves it, the library that would.
std::unique_ptr<Device> createDevice(const std::string &kind,
                                     std::string &error);

} // namespace weft::runtime

#endif // WEFT_RUNTIME_DEVICE_H
