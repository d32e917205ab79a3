//===- EmulatedDevice.cpp - Test tool: a CUDA device made of host memory --===//
//
// weftc --target=cuda-emulation runs the CUDA target's kernels on the CPU.
// Device memory is host memory here, but every device allocation (the
// model's buffers, and the compiled code's gpu.alloc) is recorded, and the
// emulated kernels call weft_emulation_check_access before each load and
// store: an access outside the allocation its buffer starts in, or through
// a pointer that is in no device allocation (a host pointer a real GPU
// could not read), ends the run with one line naming the kernel. Each
// alignment a kernel states of a buffer (weft-gpu-assume-alignment) is
// checked alike (weft_emulation_check_alignment).
//
// With $WEFT_EMULATION_COUNTS naming a file, it also counts the distinct
// bytes each launch reads and writes (the launches and GEMMs the kernel
// report numbered mark their start) and writes them there at exit, one
// line per run of a launch: its id, bytes read, bytes written. The kernel
// report's byte counts are tested against these. With
// $WEFT_PROFILE_LAUNCHES it writes, as the CUDA runtime does on a GPU, each
// run's id and seconds: here the CPU's wall time from the launch's mark to
// the next (host code between included), which tests the profile's
// plumbing, never a GPU's speed.
//
//===----------------------------------------------------------------------===//

#include "core/CompiledAllocations.h"
#include "emulation/DeviceAllocations.h"

