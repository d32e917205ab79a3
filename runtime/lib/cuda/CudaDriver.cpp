//===- CudaDriver.cpp - The CUDA driver, loaded when first asked ----------===//
//
// The driver (libcuda.so.1) is loaded with dlopen when a CUDA device is
// first asked for, so that an executable built for CUDA starts on a machine
// without one and says so in one line instead of failing to load.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaDriver.h"

#include "weft/runtime/Contract.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>

namespace weft::runtime::cuda {

std::string describe(const Driver &driver, CUresult result) {
  const char *text = nullptr;
  if (driver.getErrorString && driver.getErrorString(result, &text) == 0 &&
      text)
    return text;
  return "CUDA error " + std::to_string(result);
}

int localDevice(int count) {
  for (const char *name : {"LOCAL_RANK", "MPI_LOCALRANKID",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char *value = getenv(name); value && *value)
      return count > 0 ? std::max(0, atoi(value)) % count : 0;
  return 0;
}

const Driver *loadDriver(std::string &error) {
  static Driver driver;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      failure = "the CUDA driver (libcuda.so.1) cannot be loaded";
      return;
    }
    bool missing = false;
    auto bind = [&](auto &entry, const char *name) {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
          dlsym(library, name));
      if (!entry && !missing) {
        missing = true;
        failure = std::string("the CUDA driver has no ") + name;
      }
    };
    bind(driver.init, "cuInit");
    bind(driver.deviceGetCount, "cuDeviceGetCount");
    bind(driver.deviceGet, "cuDeviceGet");
    bind(driver.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(driver.ctxSetCurrent, "cuCtxSetCurrent");
    bind(driver.memAlloc, "cuMemAlloc_v2");
    bind(driver.memFree, "cuMemFree_v2");
    bind(driver.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    bind(driver.memcpyDtoH, "cuMemcpyDtoH_v2");
    bind(driver.memcpyAsync, "cuMemcpyAsync");
    bind(driver.memsetD32Async, "cuMemsetD32Async");
    bind(driver.memsetD16Async, "cuMemsetD16Async");
    bind(driver.moduleLoadData, "cuModuleLoadData");
    bind(driver.moduleGetFunction, "cuModuleGetFunction");
    bind(driver.launchKernel, "cuLaunchKernel");
    bind(driver.streamCreate, "cuStreamCreate");
    bind(driver.streamSynchronize, "cuStreamSynchronize");
    bind(driver.streamWaitEvent, "cuStreamWaitEvent");
    bind(driver.eventCreate, "cuEventCreate");
    bind(driver.eventDestroy, "cuEventDestroy_v2");
    bind(driver.eventRecord, "cuEventRecord");
    bind(driver.eventSynchronize, "cuEventSynchronize");
    // Only a profile needs it (cuEventElapsedTime_v2 from CUDA 12.8 on).
    for (const char *name : {"cuEventElapsedTime_v2", "cuEventElapsedTime"})
      if (!driver.eventElapsedTime)
        driver.eventElapsedTime =
            reinterpret_cast<decltype(driver.eventElapsedTime)>(
                dlsym(library, name));
    bind(driver.getErrorString, "cuGetErrorString");
    if (missing)
      return;
    int count = 0;
    CUdevice device;
    if (CUresult r = driver.init(0); r != CUDA_SUCCESS) {
      failure = "cuInit: " + describe(driver, r);
    } else if (CUresult r = driver.deviceGetCount(&count);
               r != CUDA_SUCCESS || count == 0) {
      failure = r != CUDA_SUCCESS ? "cuDeviceGetCount: " + describe(driver, r)
                                  : "the CUDA driver sees no GPU";
    } else if (CUresult r = driver.deviceGet(&device, localDevice(count));
               r != CUDA_SUCCESS) {
      failure = "cuDeviceGet: " + describe(driver, r);
    } else if (CUresult r = driver.primaryCtxRetain(&driver.context, device);
               r != CUDA_SUCCESS) {
      failure = "cuDevicePrimaryCtxRetain: " + describe(driver, r);
    }
  });
  if (!failure.empty()) {
    error = failure;
    return nullptr;
  }
  // The current context is per thread: once on each thread that calls.
  thread_local bool current = false;
  if (!current) {
    driver.ctxSetCurrent(driver.context);
    current = true;
  }
  return &driver;
}

const Driver &driver() {
  std::string error;
  const Driver *loaded = loadDriver(error);
  if (!loaded) {
    fprintf(stderr, "error: no CUDA device: %s\n", error.c_str());
    fflush(nullptr);
    std::_Exit(weft::runtime::kExitNoCudaDevice);
  }
  return *loaded;
}

void check(CUresult result, const char *call, const char *subject) {
  if (result == CUDA_SUCCESS)
    return;
  fprintf(stderr, "error: CUDA: %s%s%s failed: %s\n", call,
          subject ? " of " : "", subject ? subject : "",
          describe(driver(), result).c_str());
  fflush(nullptr);
  std::_Exit(1);
}

