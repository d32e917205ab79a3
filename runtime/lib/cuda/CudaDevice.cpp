//===- CudaDevice.cpp - A CUDA GPU: the Device and mgpu* ------------------===//
//
// One driver (CudaDriver.cpp) serves the model's buffers (CudaDevice) and
// the `mgpu*` functions that the host code lowered by MLIR's gpu-to-llvm
// calls (Debian ships no libmlir_cuda_runtime; these are Weft's). GEMMs go
// to cuBLASLt (CublasLt.cpp), fused attention to cuDNN
// (CudnnAttention.cpp).
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaDriver.h"

#include "weft/runtime/Contract.h"
#include "weft/runtime/Device.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

using namespace weft::runtime::cuda;

namespace {

/// Each call goes through driver(), which makes the context current on
/// the calling thread.
class CudaDevice final : public weft::runtime::Device {
public:
  const char *name() const override { return weft::runtime::kCudaDevice; }
  void *allocate(size_t bytes) override {
    CUdeviceptr pointer = 0;
    // cuMemAlloc returns 256-byte aligned memory; it refuses 0 bytes.
    if (driver().memAlloc(&pointer, bytes ? bytes : 1) != CUDA_SUCCESS)
      return nullptr;
    ++deviceStats().allocations;
    return reinterpret_cast<void *>(pointer);
  }
  void deallocate(void *pointer) override {
    check(driver().memFree(CUdeviceptr(pointer)), "cuMemFree");
  }
  void copyFromHost(void *device, const void *host, size_t bytes) override {
    // In stream order; a pageable source is staged before the call returns.
    if (bytes) {
      check(driver().memcpyHtoDAsync(CUdeviceptr(device), host, bytes,
                                     static_cast<CUstream>(computeStream())),
            "cuMemcpyHtoDAsync");
      queued();
    }
    deviceStats().host_to_device_bytes += bytes;
  }
  void copyToHost(void *host, const void *device, size_t bytes) override {
    // The compute stream does not order the legacy stream's copy: wait for
    // the work that wrote `device` first.
    waitForQueuedWork("the work before a copy to the host");
    if (bytes)
      check(driver().memcpyDtoH(host, CUdeviceptr(device), bytes),
            "cuMemcpyDtoH");
    deviceStats().device_to_host_bytes += bytes;
  }
  void synchronize() override { waitForQueuedWork("the device's work"); }
  weft_device_stats stats() const override { return deviceStats(); }
};

/// A kernel module embedded in the executable. Its loader runs among the
/// global constructors, before main has checked for a GPU, so the cubin is
/// loaded when a kernel of it is first launched.
struct EmbeddedModule {
  const void *image;
  CUmodule module = nullptr;
  std::once_flag loaded;
};

std::unique_ptr<weft::runtime::Device> createCudaDevice(std::string &error) {
  if (!loadDriver(error))
    return nullptr;
  return std::make_unique<CudaDevice>();
}

// A CUDA executable's host code needs no CPU BLAS: nothing to prepare.
[[maybe_unused]] const weft::runtime::BackendRegistration registration{
    {weft::runtime::kCudaDevice, createCudaDevice, nullptr}};

} // namespace

