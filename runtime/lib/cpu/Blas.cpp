//===- Blas.cpp - GEMM calls emitted by weft-contractions-to-blas ---------===//
//
// c[batch.., m, n] (+)= a[batch.., m, k] * b[batch.., k, n] on strided
// views, a and b f32 or bf16 (widened first), c f32: accumulated into c, or
// written over it (beta = 0: c is not read). The contract's flags are in
// weft/runtime/Contract.h.
// Each matrix goes to cblas_sgemm when one of its two dims is contiguous
// (row-major as it is, or as a transpose); otherwise a plain loop runs.
// Compiled with -fopenmp; executables link LLVM's libomp, which also
// implements the GNU OpenMP entry points that g++ emits.
//
//===----------------------------------------------------------------------===//

#include "weft/runtime/Blas.h"
#include "weft/runtime/Contract.h"
#include "weft/runtime/Gelu.h"

#include "core/Bf16.h"
#include "core/StridedView.h"
#include "weft/runtime/Device.h"

#include <algorithm>
#include <cblas.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <strings.h>
#include <unistd.h>
#include <vector>

using weft::runtime::View;
using weft::runtime::viewOf;

namespace {

/// How a matrix with strides (row, col) is handed to BLAS.
bool blasLayout(int64_t rowStride, int64_t colStride, int64_t rows,
                int64_t cols, CBLAS_TRANSPOSE &trans, int64_t &ld) {
  if (colStride == 1 && rowStride >= std::max<int64_t>(cols, 1)) {
    trans = CblasNoTrans;
    ld = rowStride;
    return true;
  }
  if (rowStride == 1 && colStride >= std::max<int64_t>(rows, 1)) {
    trans = CblasTrans;
    ld = colStride;
    return true;
  }
  return false;
}

/// One GEMM block: rows [r0, r1) and columns [c0, c1) of one batch.
void gemmBlock(bool blas, CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB,
               int64_t lda, int64_t ldb, const View &a, const View &b,
               const View &c, int64_t batchRank, const float *pa,
               const float *pb, float *pc, int64_t r0, int64_t r1, int64_t c0,
               int64_t c1, int64_t k, bool accumulate) {
  int64_t aRow = a.strides[batchRank], aCol = a.strides[batchRank + 1];
  int64_t bRow = b.strides[batchRank], bCol = b.strides[batchRank + 1];
  int64_t cRow = c.strides[batchRank], cCol = c.strides[batchRank + 1];
  if (r0 >= r1 || c0 >= c1)
    return;
  if (blas) {
    cblas_sgemm(CblasRowMajor, transA, transB, r1 - r0, c1 - c0, k, 1.0f,
                pa + r0 * aRow, lda, pb + c0 * bCol, ldb,
                accumulate ? 1.0f : 0.0f, pc + r0 * cRow + c0, cRow);
    return;
  }
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = c0; j < c1; ++j) {
      float acc = accumulate ? pc[i * cRow + j * cCol] : 0.0f;
      for (int64_t p = 0; p < k; ++p)
        acc += pa[i * aRow + p * aCol] * pb[p * bRow + j * bCol];
      pc[i * cRow + j * cCol] = acc;
    }
}

/// OpenBLAS runs single-threaded (the runner sets it): the threads are
/// OpenMP's, shared with the compiled loops, so the two pools never spin
/// against each other. Work is split over batches, or else over the larger
/// of the rows and columns.
void gemm(const View &a, const View &b, const View &c, int64_t rankC,
          bool accumulate) {
  int64_t batchRank = rankC - 2;
  int64_t m = c.sizes[batchRank], n = c.sizes[batchRank + 1],
          k = a.sizes[batchRank + 1];
  int64_t batches = 1;
  for (int64_t d = 0; d < batchRank; ++d)
    batches *= c.sizes[d];
  CBLAS_TRANSPOSE transA = CblasNoTrans, transB = CblasNoTrans;
  int64_t lda = 0, ldb = 0;
  bool blas = c.strides[batchRank + 1] == 1 && c.strides[batchRank] >= n &&
              blasLayout(a.strides[batchRank], a.strides[batchRank + 1], m, k,
                         transA, lda) &&
              blasLayout(b.strides[batchRank], b.strides[batchRank + 1], k, n,
                         transB, ldb);
  auto batchPointers = [&](int64_t batch, const float *&pa, const float *&pb,
                           float *&pc) {
    pa = a.aligned + a.offset;
    pb = b.aligned + b.offset;
    pc = c.aligned + c.offset;
    for (int64_t d = batchRank - 1; d >= 0; --d) {
      int64_t i = batch % c.sizes[d];
      batch /= c.sizes[d];
      pa += i * a.strides[d];
      pb += i * b.strides[d];
      pc += i * c.strides[d];
    }
  };
  int threads = omp_get_max_threads();
  if (batches >= threads) {
#pragma omp parallel for schedule(static)
    for (int64_t batch = 0; batch < batches; ++batch) {
      const float *pa, *pb;
      float *pc;
      batchPointers(batch, pa, pb, pc);
      gemmBlock(blas, transA, transB, lda, ldb, a, b, c, batchRank, pa, pb, pc,
                0, m, 0, n, k, accumulate);
    }
    return;
  }
  for (int64_t batch = 0; batch < batches; ++batch) {
    const float *pa, *pb;
    float *pc;
    batchPointers(batch, pa, pb, pc);
    bool splitRows = m >= n;
    int64_t extent = splitRows ? m : n;
    int64_t chunk = (extent + threads - 1) / threads;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < threads; ++t) {
      int64_t lo = t * chunk, hi = std::min(extent, lo + chunk);
      if (splitRows)
        gemmBlock(blas, transA, transB, lda, ldb, a, b, c, batchRank, pa, pb,
                  pc, lo, hi, 0, n, k, accumulate);
      else
        gemmBlock(blas, transA, transB, lda, ldb, a, b, c, batchRank, pa, pb,
                  pc, 0, m, lo, hi, k, accumulate);
    }
  }
}