LaunchProfile *launchProfile() {
  static LaunchProfile *profile = [] {
    const char *path = std::getenv("WEFT_PROFILE_LAUNCHES");
    if (!path || !*path)
      return static_cast<LaunchProfile *>(nullptr);
    auto *created = new LaunchProfile{path};
    std::atexit([] {
      LaunchProfile *p = launchProfile();
      FILE *file = fopen(p->path.c_str(), "w");
      if (!file) {
        fprintf(stderr, "error: cannot write $WEFT_PROFILE_LAUNCHES '%s'\n",
                p->path.c_str());
        return;
      }
      for (auto [id, seconds] : p->runs)
        fprintf(file, "%lld %.9g\n", (long long)id, seconds);
      fclose(file);
    });
    return created;
  }();
  return profile;
}

void profiled(CUstream stream, const std::function<void()> &work) {
  LaunchProfile *profile = launchProfile();
  if (!profile || profile->current < 0) {
    work();
    return;
  }
  const Driver &cuda = driver();
  if (!cuda.eventElapsedTime) {
    fprintf(stderr, "error: CUDA: $WEFT_PROFILE_LAUNCHES: the driver has no "
                    "cuEventElapsedTime\n");
    fflush(nullptr);
    std::_Exit(1);
  }
  CUevent start = nullptr, end = nullptr;
  check(cuda.eventCreate(&start, /*CU_EVENT_DEFAULT=*/0), "cuEventCreate");
  check(cuda.eventCreate(&end, /*CU_EVENT_DEFAULT=*/0), "cuEventCreate");
  check(cuda.eventRecord(start, stream), "cuEventRecord");
  work();
  check(cuda.eventRecord(end, stream), "cuEventRecord");
  // A profile waits for each launch: counted as what it is.
  check(cuda.eventSynchronize(end), "cuEventSynchronize");
  ++deviceStats().synchronizations;
  float milliseconds = 0;
  check(cuda.eventElapsedTime(&milliseconds, start, end), "cuEventElapsedTime");
  cuda.eventDestroy(start);
  cuda.eventDestroy(end);
  profile->runs.push_back({profile->current, milliseconds * 1e-3});
  profile->current = -1;
}

Stream computeStream() {
  static CUstream stream = [] {
    CUstream created = nullptr;
    check(driver().streamCreate(&created, /*CU_STREAM_NON_BLOCKING=*/1),
          "cuStreamCreate");
    return created;
  }();
  return stream;
}

namespace {
std::atomic<bool> workQueued{false};
} // namespace

void queued() { workQueued = true; }

void waitForQueuedWork(const char *subject) {
  if (!workQueued.exchange(false))
    return;
  check(driver().streamSynchronize(static_cast<CUstream>(computeStream())),
        "cuStreamSynchronize", subject);
  ++deviceStats().synchronizations;
}

namespace {
/// The blocks allocate() made, by size when free. All device work runs in
/// order on the compute stream, so a block freed after the work that uses
/// it was queued is free for whatever the stream runs next.
struct DevicePool {
  struct Block {
    size_t bytes;
    bool free;
  };
  std::mutex mutex;
  std::unordered_map<CUdeviceptr, Block> blocks;
  std::multimap<size_t, CUdeviceptr> free;

  /// Gives the free blocks back to the driver, once the stream's work is
  /// done with them: for a request that found no memory left.
  void release() {
    waitForQueuedWork("the work before device memory is given back");
    for (auto [bytes, pointer] : free) {
      check(driver().memFree(pointer), "cuMemFree");
      blocks.erase(pointer);
    }
    free.clear();
  }
};

DevicePool &pool() {
  static auto *created = new DevicePool();
  return *created;
}
} // namespace

void *allocate(size_t bytes, const char *subject) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  DevicePool &pool = cuda::pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  if (auto it = pool.free.find(rounded); it != pool.free.end()) {
    CUdeviceptr pointer = it->second;
    pool.free.erase(it);
    pool.blocks[pointer].free = false;
    return reinterpret_cast<void *>(pointer);
  }
  CUdeviceptr pointer = 0;
  // Blocks of other sizes may hold the memory this one needs.
  if (driver().memAlloc(&pointer, rounded) != CUDA_SUCCESS) {
    pool.release();
    check(driver().memAlloc(&pointer, rounded), "cuMemAlloc", subject);
  }
  ++deviceStats().allocations;
  pool.blocks[pointer] = {rounded, false};
  return reinterpret_cast<void *>(pointer);
}

void deallocate(void *pointer) {
  DevicePool &pool = cuda::pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  auto it = pool.blocks.find(CUdeviceptr(pointer));
  if (it == pool.blocks.end() || it->second.free) {
    fprintf(stderr, "error: CUDA: freeing device memory at %p that %s\n",
            pointer,
            it == pool.blocks.end() ? "the runtime did not allocate"
                                    : "is free already");
    fflush(nullptr);
    std::_Exit(1);
  }
  it->second.free = true;
  pool.free.emplace(it->second.bytes, it->first);
}

weft_device_stats &deviceStats() {
  static weft_device_stats stats{};
  return stats;
}

void fill32(void *pointer, unsigned value, size_t count, Stream stream) {
  check(driver().memsetD32Async(CUdeviceptr(pointer), value, count,
                                static_cast<CUstream>(stream)),
        "cuMemsetD32Async");
  queued();
}

} // namespace weft::runtime::cuda
