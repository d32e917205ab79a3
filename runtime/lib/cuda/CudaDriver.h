//===- CudaDriver.h - The CUDA driver, for the backend ----------*- C++ -*-===//
//
// CudaDriver.cpp loads the driver (libcuda.so.1, with dlopen) and owns
// the context of this process's GPU. The backend's other files reach it
// through these:
// CudaDevice.cpp (the runtime's Device and MLIR's mgpu* functions) through
// the driver's entry points, the GPU libraries (CublasLt.cpp,
// CudnnAttention.cpp) through the helpers at the end. Each helper that
// calls the driver makes the context current on the calling thread first
// (driver()) and ends the run with one line when the driver call fails.
// One host thread at a time drives the GPU (the runner's; the queued-work
// flag and the libraries' plans are shared).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_LIB_CUDA_CUDADRIVER_H
#define WEFT_RUNTIME_LIB_CUDA_CUDADRIVER_H

#include "weft/runtime/CApi.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace weft::runtime::cuda {

// The driver API's types, as its ABI has them (cuda.h is not needed to
// build the runtime).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
constexpr CUresult CUDA_SUCCESS = 0;

/// The driver's entry points this runtime calls, by their versioned names.
struct Driver {
  CUresult (*init)(unsigned);
  CUresult (*deviceGetCount)(int *);
  CUresult (*deviceGet)(CUdevice *, int);
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*memAlloc)(CUdeviceptr *, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*memcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*memsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*memsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*moduleLoadData)(CUmodule *, const void *);
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **);
  CUresult (*streamCreate)(CUstream *, unsigned);
  CUresult (*streamSynchronize)(CUstream);
  CUresult (*streamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*eventCreate)(CUevent *, unsigned);
  CUresult (*eventDestroy)(CUevent);
  CUresult (*eventRecord)(CUevent, CUstream);
  CUresult (*eventSynchronize)(CUevent);
  CUresult (*eventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*getErrorString)(CUresult, const char **);

  CUcontext context = nullptr;
};

/// This process's GPU among `count`: its rank among the processes on this
/// machine (torchrun's LOCAL_RANK, MPICH's MPI_LOCALRANKID, Open MPI's
/// OMPI_COMM_WORLD_LOCAL_RANK, Slurm's SLURM_LOCALID) modulo `count`; 0 for
/// a process started alone.
int localDevice(int count);

/// The text of a driver error.
std::string describe(const Driver &driver, CUresult result);

/// Loads the driver and makes the primary context of this process's GPU
/// (localDevice) current; once per
/// process. Null with `error` when there is no usable GPU.
const Driver *loadDriver(std::string &error);

/// The driver for a call that cannot proceed without one: lowered host code
/// runs only after the runner has checked that there is a GPU.
const Driver &driver();

/// Ends the run with one line when a driver call fails: a kernel that
/// faulted leaves the context unusable, so there is nothing to recover.
void check(CUresult result, const char *call, const char *subject = nullptr);

/// The time each run of a numbered launch took on the GPU, when
/// $WEFT_PROFILE_LAUNCHES names a file: the host code marks where the
/// launch or library call the kernel report numbered starts
/// (weft_cuda_launch), and the kernel or library call that follows is timed
/// between two events on its stream (which synchronizes it: a profile, not
/// a fast run; the time includes the launch's latency, the stream being
/// idle before it). Written at exit, one line per run: the id and seconds.
struct LaunchProfile {
  std::string path;
  int64_t current = -1;
  std::vector<std::pair<int64_t, double>> runs;
};

/// What this process's GPU has done (weft_device_stats), counted where the
/// backend calls the driver: copies, synchronizations, launches (kernels
/// and library calls), allocations (those the pool does not serve).
weft_device_stats &deviceStats();

/// The profile, or null when $WEFT_PROFILE_LAUNCHES is not set.
LaunchProfile *launchProfile();

/// Runs `work`, which queues the marked launch on `stream`; when profiling,
/// between two timing events, and records the time.
void profiled(CUstream stream, const std::function<void()> &work);

// What the GPU libraries need of the driver.

/// A CUstream (the same object as a cudaStream_t), opaque to the libraries.
using Stream = void *;

/// The one stream of this process: every launch, library call, copy and
/// fill goes on it, in program order, so that nothing the host queues
/// waits for the host; the host waits (waitForQueuedWork) only where it
/// reads what the device wrote. Non-blocking; made when first asked for.
Stream computeStream();
/// Notes that work was queued on the compute stream.
void queued();
/// Returns when the work queued on the compute stream has finished, and
/// counts a synchronization, if any was queued since the last wait;
/// `subject` names what needs it in the error line.
void waitForQueuedWork(const char *subject);
/// `bytes` of device memory, 256-byte aligned: a block freed before of the
/// same size, else new memory (cuMemAlloc). Blocks freed go back to that
/// pool, not to the driver, so a step that repeats allocates nothing.
void *allocate(size_t bytes, const char *subject);
void deallocate(void *pointer);
/// Sets `count` 32-bit words from `pointer` to `value`, queued on `stream`.
void fill32(void *pointer, unsigned value, size_t count, Stream stream);
/// Runs `work`, which queues a library call on `stream`; under
/// $WEFT_PROFILE_LAUNCHES, timed on the GPU as the launch the host code
/// marked last.
inline void profiled(Stream stream, const std::function<void()> &work) {
  profiled(static_cast<CUstream>(stream), work);
}

} // namespace weft::runtime::cuda

#endif // WEFT_RUNTIME_LIB_CUDA_CUDADRIVER_H