/// An operand copied into f32 (a bf16 one widened exactly, an f32 one
/// rounded to TF32): the same sizes, contiguous strides, a broadcast dim
/// (stride 0) kept broadcast.
struct Widened {
  std::vector<float> data;
  std::vector<int64_t> strides;
  View view;
};

/// Where element `e` (row-major over the sizes, broadcast dims skipped) of
/// a copy lies in the view `narrow`.
int64_t narrowIndex(const View &narrow, int64_t rank, int64_t e) {
  int64_t index = narrow.offset;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (narrow.strides[d] == 0)
      continue;
    index += (e % narrow.sizes[d]) * narrow.strides[d];
    e /= narrow.sizes[d];
  }
  return index;
}

/// `read`: its values, each `element(i)` for the element at index i of the
/// view; else only its shape (an output the GEMM overwrites).
template <typename Element>
Widened copyOf(int64_t rank, void *descriptor, bool read, Element element) {
  View narrow = viewOf(rank, descriptor);
  Widened wide;
  wide.strides.assign(rank, 0);
  int64_t elements = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (narrow.strides[d] == 0)
      continue;
    wide.strides[d] = elements;
    elements *= narrow.sizes[d];
  }
  wide.data.resize(elements);
  if (read) {
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < elements; ++e)
      wide.data[e] = element(narrowIndex(narrow, rank, e));
  }
  wide.view = {wide.data.data(), 0, narrow.sizes, wide.strides.data()};
  return wide;
}

/// A bf16 operand widened.
Widened widen(int64_t rank, void *descriptor, bool read = true) {
  const auto *bits =
      reinterpret_cast<const uint16_t *>(viewOf(rank, descriptor).aligned);
  return copyOf(rank, descriptor, read, [&](int64_t index) {
    return weft::runtime::bf16ToFloat(bits[index]);
  });
}

/// An fp16 operand widened (exactly) to f32.
Widened widenHalf(int64_t rank, void *descriptor) {
  const auto *bits =
      reinterpret_cast<const uint16_t *>(viewOf(rank, descriptor).aligned);
  return copyOf(rank, descriptor, /*read=*/true, [&](int64_t index) {
    return weft::runtime::f16ToFloat(bits[index]);
  });
}

/// An f32 operand as tensor cores read TF32: 10 mantissa bits, rounded to
/// nearest even.
Widened roundToTf32(int64_t rank, void *descriptor) {
  const float *values = viewOf(rank, descriptor).aligned;
  return copyOf(rank, descriptor, /*read=*/true, [&](int64_t index) {
    uint32_t bits;
    std::memcpy(&bits, &values[index], 4);
    if ((bits & 0x7f800000) != 0x7f800000) {
      bits += 0xfff + ((bits >> 13) & 1);
      bits &= ~uint32_t(0x1fff);
    }
    float rounded;
    std::memcpy(&rounded, &bits, 4);
    return rounded;
  });
}

/// Rounds `wide` (as widen made it of the bf16 view `descriptor`) back into
/// that view, to nearest even.
void narrowInto(const Widened &wide, int64_t rank, void *descriptor) {
  View narrow = viewOf(rank, descriptor);
  auto *bits = reinterpret_cast<uint16_t *>(narrow.aligned);
  auto elements = int64_t(wide.data.size());
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < elements; ++e)
    bits[narrowIndex(narrow, rank, e)] =
        weft::runtime::floatToBf16(wide.data[e]);
}

