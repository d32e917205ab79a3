//===- Device.cpp - Host memory, and the backends' registry ---------------===//

#include "weft/runtime/Device.h"
#include "weft/runtime/Contract.h"

#include <cstdlib>
#include <cstring>
#include <vector>

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

// Filled by static constructors, so built on first use.
std::vector<Backend> &backends() {
  static auto *registered = new std::vector<Backend>();
  return *registered;
}

} // namespace

std::unique_ptr<Device> createCpuDevice() {
  return std::make_unique<CpuDevice>();
}

BackendRegistration::BackendRegistration(const Backend &backend) {
  backends().push_back(backend);
}

const Backend *findBackend(const std::string &device) {
  for (const Backend &backend : backends())
    if (device == backend.device)
      return &backend;
  return nullptr;
}

std::unique_ptr<Device> createDevice(const std::string &kind,
                                     std::string &error) {
  if (const Backend *backend = findBackend(kind))
    return backend->createDevice(error);
  const char *backend = runtimeBackendOf(kind);
  error =
      "this executable has no runtime backend for the device '" + kind + "'" +
      (backend
           ? std::string(" (libweft_runtime_") + backend + ".a is not linked)"
           : std::string());
  return nullptr;
}

} // namespace weft::runtime
