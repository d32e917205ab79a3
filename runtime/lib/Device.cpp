//===- Device.cpp - The CPU device, and the device a manifest names -------===//

#include "weft/runtime/Device.h"
#include "weft/runtime/Contract.h"

#include <cstdlib>
#include <cstring>

namespace weft::runtime {
namespace {

class CpuDevice final : public Device {
public:
  const char *name() const override { return kCpuDevice; }
  bool sharesHostMemory() const override { return true; }
  void *allocate(size_t bytes) override {
    // aligned_alloc needs a multiple of the alignment.
    size_t rounded = (bytes + 63) / 64 * 64;
    return std::aligned_alloc(64, rounded ? rounded : 64);
  }
  void deallocate(void *pointer) override { std::free(pointer); }
  void copyFromHost(void *device, const void *host, size_t bytes) override {
    std::memcpy(device, host, bytes);
  }
  void copyToHost(void *host, const void *device, size_t bytes) override {
    std::memcpy(host, device, bytes);
  }
  void synchronize() override {}
};

} // namespace

std::unique_ptr<Device> createCpuDevice() {
  return std::make_unique<CpuDevice>();
}

std::unique_ptr<Device> createDevice(const std::string &kind,
                                     std::string &error) {
  if (kind == kCudaDevice)
    return createCudaDevice(error);
  if (kind == kEmulatedCudaDevice)
    return createEmulatedCudaDevice();
  if (kind == kCpuDevice)
    return createCpuDevice();
  error = "there is no device '" + kind + "'";
  return nullptr;
}

} // namespace weft::runtime
