//===- CudaDevice.cpp - A CUDA GPU through the driver API -----------------===//
//
// The driver (libcuda.so.1) is loaded with dlopen when a CUDA device is
// first asked for, so that an executable built for CUDA starts on a machine
// without one and says so in one line instead of failing to load. The same
// driver serves the model's buffers (CudaDevice) and the `mgpu*` functions
// that the host code lowered by MLIR's gpu-to-llvm calls (Debian ships no
// libmlir_cuda_runtime; these are Weft's). GEMMs go to cuBLAS, also loaded
// when first used; fused attention (CudnnAttention.cpp) reaches the driver
// through CudaDriver.h.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"
#include "StridedView.h"

#include "weft/runtime/Contract.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/GemmLayout.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

namespace {

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
  CUresult (*ctxSynchronize)();
  CUresult (*memAlloc)(CUdeviceptr *, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*memcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*memsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*memsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*moduleLoadData)(CUmodule *, const void *);
  CUresult (*moduleUnload)(CUmodule);
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **);
  CUresult (*streamCreate)(CUstream *, unsigned);
  CUresult (*streamSynchronize)(CUstream);
  CUresult (*streamDestroy)(CUstream);
  CUresult (*streamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*eventCreate)(CUevent *, unsigned);
  CUresult (*eventDestroy)(CUevent);
  CUresult (*eventRecord)(CUevent, CUstream);
  CUresult (*eventSynchronize)(CUevent);
  CUresult (*getErrorString)(CUresult, const char **);

  CUcontext context = nullptr;
};

std::string describe(const Driver &driver, CUresult result) {
  const char *text = nullptr;
  if (driver.getErrorString && driver.getErrorString(result, &text) == 0 &&
      text)
    return text;
  return "CUDA error " + std::to_string(result);
}