#include "weft/runtime/Blas.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/Device.h"

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace weft::runtime {
namespace emulation {
namespace {

/// What the emulated device did (weft_device_stats): the model's copies,
/// the compiled code's launches (their marks) and its device allocations
/// that the cache did not serve, and the host's waits where the CUDA
/// backend's one stream would make it wait: before a copy to the host or
/// at the end of a run, when work was queued since the last wait.
weft_device_stats stats{};
bool workQueued = false;

void waitForQueuedWork() {
  if (workQueued)
    ++stats.synchronizations;
  workQueued = false;
}

/// Every live device allocation: its first byte and its size.
std::map<uintptr_t, size_t> &allocations() {
  static auto *live = new std::map<uintptr_t, size_t>();
  return *live;
}

/// The allocation the last check found: kernels touch one buffer many
/// times in a row.
uintptr_t lastBegin = 0;
size_t lastBytes = 0;

/// The allocation holding `address`, as its begin and size; false when
/// none does.
bool findAllocation(uintptr_t address, uintptr_t &begin, size_t &bytes) {
  if (lastBytes && address >= lastBegin && address < lastBegin + lastBytes) {
    begin = lastBegin;
    bytes = lastBytes;
    return true;
  }
  auto it = allocations().upper_bound(address);
  if (it == allocations().begin())
    return false;
  --it;
  // A zero-size buffer holds its own address and nothing past it.
  if (address >= it->first + std::max<size_t>(it->second, 1))
    return false;
  begin = lastBegin = it->first;
  bytes = lastBytes = it->second;
  return true;
}

/// Byte ranges, merged where they touch.
class ByteRanges {
public:
  void add(uintptr_t begin, uintptr_t end) {
    auto next = ranges.upper_bound(begin);
    if (next != ranges.begin() && std::prev(next)->second >= begin) {
      --next;
      begin = next->first;
      end = std::max(end, next->second);
      next = ranges.erase(next);
    }
    while (next != ranges.end() && next->first <= end) {
      end = std::max(end, next->second);
      next = ranges.erase(next);
    }
    ranges.emplace(begin, end);
  }
  uint64_t bytes() const {
    uint64_t total = 0;
    for (auto [begin, end] : ranges)
      total += end - begin;
    return total;
  }
  void clear() { ranges.clear(); }

private:
  std::map<uintptr_t, uintptr_t> ranges;
};

/// The distinct bytes each run of a numbered launch touches, when
/// $WEFT_EMULATION_COUNTS asks for them.
struct LaunchCounts {
  std::string path;
  int64_t current = -1;
  ByteRanges reads, writes;
  struct Run {
    int64_t id;
    uint64_t read, written;
  };
  std::vector<Run> runs;
  /// The earlier parts' bytes of a merged launch: each part reads its
  /// buffers itself, as the kernels it was made of did.
  uint64_t partsRead = 0, partsWritten = 0;

  void finishPart() {
    partsRead += reads.bytes();
    partsWritten += writes.bytes();
    reads.clear();
    writes.clear();
  }
  void finishLaunch() {
    finishPart();
    if (current >= 0)
      runs.push_back({current, partsRead, partsWritten});
    current = -1;
    partsRead = partsWritten = 0;
  }
};

LaunchCounts *counts() {
  static LaunchCounts *counting = [] {
    const char *path = std::getenv("WEFT_EMULATION_COUNTS");
    if (!path || !*path)
      return static_cast<LaunchCounts *>(nullptr);
    auto *created = new LaunchCounts();
    created->path = path;
    std::atexit([] {
      LaunchCounts *c = counts();
      c->finishLaunch();
      FILE *file = fopen(c->path.c_str(), "w");
      if (!file) {
        fprintf(stderr, "error: cannot write $WEFT_EMULATION_COUNTS '%s'\n",
                c->path.c_str());
        return;
      }
      for (const LaunchCounts::Run &run : c->runs)
        fprintf(file, "%" PRId64 " %" PRIu64 " %" PRIu64 "\n", run.id, run.read,
                run.written);
      fclose(file);
    });
    return created;
  }();
  return counting;
}

/// The emulation's $WEFT_PROFILE_LAUNCHES: CPU seconds per run.
struct LaunchProfile {
  std::string path;
  int64_t current = -1;
  std::chrono::steady_clock::time_point start;
  std::vector<std::pair<int64_t, double>> runs;

  void finish() {
    if (current >= 0)
      runs.push_back({current, std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count()});
    current = -1;
  }
};

LaunchProfile *launchProfile() {
  static LaunchProfile *profile = [] {
    const char *path = std::getenv("WEFT_PROFILE_LAUNCHES");
    if (!path || !*path)
      return static_cast<LaunchProfile *>(nullptr);
    auto *created = new LaunchProfile{path};
    std::atexit([] {
      LaunchProfile *p = launchProfile();
      p->finish();
      FILE *file = fopen(p->path.c_str(), "w");
      if (!file) {
        fprintf(stderr, "error: cannot write $WEFT_PROFILE_LAUNCHES '%s'\n",
                p->path.c_str());
        return;
      }
      for (auto [id, seconds] : p->runs)
        fprintf(file, "%" PRId64 " %.9g\n", id, seconds);
      fclose(file);
    });
    return created;
  }();
  return profile;
}

} // namespace

void recordAllocation(const void *begin, size_t bytes) {
  allocations()[reinterpret_cast<uintptr_t>(begin)] = bytes;
}

void forgetAllocation(const void *begin) {
  allocations().erase(reinterpret_cast<uintptr_t>(begin));
  lastBegin = 0;
  lastBytes = 0;
}

} // namespace emulation

namespace {

/// Host memory, as the CPU device's, whose allocations are recorded.
class EmulatedCudaDevice final : public Device {
public:
  // The compiled code's allocations (its gpu.alloc) are device memory.
  EmulatedCudaDevice() {
    observeCompiledAllocations(
        {[](const void *begin, size_t bytes, bool fresh) {
           emulation::recordAllocation(begin, bytes);
           emulation::stats.allocations += fresh;
         },
         emulation::forgetAllocation});
  }
  const char *name() const override { return kEmulatedCudaDevice; }
  void *allocate(size_t bytes) override {
    void *memory = host->allocate(bytes);
    if (memory) {
      emulation::recordAllocation(memory, bytes);
      ++emulation::stats.allocations;
    }
    return memory;
  }
  void deallocate(void *pointer) override {
    emulation::forgetAllocation(pointer);
    host->deallocate(pointer);
  }
  void copyFromHost(void *device, const void *host, size_t bytes) override {
    this->host->copyFromHost(device, host, bytes);
    emulation::stats.host_to_device_bytes += bytes;
    emulation::workQueued = true;
  }
  void copyToHost(void *host, const void *device, size_t bytes) override {
    emulation::waitForQueuedWork();
    this->host->copyToHost(host, device, bytes);
    emulation::stats.device_to_host_bytes += bytes;
  }
  void synchronize() override { emulation::waitForQueuedWork(); }
  weft_device_stats stats() const override { return emulation::stats; }

private:
  std::unique_ptr<Device> host = createCpuDevice();
};

} // namespace

std::unique_ptr<Device> createEmulatedCudaDevice() {
  return std::make_unique<EmulatedCudaDevice>();
}

namespace {
// The emulated GEMMs are the CPU backend's (EmulatedBlas.cpp).
[[maybe_unused]] const BackendRegistration registration{
    {kEmulatedCudaDevice,
     [](std::string &) { return createEmulatedCudaDevice(); },
     prepareCpuProcess}};
} // namespace

} // namespace weft::runtime