/// Under kGemmBias, c (f32, already holding what the product adds to when
/// it accumulates) gets `biasAt(j)` added to each element of column j: the
/// GEMM then accumulates onto it, each sum in f32 as cuBLASLt's epilogue
/// adds them. Returns whether c is to be accumulated into.
template <typename BiasAt>
bool addBias(const View &c, int64_t rank, int64_t flags, BiasAt biasAt) {
  bool accumulate = flags & weft::runtime::kGemmAccumulate;
  if (!(flags & weft::runtime::kGemmBias))
    return accumulate;
  int64_t width = c.sizes[rank - 1], stride = c.strides[rank - 1], rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d)
    rows *= c.sizes[d];
  std::vector<float> bias(size_t(std::max<int64_t>(width, 0)));
  for (int64_t j = 0; j < width; ++j)
    bias[j] = biasAt(j);
    // Row by row: one index computation per row, the columns a loop the
    // compiler vectorizes.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t start = c.offset, rest = r;
    for (int64_t d = rank - 2; d >= 0; --d) {
      start += (rest % c.sizes[d]) * c.strides[d];
      rest /= c.sizes[d];
    }
    float *row = c.aligned + start;
    if (accumulate)
      for (int64_t j = 0; j < width; ++j)
        row[j * stride] += bias[j];
    else
      for (int64_t j = 0; j < width; ++j)
        row[j * stride] = bias[j];
  }
  return true;
}

/// The sums over k of b [k, n] (one matrix), in f32, into `out` (n
/// floats): a GEMM's bias gradient (kGemmBiasGradient).
void sumColumns(const View &b, int64_t rank, float *out) {
  if (rank != 2) {
    fprintf(stderr, "error: a GEMM's bias gradient needs one matrix, not a "
                    "batch\n");
    std::_Exit(1);
  }
  int64_t k = b.sizes[0], n = b.sizes[1];
  // Columns in tiles of 64, rows in order: a row-major b is read along its
  // rows.
#pragma omp parallel for schedule(static)
  for (int64_t tile = 0; tile < n; tile += 64) {
    int64_t end = std::min(n, tile + 64);
    for (int64_t j = tile; j < end; ++j)
      out[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = tile; j < end; ++j)
        out[j] += b.aligned[b.offset + p * b.strides[0] + j * b.strides[1]];
  }
}

/// The bias vector's elements (weft/runtime/Contract.h: contiguous).
float *biasOf(void *descriptor) {
  View bias = viewOf(1, descriptor);
  return bias.aligned + bias.offset;
}
const uint16_t *bf16BiasOf(void *descriptor) {
  View bias = viewOf(1, descriptor);
  return reinterpret_cast<const uint16_t *>(bias.aligned) + bias.offset;
}

/// Ends the run with one line where the GELU epilogues in `flags` do not
/// apply to c (weft/runtime/Contract.h).
void checkGeluEpilogue(int64_t flags, int64_t rankC, const View &c,
                       int64_t cBytes) {
  if (const char *refusal = weft::runtime::geluEpilogueRefusal(
          flags, rankC, c.sizes[rankC - 1],
          rankC >= 2 && c.strides[rankC - 1] == 1 ? c.strides[rankC - 2] : -1,
          cBytes)) {
    fprintf(stderr, "error: a GEMM's GELU epilogue %s\n", refusal);
    fflush(nullptr);
    std::_Exit(1);
  }
}

/// Inputs widened to f32 (exactly) into an f32 c: the bias gradient's sums
/// of b, the bias onto c, then the f32 GEMM.
void widenedGemm(const Widened &a, const Widened &b, int64_t rankB,
                 int64_t rankC, void *descC, void *descBias, int64_t flags) {
  View c = viewOf(rankC, descC);
  checkGeluEpilogue(flags, rankC, c, 4);
  if (flags & weft::runtime::kGemmBiasGradient)
    sumColumns(b.view, rankB, biasOf(descBias));
  bool accumulate =
      addBias(c, rankC, flags, [&](int64_t j) { return biasOf(descBias)[j]; });
  gemm(a.view, b.view, c, rankC, accumulate);
}

} // namespace

/// f32; under kGemmTf32 the inputs rounded to TF32 first, as a GPU's
/// tensor cores read them (the CPU target never sets it: the emulation
/// does).
extern "C" void weft_gemm_f32(int64_t rankA, void *descA, int64_t rankB,
                              void *descB, int64_t rankC, void *descC, int64_t,
                              void *descBias, int64_t, void *, int64_t flags) {
  View c = viewOf(rankC, descC);
  checkGeluEpilogue(flags, rankC, c, 4);
  if (flags & weft::runtime::kGemmBiasGradient)
    sumColumns(viewOf(rankB, descB), rankB, biasOf(descBias));
  bool accumulate =
      addBias(c, rankC, flags, [&](int64_t j) { return biasOf(descBias)[j]; });
  if (flags & weft::runtime::kGemmTf32) {
    Widened a = roundToTf32(rankA, descA), b = roundToTf32(rankB, descB);
    gemm(a.view, b.view, c, rankC, accumulate);
    return;
  }
  gemm(viewOf(rankA, descA), viewOf(rankB, descB), c, rankC, accumulate);
}