// The host side of MLIR's GPU lowering (gpu-to-llvm), with the signatures
// it calls.
extern "C" {

void *mgpuModuleLoad(void *image, int64_t /*bytes*/) {
  return new EmbeddedModule{image};
}

void mgpuModuleUnload(void *handle) {
  auto *embedded = static_cast<EmbeddedModule *>(handle);
  // At exit the context may be gone already; the process frees it anyway.
  delete embedded;
}

void *mgpuModuleGetFunction(void *handle, const char *name) {
  auto *embedded = static_cast<EmbeddedModule *>(handle);
  std::call_once(embedded->loaded, [&] {
    check(driver().moduleLoadData(&embedded->module, embedded->image),
          "cuModuleLoadData", name);
  });
  CUfunction function = nullptr;
  check(driver().moduleGetFunction(&function, embedded->module, name),
        "cuModuleGetFunction", name);
  return function;
}

void mgpuLaunchKernel(void *function, int64_t gridX, int64_t gridY,
                      int64_t gridZ, int64_t blockX, int64_t blockY,
                      int64_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void **extra, int64_t /*paramCount*/) {
  profiled(static_cast<CUstream>(stream), [&] {
    check(driver().launchKernel(static_cast<CUfunction>(function), gridX, gridY,
                                gridZ, blockX, blockY, blockZ, sharedBytes,
                                static_cast<CUstream>(stream), params, extra),
          "cuLaunchKernel");
  });
  queued();
  ++deviceStats().launches;
}

/// Where the launch or library call numbered `id` by the kernel report
/// starts (weft-gpu-mark-launches): what $WEFT_PROFILE_LAUNCHES times.
void weft_cuda_launch(int64_t id) {
  if (LaunchProfile *profile = launchProfile())
    profile->current = id;
}

// gpu-async-region gives each op a stream of its own and waits for it;
// here every op goes on the one compute stream, in program order. The
// host code never reads device memory (weft-gpu-device-memory puts all of
// it there, and the runtime's copies to the host wait for the stream), so
// its waits have nothing to wait for: no host synchronization inside a
// step.
void *mgpuStreamCreate() { return computeStream(); }

void mgpuStreamDestroy(void * /*stream*/) {}

void mgpuStreamSynchronize(void * /*stream*/) {}

void mgpuStreamWaitEvent(void *stream, void *event) {
  check(driver().streamWaitEvent(static_cast<CUstream>(stream),
                                 static_cast<CUevent>(event), 0),
        "cuStreamWaitEvent");
}

void *mgpuEventCreate() {
  CUevent event = nullptr;
  check(driver().eventCreate(&event, /*CU_EVENT_DISABLE_TIMING=*/2),
        "cuEventCreate");
  return event;
}

void mgpuEventDestroy(void *event) {
  check(driver().eventDestroy(static_cast<CUevent>(event)), "cuEventDestroy");
}

void mgpuEventSynchronize(void *event) {
  check(driver().eventSynchronize(static_cast<CUevent>(event)),
        "cuEventSynchronize");
  ++deviceStats().synchronizations;
}

void mgpuEventRecord(void *event, void *stream) {
  check(driver().eventRecord(static_cast<CUevent>(event),
                             static_cast<CUstream>(stream)),
        "cuEventRecord");
}

// The compiled code's buffers come from the backend's pool, in stream
// order: a step that repeats reuses the blocks of the one before.
void *mgpuMemAlloc(uint64_t bytes, void * /*stream*/, bool hostShared) {
  if (hostShared) {
    fprintf(stderr, "error: CUDA: host-shared allocations (gpu.alloc "
                    "host_shared) are not supported by Weft's runtime\n");
    std::_Exit(1);
  }
  return allocate(bytes, "a buffer of compiled code");
}

void mgpuMemFree(void *pointer, void * /*stream*/) { deallocate(pointer); }

void mgpuMemcpy(void *destination, void *source, size_t bytes, void *stream) {
  check(driver().memcpyAsync(CUdeviceptr(destination), CUdeviceptr(source),
                             bytes, static_cast<CUstream>(stream)),
        "cuMemcpyAsync");
  queued();
}

void mgpuMemset32(void *destination, unsigned value, size_t count,
                  void *stream) {
  check(driver().memsetD32Async(CUdeviceptr(destination), value, count,
                                static_cast<CUstream>(stream)),
        "cuMemsetD32Async");
  queued();
}

void mgpuMemset16(void *destination, unsigned short value, size_t count,
                  void *stream) {
  check(driver().memsetD16Async(CUdeviceptr(destination), value, count,
                                static_cast<CUstream>(stream)),
        "cuMemsetD16Async");
  queued();
}

// The runtime chose the device (localDevice); the host code does not.
void mgpuSetDefaultDevice(int32_t device) {
  fprintf(stderr,
          "error: CUDA: the host code asks for device %d; Weft's runtime "
          "chooses each process's device by its local rank\n",
          device);
  std::_Exit(1);
}

} // extern "C"