/// Loads the driver and makes device 0's primary context current; once per
/// process. Null with `error` when there is no usable GPU.
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
    bind(driver.ctxSynchronize, "cuCtxSynchronize");
    bind(driver.memAlloc, "cuMemAlloc_v2");
    bind(driver.memFree, "cuMemFree_v2");
    bind(driver.memcpyHtoD, "cuMemcpyHtoD_v2");
    bind(driver.memcpyDtoH, "cuMemcpyDtoH_v2");
    bind(driver.memcpyAsync, "cuMemcpyAsync");
    bind(driver.memsetD32Async, "cuMemsetD32Async");
    bind(driver.memsetD16Async, "cuMemsetD16Async");
    bind(driver.moduleLoadData, "cuModuleLoadData");
    bind(driver.moduleUnload, "cuModuleUnload");
    bind(driver.moduleGetFunction, "cuModuleGetFunction");
    bind(driver.launchKernel, "cuLaunchKernel");
    bind(driver.streamCreate, "cuStreamCreate");
    bind(driver.streamSynchronize, "cuStreamSynchronize");
    bind(driver.streamDestroy, "cuStreamDestroy_v2");
    bind(driver.streamWaitEvent, "cuStreamWaitEvent");
    bind(driver.eventCreate, "cuEventCreate");
    bind(driver.eventDestroy, "cuEventDestroy_v2");
    bind(driver.eventRecord, "cuEventRecord");
    bind(driver.eventSynchronize, "cuEventSynchronize");
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
    } else if (CUresult r = driver.deviceGet(&device, 0); r != CUDA_SUCCESS) {
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

/// The driver for a call that cannot proceed without one: lowered host code
/// runs only after the runner has checked that there is a GPU.
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

/// Ends the run with one line when a driver call fails: a kernel that
/// faulted leaves the context unusable, so there is nothing to recover.
void check(CUresult result, const char *call, const char *subject = nullptr) {
  if (result == CUDA_SUCCESS)
    return;
  fprintf(stderr, "error: CUDA: %s%s%s failed: %s\n", call,
          subject ? " of " : "", subject ? subject : "",
          describe(driver(), result).c_str());
  fflush(nullptr);
  std::_Exit(1);
}

class CudaDevice final : public weft::runtime::Device {
public:
  explicit CudaDevice(const Driver &driver) : cuda(driver) {}
  const char *name() const override { return weft::runtime::kCudaDevice; }
  void *allocate(size_t bytes) override {
    CUdeviceptr pointer = 0;
    // cuMemAlloc returns 256-byte aligned memory; it refuses 0 bytes.
    if (cuda.memAlloc(&pointer, bytes ? bytes : 1) != CUDA_SUCCESS)
      return nullptr;
    return reinterpret_cast<void *>(pointer);
  }
  void deallocate(void *pointer) override {
    check(cuda.memFree(CUdeviceptr(pointer)), "cuMemFree");
  }
  void copyFromHost(void *device, const void *host, size_t bytes) override {
    if (bytes)
      check(cuda.memcpyHtoD(CUdeviceptr(device), host, bytes), "cuMemcpyHtoD");
  }
  void copyToHost(void *host, const void *device, size_t bytes) override {
    if (bytes)
      check(cuda.memcpyDtoH(host, CUdeviceptr(device), bytes), "cuMemcpyDtoH");
  }
  void synchronize() override {
    check(cuda.ctxSynchronize(), "cuCtxSynchronize");
  }

private:
  const Driver &cuda;
};

/// A kernel module embedded in the executable. Its loader runs among the
/// global constructors, before main has checked for a GPU, so the cubin is
/// loaded when a kernel of it is first launched.
struct EmbeddedModule {
  const void *image;
  CUmodule module = nullptr;
  std::once_flag loaded;
};

/// cuBLAS's entry points (its ABI; the toolkit's headers are not needed).
struct Blas {
  using Handle = struct cublasContext *;
  int (*create)(Handle *);
  int (*setStream)(Handle, CUstream);
  int (*sgemmStridedBatched)(Handle, int, int, int, int, int, const float *,
                             const float *, int, long long, const float *, int,
                             long long, const float *, float *, int, long long,
                             int);
  /// cublasGemmStridedBatchedEx: typed operands (cudaDataType), a compute
  /// type and an algorithm after the batch count.
  int (*gemmStridedBatchedEx)(Handle, int, int, int, int, int, const void *,
                              const void *, int, int, long long, const void *,
                              int, int, long long, const void *, void *, int,
                              int, long long, int, int, int);
  Handle handle = nullptr;
  CUstream stream = nullptr;
};

/// cuBLAS with a handle and a stream of its own, loaded at the first GEMM.
const Blas &blas() {
  static Blas loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    const Driver &cuda = driver();
    // On the library path, else in the toolkit.
    std::string toolkit =
        getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    void *library = nullptr;
    for (const std::string &name :
         {std::string("libcublas.so.13"), std::string("libcublas.so.12"),
          toolkit + "/lib64/libcublas.so.13",
          toolkit + "/lib64/libcublas.so.12"})
      if ((library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
    auto fail = [](const std::string &why) {
      fprintf(stderr, "error: CUDA: %s\n", why.c_str());
      fflush(nullptr);
      std::_Exit(1);
    };
    if (!library)
      fail("cuBLAS (libcublas.so.13) cannot be loaded: put its directory "
           "on LD_LIBRARY_PATH");
    auto bind = [&](auto &entry, const char *name) {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
          dlsym(library, name));
      if (!entry)
        fail(std::string("cuBLAS has no ") + name);
    };
    bind(loaded.create, "cublasCreate_v2");
    bind(loaded.setStream, "cublasSetStream_v2");
    bind(loaded.sgemmStridedBatched, "cublasSgemmStridedBatched");
    bind(loaded.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
    if (int status = loaded.create(&loaded.handle))
      fail("cublasCreate failed with status " + std::to_string(status));
    check(cuda.streamCreate(&loaded.stream, /*CU_STREAM_NON_BLOCKING=*/1),
          "cuStreamCreate");
    if (int status = loaded.setStream(loaded.handle, loaded.stream))
      fail("cublasSetStream failed with status " + std::to_string(status));
  });
  return loaded;
}

} // namespace