void weft::runtime::emulation::checkAccess(uintptr_t base, uintptr_t address,
                                           int64_t bytes, bool isWrite,
                                           const char *kind, const char *name) {
  uintptr_t begin;
  size_t size;
  const char *what = isWrite ? "writes" : "reads";
  if (!findAllocation(base, begin, size)) {
    fprintf(stderr,
            "error: emulated CUDA %s %s %s %" PRId64 " bytes at 0x%" PRIx64
            " through a pointer to host memory, which a GPU cannot read: no "
            "device allocation holds 0x%" PRIx64 "\n",
            kind, name, what, bytes, uint64_t(address), uint64_t(base));
    fflush(nullptr);
    std::_Exit(1);
  }
  int64_t offset = int64_t(address - begin);
  if (LaunchCounts *launches = counts(); launches && launches->current >= 0)
    (isWrite ? launches->writes : launches->reads)
        .add(address, address + uintptr_t(bytes));
  if (address < begin || offset + bytes > int64_t(size)) {
    fprintf(stderr,
            "error: emulated CUDA %s %s %s bytes [%" PRId64 ", %" PRId64
            ") of a %zu-byte device allocation: out of bounds\n",
            kind, name, what, offset, offset + bytes, size);
    fflush(nullptr);
    std::_Exit(1);
  }
}

/// Called by an emulated kernel (weft-gpu-emulate-launches) before it reads
/// or writes `bytes` bytes at `address` through a buffer whose data starts
/// at `base`; `kernel` names the kernel.
extern "C" void weft_emulation_check_access(int64_t base, int64_t address,
                                            int64_t bytes, int64_t isWrite,
                                            int64_t kernel) {
  weft::runtime::emulation::checkAccess(uintptr_t(base), uintptr_t(address),
                                        bytes, isWrite, "kernel",
                                        reinterpret_cast<const char *>(kernel));
}

/// Called by emulated code (weft-gpu-emulate-launches) where a kernel
/// states that a buffer's first byte, at `address`, is at a multiple of
/// `alignment` bytes (weft-gpu-assume-alignment); `kernel` names the kernel.
extern "C" void weft_emulation_check_alignment(int64_t address,
                                               int64_t alignment,
                                               int64_t kernel) {
  if (alignment > 0 && uint64_t(address) % uint64_t(alignment) == 0)
    return;
  fprintf(stderr,
          "error: emulated CUDA kernel %s states that a buffer at 0x%" PRIx64
          " is aligned to %" PRId64 " bytes; it is not\n",
          reinterpret_cast<const char *>(kernel), uint64_t(address), alignment);
  fflush(nullptr);
  std::_Exit(1);
}

/// Called by emulated code (weft-gpu-emulate-launches) before a launch whose
/// kernel reads the constant of `bytes` bytes at `address` from its own
/// image (weft-gpu-device-memory): from then on it is device memory, and
/// its bytes went to the device once, as a GPU loads the kernel's module.
extern "C" void weft_emulation_device_constant(int64_t address, int64_t bytes) {
  using namespace weft::runtime::emulation;
  uintptr_t begin;
  size_t size;
  if (findAllocation(uintptr_t(address), begin, size))
    return;
  recordAllocation(reinterpret_cast<const void *>(address), size_t(bytes));
  stats.host_to_device_bytes += uint64_t(bytes);
}

/// Called by emulated code (weft-gpu-emulate-launches) where the launch or
/// GEMM numbered `id` by the kernel report starts.
extern "C" void weft_emulation_launch(int64_t id) {
  ++weft::runtime::emulation::stats.launches;
  weft::runtime::emulation::workQueued = true;
  if (weft::runtime::emulation::LaunchCounts *launches =
          weft::runtime::emulation::counts()) {
    launches->finishLaunch();
    launches->current = id;
  }
  if (weft::runtime::emulation::LaunchProfile *profile =
          weft::runtime::emulation::launchProfile()) {
    profile->finish();
    profile->current = id;
    profile->start = std::chrono::steady_clock::now();
  }
}

/// Called by emulated code where the next part of a merged launch
/// (weft-gpu-merge-launches) starts: its distinct bytes are counted apart
/// from the earlier parts' and added to them.
extern "C" void weft_emulation_launch_part() {
  if (weft::runtime::emulation::LaunchCounts *launches =
          weft::runtime::emulation::counts())
    launches->finishPart();
}
