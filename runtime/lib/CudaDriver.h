//===- CudaDriver.h - The CUDA driver for the runtime's GPU libraries -----===//
//
// CudaDevice.cpp loads the driver (dlopen) and owns device 0's context; the
// runtime's other files that drive a GPU library (CudnnAttention.cpp) reach
// the driver through these. Each makes the context current on the calling
// thread first and, like CudaDevice.cpp, ends the run with one line when the
// driver call fails.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_LIB_CUDADRIVER_H
#define WEFT_RUNTIME_LIB_CUDADRIVER_H

#include <cstddef>
#include <functional>

namespace weft::runtime::cuda {

/// A CUstream (the same object as a cudaStream_t), opaque here.
using Stream = void *;

/// A new non-blocking stream.
Stream createStream();
/// Returns when the work queued on `stream` has finished; `subject` names
/// that work in the error line.
void synchronize(Stream stream, const char *subject);
/// `bytes` of device memory (cuMemAlloc: 256-byte aligned).
void *allocate(size_t bytes, const char *subject);
void deallocate(void *pointer);
/// Sets `count` 32-bit words from `pointer` to `value`, queued on `stream`.
void fill32(void *pointer, unsigned value, size_t count, Stream stream);
/// Runs `work`, which queues a library call on `stream`; under
/// $WEFT_PROFILE_LAUNCHES, timed on the GPU as the launch the host code
/// marked last (CudaDevice.cpp).
void profiled(Stream stream, const std::function<void()> &work);

} // namespace weft::runtime::cuda

#endif // WEFT_RUNTIME_LIB_CUDADRIVER_H