namespace {

/// The input types of a GEMM of weft-contractions-to-blas: f32 through
/// cublasSgemmStridedBatched, or bf16 through cublasGemmStridedBatchedEx
/// on tensor cores, accumulating in f32; c is f32 either way.
/// The GEMMs weft-contractions-to-blas calls: f32; bf16 inputs into an f32
/// c; bf16 inputs into a bf16 c (f32 accumulation, rounded once).
enum class GemmInputs { F32, BF16, BF16ToBF16 };

/// c (+)= a * b on strided views [batch..., rows, cols] whose matrices cuBLAS
/// reads (the compiler calls only for those, weft::runtime::
/// columnMajorLayout). cuBLAS is column-major: a row-major c is computed as
/// c^T = b^T a^T. The last batch dim is cuBLAS's strided batch, the others
/// a loop. Returns when c is written: the kernels that follow run on other
/// streams.
void cudaGemm(GemmInputs inputs, int64_t rankA, void *descA, int64_t rankB,
              void *descB, int64_t rankC, void *descC, bool accumulate) {
  using weft::runtime::columnMajorLayout;
  using weft::runtime::View;
  View a = weft::runtime::viewOf(rankA, descA),
       b = weft::runtime::viewOf(rankB, descB),
       c = weft::runtime::viewOf(rankC, descC);
  int64_t inputBytes = inputs == GemmInputs::F32 ? 4 : 2;
  int64_t outputBytes = inputs == GemmInputs::BF16ToBF16 ? 2 : 4;
  int64_t batchRank = rankC - 2;
  int64_t m = c.sizes[batchRank], n = c.sizes[batchRank + 1],
          k = a.sizes[batchRank + 1];
  auto la =
      columnMajorLayout(m, k, a.strides[batchRank], a.strides[batchRank + 1]);
  auto lb =
      columnMajorLayout(k, n, b.strides[batchRank], b.strides[batchRank + 1]);
  auto lc =
      columnMajorLayout(m, n, c.strides[batchRank], c.strides[batchRank + 1]);
  if (!la || !lb || !lc) {
    fprintf(stderr, "error: CUDA: a GEMM operand has strides cuBLAS cannot "
                    "read (weft-contractions-to-blas should have kept it a "
                    "kernel)\n");
    std::_Exit(1);
  }
  if (m == 0 || n == 0)
    return;
  int64_t count = 1, strideA = 0, strideB = 0, strideC = 0, outer = 1;
  if (batchRank > 0) {
    count = c.sizes[batchRank - 1];
    strideA = a.strides[batchRank - 1];
    strideB = b.strides[batchRank - 1];
    strideC = c.strides[batchRank - 1];
  }
  for (int64_t d = 0; d + 1 < batchRank; ++d)
    outer *= c.sizes[d];
  if (count == 0 || outer == 0)
    return;
  constexpr int kNoTranspose = 0, kTranspose = 1;
  // cudaDataType and cublasComputeType_t, cublasGemmAlgo_t (library_types.h,
  // cublas_api.h).
  constexpr int kR32F = 0, kR16BF = 14, kCompute32F = 68, kDefaultAlgo = -1;
  const Blas &cublas = blas();
  const float one = 1.0f, zero = 0.0f;
  // beta = 0: cuBLAS does not read c.
  const float *beta = accumulate ? &one : &zero;
  auto gemm = [&](bool transA, bool transB, int64_t rows, int64_t cols,
                  const char *x, int64_t ldx, int64_t strideX, const char *y,
                  int64_t ldy, int64_t strideY, char *z, int64_t ldz) {
    int opA = transA ? kTranspose : kNoTranspose,
        opB = transB ? kTranspose : kNoTranspose;
    if (inputs == GemmInputs::F32)
      return cublas.sgemmStridedBatched(
          cublas.handle, opA, opB, rows, cols, k, &one,
          reinterpret_cast<const float *>(x), ldx, strideX,
          reinterpret_cast<const float *>(y), ldy, strideY, beta,
          reinterpret_cast<float *>(z), ldz, strideC, count);
    return cublas.gemmStridedBatchedEx(
        cublas.handle, opA, opB, rows, cols, k, &one, x, kR16BF, ldx, strideX,
        y, kR16BF, ldy, strideY, beta, z,
        inputs == GemmInputs::BF16ToBF16 ? kR16BF : kR32F, ldz, strideC, count,
        kCompute32F, kDefaultAlgo);
  };
  for (int64_t index = 0; index < outer; ++index) {
    int64_t offsetA = a.offset, offsetB = b.offset, offsetC = c.offset;
    for (int64_t d = batchRank - 2, rest = index; d >= 0; --d) {
      int64_t i = rest % c.sizes[d];
      rest /= c.sizes[d];
      offsetA += i * a.strides[d];
      offsetB += i * b.strides[d];
      offsetC += i * c.strides[d];
    }
    const char *pa =
        reinterpret_cast<const char *>(a.aligned) + offsetA * inputBytes;
    const char *pb =
        reinterpret_cast<const char *>(b.aligned) + offsetB * inputBytes;
    char *pc = reinterpret_cast<char *>(c.aligned) + offsetC * outputBytes;
    int status = lc->transposed
                     ? gemm(!lb->transposed, !la->transposed, n, m, pb, lb->ld,
                            strideB, pa, la->ld, strideA, pc, lc->ld)
                     : gemm(la->transposed, lb->transposed, m, n, pa, la->ld,
                            strideA, pb, lb->ld, strideB, pc, lc->ld);
    if (status != 0) {
      fprintf(stderr,
              "error: CUDA: %s (%lld x %lld x %lld, %lld batches) failed "
              "with status %d\n",
              inputs == GemmInputs::F32 ? "cublasSgemmStridedBatched"
              : inputs == GemmInputs::BF16
                  ? "cublasGemmStridedBatchedEx (bf16)"
                  : "cublasGemmStridedBatchedEx (bf16 into bf16)",
              (long long)m, (long long)n, (long long)k, (long long)count,
              status);
      std::_Exit(1);
    }
  }
  check(driver().streamSynchronize(cublas.stream), "cuStreamSynchronize",
        "a GEMM");
}

} // namespace

