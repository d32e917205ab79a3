//===- CublasLt.cpp - The CUDA backend's GEMMs through cuBLASLt -----------===//
//
// weft-contractions-to-blas hands each GEMM to weft_cuda_gemm_* (Contract.h:
// gemm(a, b, c, bias, aux, flags)). cuBLASLt is loaded with dlopen at the
// first GEMM, like the driver, and runs on the compute stream: a GEMM is
// queued in order with the kernels around it, and nothing waits for it.
//
//===----------------------------------------------------------------------===//

#include "core/StridedView.h"
#include "cuda/CudaDriver.h"

#include "weft/runtime/Contract.h"
#include "weft/runtime/GemmLayout.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace weft::runtime::cuda;

namespace {

/// cuBLASLt's entry points (its ABI; the toolkit's headers are not needed).
struct BlasLt {
  using Handle = struct cublasLtContext *;
  using Desc = void *;   // cublasLtMatmulDesc_t
  using Layout = void *; // cublasLtMatrixLayout_t
  using Preference = void *;
  struct Algo {
    uint64_t data[8];
  };
  struct Heuristic {
    Algo algo;
    size_t workspaceSize;
    int state;
    float wavesCount;
    int reserved[4];
  };
  int (*create)(Handle *);
  int (*descCreate)(Desc *, int computeType, int scaleType);
  int (*descDestroy)(Desc);
  int (*descSetAttribute)(Desc, int, const void *, size_t);
  int (*layoutCreate)(Layout *, int type, uint64_t rows, uint64_t cols,
                      int64_t ld);
  int (*layoutDestroy)(Layout);
  int (*layoutSetAttribute)(Layout, int, const void *, size_t);
  int (*preferenceCreate)(Preference *);
  int (*preferenceDestroy)(Preference);
  int (*preferenceSetAttribute)(Preference, int, const void *, size_t);
  int (*algoGetHeuristic)(Handle, Desc, Layout, Layout, Layout, Layout,
                          Preference, int, Heuristic *, int *);
  int (*matmul)(Handle, Desc, const void *alpha, const void *a, Layout,
                const void *b, Layout, const void *beta, const void *c, Layout,
                void *d, Layout, const Algo *, void *workspace,
                size_t workspaceBytes, CUstream);
  Handle handle = nullptr;
  /// Scratch for the kernels cuBLASLt picks: 32 MiB, what NVIDIA advises on
  /// Hopper.
  void *workspace = nullptr;
  static constexpr size_t kWorkspaceBytes = 32u << 20;
};

/// cuBLASLt with a handle and a workspace of its own, loaded at
/// the first GEMM.
const BlasLt &blasLt() {
  static BlasLt loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    driver(); // the context, current on this thread
    // On the library path, else in the toolkit.
    std::string toolkit =
        getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    void *library = nullptr;
    for (const std::string &name :
         {std::string("libcublasLt.so.13"), std::string("libcublasLt.so.12"),
          toolkit + "/lib64/libcublasLt.so.13",
          toolkit + "/lib64/libcublasLt.so.12"})
      if ((library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
    auto fail = [](const std::string &why) {
      fprintf(stderr, "error: CUDA: %s\n", why.c_str());
      fflush(nullptr);
      std::_Exit(1);
    };
    if (!library)
      fail("cuBLASLt (libcublasLt.so.13) cannot be loaded: put its directory "
           "on LD_LIBRARY_PATH");
    auto bind = [&](auto &entry, const char *name) {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
          dlsym(library, name));
      if (!entry)
        fail(std::string("cuBLASLt has no ") + name);
    };
    bind(loaded.create, "cublasLtCreate");
    bind(loaded.descCreate, "cublasLtMatmulDescCreate");
    bind(loaded.descDestroy, "cublasLtMatmulDescDestroy");
    bind(loaded.descSetAttribute, "cublasLtMatmulDescSetAttribute");
    bind(loaded.layoutCreate, "cublasLtMatrixLayoutCreate");
    bind(loaded.layoutDestroy, "cublasLtMatrixLayoutDestroy");
    bind(loaded.layoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
    bind(loaded.preferenceCreate, "cublasLtMatmulPreferenceCreate");
    bind(loaded.preferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    bind(loaded.preferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    bind(loaded.algoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    bind(loaded.matmul, "cublasLtMatmul");
    if (int status = loaded.create(&loaded.handle))
      fail("cublasLtCreate failed with status " + std::to_string(status));
    loaded.workspace = weft::runtime::cuda::allocate(BlasLt::kWorkspaceBytes,
                                                     "cuBLASLt's workspace");
  });
  return loaded;
}

/// The GEMMs weft-contractions-to-blas calls: f32; bf16 inputs into an f32
/// c; bf16 inputs into a bf16 c (f32 accumulation, rounded once).
enum class GemmInputs { F32, BF16, F16, BF16ToBF16 };

/// cublasLtEpilogue_t (cublasLt.h).
constexpr uint32_t kEpilogueDefault = 1, kEpilogueBias = 4,
                   kEpilogueBiasGradientA = 256, kEpilogueGeluAux = 32 | 128,
                   kEpilogueGeluAuxBias = 32 | 128 | 4,
                   kEpilogueGeluGradient = 64 | 128;

/// One cuBLASLt matmul, column-major: d = op(x) op(y) (+ d), with
/// `epilogue` (the bias added to each row of d, or the bias's gradient:
/// each row of op(x) summed; GELU with its input stored in an aux matrix of
/// leading dimension `auxLd`, or GELU's gradient at that input), `count`
/// matrices `stride*` elements apart,
/// its pointers aligned to `align*` bytes (at most 256: what the heuristic
/// assumes unless told less).
struct LtMatmul {
  int inputType, outputType, computeType;
  bool transX, transY;
  uint32_t epilogue = kEpilogueDefault;
  int64_t rows, cols, inner;
  int64_t ldx, ldy, ldz;
  int64_t strideX, strideY, strideZ, count;
  int64_t auxLd = 0;
  uint32_t alignX = 256, alignY = 256, alignZ = 256, alignBias = 256,
           alignAux = 256;

  auto key() const {
    return std::make_tuple(inputType, outputType, computeType, transX, transY,
                           epilogue, rows, cols, inner, ldx, ldy, ldz, strideX,
                           strideY, strideZ, count, auxLd, alignX, alignY,
                           alignZ, alignBias, alignAux);
  }
};

/// The alignment of `pointer`: its largest power-of-two divisor, up to 256.
uint32_t alignmentOf(const void *pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}

/// Fails the run with one line naming the GEMM.
[[noreturn]] void failGemm(const char *what, int status, const LtMatmul &mm) {
  fprintf(stderr,
          "error: CUDA: %s failed with status %d (a %lld x %lld x %lld GEMM, "
          "%lld batches)\n",
          what, status, (long long)mm.rows, (long long)mm.cols,
          (long long)mm.inner, (long long)mm.count);
  fflush(nullptr);
  std::_Exit(1);
}

/// The descriptors of a matmul and the algorithm cuBLASLt's heuristic
/// chose for it, made once per shape.
struct LtPlan {
  BlasLt::Desc desc = nullptr;
  BlasLt::Layout x = nullptr, y = nullptr, z = nullptr;
  BlasLt::Algo algo{};
};

/// The plan of `mm`, made once; null where `optional` and cuBLASLt has no
/// algorithm for it (an epilogue it does not fuse there), else the run ends
/// with one line.
const LtPlan *planFor(const LtMatmul &mm, const void *biasPointer,
                      const void *auxPointer = nullptr, bool optional = false) {
  static std::map<decltype(mm.key()), LtPlan> plans;
  static std::mutex guard;
  std::lock_guard<std::mutex> lock(guard);
  auto [it, inserted] = plans.try_emplace(mm.key());
  LtPlan &plan = it->second;
  if (!inserted)
    return plan.desc ? &plan : nullptr;
  const BlasLt &lt = blasLt();
  // cudaDataType (library_types.h) and the enums of cublasLt.h.
  constexpr int kR32F = 0;
  constexpr int kTransA = 3, kTransB = 4, kEpilogue = 7, kBiasPointer = 8,
                kAuxPointer = 11, kAuxLd = 12, kBatchCount = 5,
                kStridedBatchOffset = 6, kMaxWorkspaceBytes = 1,
                kMinAlignmentA = 5, kMinAlignmentB = 6, kMinAlignmentC = 7,
                kMinAlignmentD = 8;
  auto ok = [&](int status, const char *what) {
    if (status != 0)
      failGemm(what, status, mm);
  };
  ok(lt.descCreate(&plan.desc, mm.computeType, kR32F),
     "cublasLtMatmulDescCreate");
  int32_t opX = mm.transX, opY = mm.transY; // CUBLAS_OP_N = 0, _T = 1
  ok(lt.descSetAttribute(plan.desc, kTransA, &opX, sizeof opX),
     "cublasLtMatmulDescSetAttribute (TRANSA)");
  ok(lt.descSetAttribute(plan.desc, kTransB, &opY, sizeof opY),
     "cublasLtMatmulDescSetAttribute (TRANSB)");
  if (mm.epilogue != kEpilogueDefault) {
    // Of D's type, one per row of the column-major D (each column of the
    // row-major c); the heuristic reads the pointer's alignment (each call
    // sets its own pointer).
    ok(lt.descSetAttribute(plan.desc, kEpilogue, &mm.epilogue,
                           sizeof mm.epilogue),
       "cublasLtMatmulDescSetAttribute (EPILOGUE)");
    if (biasPointer)
      ok(lt.descSetAttribute(plan.desc, kBiasPointer, &biasPointer,
                             sizeof biasPointer),
         "cublasLtMatmulDescSetAttribute (BIAS_POINTER)");
    // Of D's type (the default AUX_DATA_TYPE), laid out as D.
    if (auxPointer) {
      ok(lt.descSetAttribute(plan.desc, kAuxPointer, &auxPointer,
                             sizeof auxPointer),
         "cublasLtMatmulDescSetAttribute (EPILOGUE_AUX_POINTER)");
      ok(lt.descSetAttribute(plan.desc, kAuxLd, &mm.auxLd, sizeof mm.auxLd),
         "cublasLtMatmulDescSetAttribute (EPILOGUE_AUX_LD)");
    }
  }
  // A layout is of the matrix as stored: op() transposes it.
  auto layout = [&](BlasLt::Layout &into, int type, int64_t rows, int64_t cols,
                    int64_t ld, int64_t stride) {
    ok(lt.layoutCreate(&into, type, rows, cols, ld),
       "cublasLtMatrixLayoutCreate");
    int32_t count = int32_t(mm.count);
    ok(lt.layoutSetAttribute(into, kBatchCount, &count, sizeof count),
       "cublasLtMatrixLayoutSetAttribute (BATCH_COUNT)");
    ok(lt.layoutSetAttribute(into, kStridedBatchOffset, &stride, sizeof stride),
       "cublasLtMatrixLayoutSetAttribute (STRIDED_BATCH_OFFSET)");
  };
  layout(plan.x, mm.inputType, mm.transX ? mm.inner : mm.rows,
         mm.transX ? mm.rows : mm.inner, mm.ldx, mm.strideX);
  layout(plan.y, mm.inputType, mm.transY ? mm.cols : mm.inner,
         mm.transY ? mm.inner : mm.cols, mm.ldy, mm.strideY);
  layout(plan.z, mm.outputType, mm.rows, mm.cols, mm.ldz, mm.strideZ);
  BlasLt::Preference preference = nullptr;
  ok(lt.preferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  uint64_t workspaceBytes = BlasLt::kWorkspaceBytes;
  ok(lt.preferenceSetAttribute(preference, kMaxWorkspaceBytes, &workspaceBytes,
                               sizeof workspaceBytes),
     "cublasLtMatmulPreferenceSetAttribute");
  for (auto [attribute, alignment] : {std::pair{kMinAlignmentA, mm.alignX},
                                      std::pair{kMinAlignmentB, mm.alignY},
                                      std::pair{kMinAlignmentC, mm.alignZ},
                                      std::pair{kMinAlignmentD, mm.alignZ}})
    ok(lt.preferenceSetAttribute(preference, attribute, &alignment,
                                 sizeof alignment),
       "cublasLtMatmulPreferenceSetAttribute (MIN_ALIGNMENT)");
  BlasLt::Heuristic best{};
  int found = 0;
  // NOT_SUPPORTED is how cuBLASLt says it fuses no such epilogue here.
  int status = lt.algoGetHeuristic(lt.handle, plan.desc, plan.x, plan.y, plan.z,
                                   plan.z, preference, 1, &best, &found);
  lt.preferenceDestroy(preference);
  if ((status != 0 || found < 1 || best.state != 0) && optional) {
    lt.descDestroy(plan.desc);
    for (BlasLt::Layout layout : {plan.x, plan.y, plan.z})
      lt.layoutDestroy(layout);
    plan = LtPlan();
    return nullptr;
  }
  if (status != 0)
    failGemm("cublasLtMatmulAlgoGetHeuristic", status, mm);
  if (found < 1)
    failGemm("cublasLtMatmulAlgoGetHeuristic (no algorithm)", found, mm);
  if (best.state != 0)
    failGemm("cublasLtMatmulAlgoGetHeuristic", best.state, mm);
  plan.algo = best.algo;
  return &plan;
}

/// Collapses batch dims that step through all three operands evenly
/// (dim d's stride is dim d+1's times its size, in a, b and c): the batch
/// one strided batch wherever the views allow.
int64_t collapseBatch(int64_t batchRank, std::vector<int64_t> &sizes,
                      std::vector<int64_t> (&strides)[3]) {
  // A dim of one matrix steps nowhere, whatever its strides.
  for (int64_t d = batchRank - 1; d >= 0; --d)
    if (sizes[d] == 1 && batchRank > 1) {
      sizes.erase(sizes.begin() + d);
      for (auto &s : strides)
        s.erase(s.begin() + d);
      --batchRank;
    }
  for (int64_t d = batchRank - 2; d >= 0; --d) {
    bool even = sizes[d] * sizes[d + 1] <= INT32_MAX; // cuBLASLt's count
    for (auto &s : strides)
      even &= s[d] == s[d + 1] * sizes[d + 1];
    if (!even)
      continue;
    sizes[d] *= sizes[d + 1];
    for (auto &s : strides)
      s[d] = s[d + 1];
    sizes.erase(sizes.begin() + d + 1);
    for (auto &s : strides)
      s.erase(s.begin() + d + 1);
    --batchRank;
  }
  return batchRank;
}

/// c (+)= a * b on strided views [batch..., rows, cols] whose matrices
/// cuBLASLt reads (the compiler calls only for those, weft::runtime::
/// columnMajorLayout), through cublasLtMatmul: cuBLASLt is column-major,
/// so a row-major c is computed as c^T = b^T a^T. Batch dims that collapse
/// into one are its strided batch; the others (views no GEMM library
/// strides through evenly) a loop of calls. beta = 0 unless kGemmAccumulate
/// (c is then not read); f32 inputs multiply as TF32 under kGemmTf32.
/// Queued on the compute stream, in order with the kernels around it.
void cudaGemm(GemmInputs inputs, int64_t rankA, void *descA, int64_t rankB,
              void *descB, int64_t rankC, void *descC, void *descBias,
              int64_t rankAux, void *descAux, int64_t flags) {
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
    fprintf(stderr, "error: CUDA: a GEMM operand has strides cuBLASLt cannot "
                    "read (weft-contractions-to-blas should have kept it a "
                    "kernel)\n");
    std::_Exit(1);
  }
  std::vector<int64_t> sizes(c.sizes, c.sizes + batchRank);
  std::vector<int64_t> strides[3] = {{a.strides, a.strides + batchRank},
                                     {b.strides, b.strides + batchRank},
                                     {c.strides, c.strides + batchRank}};
  for (int64_t size : sizes)
    if (size == 0)
      return;
  if ((flags & weft::runtime::kGemmBiasGradient) && m == 0 && n > 0) {
    fprintf(stderr, "error: CUDA: a bias gradient of a GEMM with no rows of "
                    "c is not supported\n");
    std::_Exit(1);
  }
  if (m == 0 || n == 0)
    return;
  if (k == 0 &&
      (!(flags & weft::runtime::kGemmAccumulate) ||
       (flags &
        (weft::runtime::kGemmBias | weft::runtime::kGemmBiasGradient |
         weft::runtime::kGemmGelu | weft::runtime::kGemmGeluGradient)))) {
    fprintf(stderr, "error: CUDA: a GEMM over k = 0 that writes c is not "
                    "supported\n");
    std::_Exit(1);
  }
  if (k == 0)
    return;
  batchRank = collapseBatch(batchRank, sizes, strides);
  int64_t count = batchRank > 0 ? sizes[batchRank - 1] : 1;
  if (count > INT32_MAX) {
    fprintf(stderr,
            "error: CUDA: a GEMM of %lld batches (cuBLASLt takes at "
            "most %d)\n",
            (long long)count, INT32_MAX);
    std::_Exit(1);
  }
  int64_t outer = 1;
  for (int64_t d = 0; d + 1 < batchRank; ++d)
    outer *= sizes[d];
  // cudaDataType and cublasComputeType_t (library_types.h, cublas_api.h).
  constexpr int kR32F = 0, kR16F = 2, kR16BF = 14, kCompute32F = 68,
                kCompute32FFastTf32 = 77;
  bool tf32 = inputs == GemmInputs::F32 && (flags & weft::runtime::kGemmTf32);
  LtMatmul mm;
  mm.inputType = inputs == GemmInputs::F32   ? kR32F
                 : inputs == GemmInputs::F16 ? kR16F
                                             : kR16BF;
  mm.outputType = inputs == GemmInputs::BF16ToBF16 ? kR16BF : kR32F;
  mm.computeType = tf32 ? kCompute32FFastTf32 : kCompute32F;
  mm.inner = k;
  mm.count = count;
  int64_t strideA = batchRank > 0 ? strides[0][batchRank - 1] : 0,
          strideB = batchRank > 0 ? strides[1][batchRank - 1] : 0;
  mm.strideZ = batchRank > 0 ? strides[2][batchRank - 1] : 0;
  // c^T = b^T a^T where c is row-major; else c = a b.
  bool swap = lc->transposed;
  if (swap) {
    mm.transX = !lb->transposed, mm.transY = !la->transposed;
    mm.rows = n, mm.cols = m;
    mm.ldx = lb->ld, mm.ldy = la->ld;
    mm.strideX = strideB, mm.strideY = strideA;
  } else {
    mm.transX = la->transposed, mm.transY = lb->transposed;
    mm.rows = m, mm.cols = n;
    mm.ldx = la->ld, mm.ldy = lb->ld;
    mm.strideX = strideA, mm.strideY = strideB;
  }
  mm.ldz = lc->ld;
  // The bias epilogue adds to each row of the column-major D (c's columns,
  // c row-major: weft/runtime/Contract.h); the bias-gradient epilogue sums
  // each row of op(x) = b^T over k, of a GEMM of one matrix.
  bool biased = flags & weft::runtime::kGemmBias,
       gradient = flags & weft::runtime::kGemmBiasGradient;
  char *biasPointer = nullptr;
  if (biased || gradient) {
    View bias = weft::runtime::viewOf(1, descBias);
    if (!swap || bias.sizes[0] != n || bias.strides[0] != 1 ||
        (biased && gradient) || (gradient && (rankC != 2 || m == 0))) {
      fprintf(stderr, "error: CUDA: a GEMM's bias (or bias gradient) is not "
                      "a contiguous vector as long as the rows of its one "
                      "row-major c\n");
      std::_Exit(1);
    }
    mm.epilogue = biased ? kEpilogueBias : kEpilogueBiasGradientA;
    biasPointer =
        reinterpret_cast<char *>(bias.aligned) + bias.offset * outputBytes;
    mm.alignBias = alignmentOf(biasPointer);
  }
  // GELU (after the bias) storing its input in aux, or GELU's gradient at
  // aux: a matrix laid out as c (weft/runtime/Contract.h).
  bool gelu = flags & weft::runtime::kGemmGelu,
       geluGradient = flags & weft::runtime::kGemmGeluGradient;
  char *auxPointer = nullptr;
  if (gelu || geluGradient) {
    View aux = weft::runtime::viewOf(rankAux, descAux);
    const char *refusal = weft::runtime::geluEpilogueRefusal(
        flags, rankC, n, c.strides[rankC - 1] == 1 ? c.strides[rankC - 2] : -1,
        outputBytes);
    if (!refusal)
      refusal = weft::runtime::geluAuxRefusal(rankC, c.sizes, c.strides[0],
                                              rankAux, aux.sizes, aux.strides);
    // Laid out as c, row-major (the refusal says so): computed as c^T.
    if (!refusal && !swap)
      refusal = "needs a row-major c";
    if (refusal) {
      fprintf(stderr, "error: CUDA: a GEMM's GELU epilogue %s\n", refusal);
      std::_Exit(1);
    }
    mm.epilogue = geluGradient ? kEpilogueGeluGradient
                  : biased     ? kEpilogueGeluAuxBias
                               : kEpilogueGeluAux;
    mm.auxLd = aux.strides[0];
    auxPointer =
        reinterpret_cast<char *>(aux.aligned) + aux.offset * outputBytes;
    mm.alignAux = alignmentOf(auxPointer);
  }
  const BlasLt &lt = blasLt();
  CUstream stream = static_cast<CUstream>(computeStream());
  const float one = 1.0f, zero = 0.0f;
  const float *beta = (flags & weft::runtime::kGemmAccumulate) ? &one : &zero;
  // Each matrix's pointers and plan first: the profile times the GPU's
  // work, not the host's lookups.
  struct Call {
    const char *x, *y;
    char *z;
    const LtPlan *plan;
  };
  std::vector<Call> calls;
  for (int64_t index = 0; index < outer; ++index) {
    int64_t offsetA = a.offset, offsetB = b.offset, offsetC = c.offset;
    for (int64_t d = batchRank - 2, rest = index; d >= 0; --d) {
      int64_t i = rest % sizes[d];
      rest /= sizes[d];
      offsetA += i * strides[0][d];
      offsetB += i * strides[1][d];
      offsetC += i * strides[2][d];
    }
    const char *pa =
        reinterpret_cast<const char *>(a.aligned) + offsetA * inputBytes;
    const char *pb =
        reinterpret_cast<const char *>(b.aligned) + offsetB * inputBytes;
    char *pc = reinterpret_cast<char *>(c.aligned) + offsetC * outputBytes;
    const char *px = swap ? pb : pa, *py = swap ? pa : pb;
    mm.alignX = alignmentOf(px);
    mm.alignY = alignmentOf(py);
    mm.alignZ = alignmentOf(pc);
    const LtPlan *plan =
        planFor(mm, biasPointer, auxPointer, /*optional=*/gradient);
    if (!plan) {
      // No fused bias gradient for this GEMM: the plain GEMM, then the sums
      // as a GEMM of b^T with a vector of ones.
      mm.epilogue = kEpilogueDefault;
      plan = planFor(mm, nullptr);
    }
    calls.push_back({px, py, pc, plan});
  }
  std::optional<LtMatmul> sums;
  const LtPlan *sumsPlan = nullptr;
  void *ones = nullptr;
  if (gradient && mm.epilogue == kEpilogueDefault) {
    sums = mm;
    sums->computeType = kCompute32F; // summed in f32, TF32 allowed or not
    sums->cols = 1;
    sums->transY = false;
    sums->ldy = k;
    sums->ldz = n;
    sums->strideY = sums->strideZ = 0;
    sums->outputType = mm.outputType;
    sums->alignY = 256;
    sums->alignZ = mm.alignBias;
    sumsPlan = planFor(*sums, nullptr);
    // k ones of the inputs' type, in 32-bit words (two bf16 ones a word).
    int64_t words = (k * inputBytes + 3) / 4;
    ones = weft::runtime::cuda::allocate(words * 4, "a bias gradient's ones");
    weft::runtime::cuda::fill32(ones,
                                inputBytes == 4             ? 0x3f800000u
                                : inputs == GemmInputs::F16 ? 0x3c003c00u
                                                            : 0x3f803f80u,
                                size_t(words), stream);
  }
  profiled(stream, [&] {
    for (const Call &call : calls) {
      const LtPlan &plan = *call.plan;
      // The descriptor is shared by the calls of this shape (GEMMs run from
      // one host thread at a time).
      if (mm.epilogue != kEpilogueDefault && biasPointer)
        if (int status = lt.descSetAttribute(plan.desc, /*BIAS_POINTER=*/8,
                                             &biasPointer, sizeof biasPointer))
          failGemm("cublasLtMatmulDescSetAttribute (BIAS_POINTER)", status, mm);
      if (mm.epilogue != kEpilogueDefault && auxPointer)
        if (int status =
                lt.descSetAttribute(plan.desc, /*EPILOGUE_AUX_POINTER=*/11,
                                    &auxPointer, sizeof auxPointer))
          failGemm("cublasLtMatmulDescSetAttribute (EPILOGUE_AUX_POINTER)",
                   status, mm);
      if (int status = lt.matmul(lt.handle, plan.desc, &one, call.x, plan.x,
                                 call.y, plan.y, beta, call.z, plan.z, call.z,
                                 plan.z, &plan.algo, lt.workspace,
                                 BlasLt::kWorkspaceBytes, stream))
        failGemm("cublasLtMatmul", status, mm);
    }
    if (sums)
      if (int status =
              lt.matmul(lt.handle, sumsPlan->desc, &one, calls.front().x,
                        sumsPlan->x, ones, sumsPlan->y, &zero, biasPointer,
                        sumsPlan->z, biasPointer, sumsPlan->z, &sumsPlan->algo,
                        lt.workspace, BlasLt::kWorkspaceBytes, stream))
        failGemm("cublasLtMatmul (a bias gradient's sums)", status, *sums);
  });
  queued();
  deviceStats().launches += calls.size() + (sums ? 1 : 0);
  if (ones)
    weft::runtime::cuda::deallocate(ones);
}

} // namespace

/// weft-contractions-to-blas's GEMMs on the GPU: f32, bf16 or fp16 inputs
/// accumulated in f32, and bf16's rounded into a bf16 c.
extern "C" void weft_cuda_gemm_f32(int64_t rankA, void *descA, int64_t rankB,
                                   void *descB, int64_t rankC, void *descC,
                                   int64_t, void *descBias, int64_t rankAux,
                                   void *descAux, int64_t flags) {
  cudaGemm(GemmInputs::F32, rankA, descA, rankB, descB, rankC, descC, descBias,
           rankAux, descAux, flags);
}

extern "C" void weft_cuda_gemm_bf16(int64_t rankA, void *descA, int64_t rankB,
                                    void *descB, int64_t rankC, void *descC,
                                    int64_t, void *descBias, int64_t rankAux,
                                    void *descAux, int64_t flags) {
  cudaGemm(GemmInputs::BF16, rankA, descA, rankB, descB, rankC, descC, descBias,
           rankAux, descAux, flags);
}

extern "C" void weft_cuda_gemm_f16(int64_t rankA, void *descA, int64_t rankB,
                                   void *descB, int64_t rankC, void *descC,
                                   int64_t, void *descBias, int64_t rankAux,
                                   void *descAux, int64_t flags) {
  cudaGemm(GemmInputs::F16, rankA, descA, rankB, descB, rankC, descC, descBias,
           rankAux, descAux, flags);
}

extern "C" void weft_cuda_gemm_bf16_bf16(int64_t rankA, void *descA,
                                         int64_t rankB, void *descB,
                                         int64_t rankC, void *descC, int64_t,
                                         void *descBias, int64_t rankAux,
                                         void *descAux, int64_t flags) {
  cudaGemm(GemmInputs::BF16ToBF16, rankA, descA, rankB, descB, rankC, descC,
           descBias, rankAux, descAux, flags);
}