/// bf16 inputs accumulated in f32, as the compiled loop computes them: the
/// inputs widened (exactly), then the f32 GEMM.
extern "C" void weft_gemm_bf16(int64_t rankA, void *descA, int64_t rankB,
                               void *descB, int64_t rankC, void *descC, int64_t,
                               void *descBias, int64_t, void *, int64_t flags) {
  widenedGemm(widen(rankA, descA), widen(rankB, descB), rankB, rankC, descC,
              descBias, flags);
}

/// fp16 inputs accumulated in f32, as bf16's are.
extern "C" void weft_gemm_f16(int64_t rankA, void *descA, int64_t rankB,
                              void *descB, int64_t rankC, void *descC, int64_t,
                              void *descBias, int64_t, void *, int64_t flags) {
  widenedGemm(widenHalf(rankA, descA), widenHalf(rankB, descB), rankB, rankC,
              descC, descBias, flags);
}

/// bf16 inputs accumulated in f32 and rounded once into a bf16 c (a GEMM
/// that writes its inputs' type, as cuBLAS does with a bf16 c): c widened
/// where the product adds to it (else only allocated), the bf16 bias
/// widened onto it, the f32 GEMM, then c rounded; a bias gradient summed
/// in f32 and rounded.
extern "C" void weft_gemm_bf16_bf16(int64_t rankA, void *descA, int64_t rankB,
                                    void *descB, int64_t rankC, void *descC,
                                    int64_t, void *descBias, int64_t rankAux,
                                    void *descAux, int64_t flags) {
  checkGeluEpilogue(flags, rankC, viewOf(rankC, descC), 2);
  Widened a = widen(rankA, descA), b = widen(rankB, descB);
  if (flags & weft::runtime::kGemmBiasGradient) {
    std::vector<float> sums(size_t(b.view.sizes[rankB - 1]));
    sumColumns(b.view, rankB, sums.data());
    View bias = viewOf(1, descBias);
    auto *bits = reinterpret_cast<uint16_t *>(bias.aligned) + bias.offset;
    for (size_t j = 0; j < sums.size(); ++j)
      bits[j] = weft::runtime::floatToBf16(sums[j]);
  }
  Widened c = widen(rankC, descC,
                    /*read=*/flags & weft::runtime::kGemmAccumulate);
  bool accumulate = addBias(c.view, rankC, flags, [&](int64_t j) {
    return weft::runtime::bf16ToFloat(bf16BiasOf(descBias)[j]);
  });
  gemm(a.view, b.view, c.view, rankC, accumulate);
  if (flags & (weft::runtime::kGemmGelu | weft::runtime::kGemmGeluGradient)) {
    View cView = viewOf(rankC, descC), aux = viewOf(rankAux, descAux);
    if (const char *refusal =
            weft::runtime::geluAuxRefusal(rankC, cView.sizes, cView.strides[0],
                                          rankAux, aux.sizes, aux.strides)) {
      fprintf(stderr, "error: a GEMM's GELU epilogue %s\n", refusal);
      fflush(nullptr);
      std::_Exit(1);
    }
    auto *auxBits = reinterpret_cast<uint16_t *>(aux.aligned);
    auto elements = int64_t(c.data.size());
    bool forward = flags & weft::runtime::kGemmGelu;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < elements; ++e) {
      uint16_t &stored = auxBits[narrowIndex(aux, rankAux, e)];
      float &sum = c.data[e];
      if (forward) {
        stored = weft::runtime::floatToBf16(sum);
        sum = weft::runtime::geluTanh(sum);
      } else {
        sum *= weft::runtime::geluTanhDerivative(
            weft::runtime::bf16ToFloat(stored));
      }
    }
  }
  narrowInto(c, rankC, descC);
}

extern "C" char *openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int threads);

namespace weft::runtime {

void selectBlasKernels(char **argv) {
  if (getenv("OPENBLAS_CORETYPE"))
    return;
  const char *core = openblas_get_corename();
  if (!core || strcasecmp(core, "prescott") != 0)
    return;
  const char *better = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                         : nullptr;
  if (!better)
    return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv); // returns only on failure: run as we are
}

void prepareCpuProcess(char **argv) {
  selectBlasKernels(argv);
  openblas_set_num_threads(1);
}

namespace {
[[maybe_unused]] const BackendRegistration registration{
    {kCpuDevice, [](std::string &) { return createCpuDevice(); },
     prepareCpuProcess}};
} // namespace

} // namespace weft::runtime