/// weft-contractions-to-blas's GEMMs on the GPU: f32, bf16 inputs
/// accumulated in f32, and the same rounded into a bf16 c.
extern "C" void weft_cuda_gemm_f32(int64_t rankA, void *descA, int64_t rankB,
                                   void *descB, int64_t rankC, void *descC,
                                   int64_t accumulate) {
  cudaGemm(GemmInputs::F32, rankA, descA, rankB, descB, rankC, descC,
           accumulate != 0);
}

extern "C" void weft_cuda_gemm_bf16(int64_t rankA, void *descA, int64_t rankB,
                                    void *descB, int64_t rankC, void *descC,
                                    int64_t accumulate) {
  cudaGemm(GemmInputs::BF16, rankA, descA, rankB, descB, rankC, descC,
           accumulate != 0);
}

extern "C" void weft_cuda_gemm_bf16_bf16(int64_t rankA, void *descA,
                                         int64_t rankB, void *descB,
                                         int64_t rankC, void *descC,
                                         int64_t accumulate) {
  cudaGemm(GemmInputs::BF16ToBF16, rankA, descA, rankB, descB, rankC, descC,
           accumulate != 0);
}

std::unique_ptr<weft::runtime::Device>
weft::runtime::createCudaDevice(std::string &error) {
  const Driver *loaded = loadDriver(error);
  if (!loaded)
    return nullptr;
  return std::make_unique<CudaDevice>(*loaded);
}

// The driver for the runtime's other GPU libraries (CudaDriver.h).

weft::runtime::cuda::Stream weft::runtime::cuda::createStream() {
  CUstream stream = nullptr;
  check(driver().streamCreate(&stream, /*CU_STREAM_NON_BLOCKING=*/1),
        "cuStreamCreate");
  return stream;
}

void weft::runtime::cuda::synchronize(Stream stream, const char *subject) {
  check(driver().streamSynchronize(static_cast<CUstream>(stream)),
        "cuStreamSynchronize", subject);
}

void *weft::runtime::cuda::allocate(size_t bytes, const char *subject) {
  CUdeviceptr pointer = 0;
  check(driver().memAlloc(&pointer, bytes ? bytes : 1), "cuMemAlloc", subject);
  return reinterpret_cast<void *>(pointer);
}

void weft::runtime::cuda::deallocate(void *pointer) {
  check(driver().memFree(CUdeviceptr(pointer)), "cuMemFree");
}

void weft::runtime::cuda::fill32(void *pointer, unsigned value, size_t count,
                                 Stream stream) {
  check(driver().memsetD32Async(CUdeviceptr(pointer), value, count,
                                static_cast<CUstream>(stream)),
        "cuMemsetD32Async");
}

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
  check(driver().launchKernel(static_cast<CUfunction>(function), gridX, gridY,
                              gridZ, blockX, blockY, blockZ, sharedBytes,
                              static_cast<CUstream>(stream), params, extra),
        "cuLaunchKernel");
}

void *mgpuStreamCreate() {
  CUstream stream = nullptr;
  check(driver().streamCreate(&stream, /*CU_STREAM_NON_BLOCKING=*/1),
        "cuStreamCreate");
  return stream;
}

void mgpuStreamDestroy(void *stream) {
  check(driver().streamDestroy(static_cast<CUstream>(stream)),
        "cuStreamDestroy");
}

void mgpuStreamSynchronize(void *stream) {
  check(driver().streamSynchronize(static_cast<CUstream>(stream)),
        "cuStreamSynchronize");
}

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
}

void mgpuEventRecord(void *event, void *stream) {
  check(driver().eventRecord(static_cast<CUevent>(event),
                             static_cast<CUstream>(stream)),
        "cuEventRecord");
}

void *mgpuMemAlloc(uint64_t bytes, void * /*stream*/, bool hostShared) {
  if (hostShared) {
    fprintf(stderr, "error: CUDA: host-shared allocations (gpu.alloc "
                    "host_shared) are not supported by Weft's runtime\n");
    std::_Exit(1);
  }
  CUdeviceptr pointer = 0;
  check(driver().memAlloc(&pointer, bytes ? bytes : 1), "cuMemAlloc");
  return reinterpret_cast<void *>(pointer);
}

void mgpuMemFree(void *pointer, void * /*stream*/) {
  check(driver().memFree(CUdeviceptr(pointer)), "cuMemFree");
}

void mgpuMemcpy(void *destination, void *source, size_t bytes, void *stream) {
  check(driver().memcpyAsync(CUdeviceptr(destination), CUdeviceptr(source),
                             bytes, static_cast<CUstream>(stream)),
        "cuMemcpyAsync");
}

void mgpuMemset32(void *destination, unsigned value, size_t count,
                  void *stream) {
  check(driver().memsetD32Async(CUdeviceptr(destination), value, count,
                                static_cast<CUstream>(stream)),
        "cuMemsetD32Async");
}

void mgpuMemset16(void *destination, unsigned short value, size_t count,
                  void *stream) {
  check(driver().memsetD16Async(CUdeviceptr(destination), value, count,
                                static_cast<CUstream>(stream)),
        "cuMemsetD16Async");
}

void mgpuSetDefaultDevice(int32_t device) {
  if (device != 0) {
    fprintf(stderr,
            "error: CUDA: Weft's runtime runs on device 0 only, "
            "not %d\n",
            device);
    std::_Exit(1);
  }
}

} // extern "C"
