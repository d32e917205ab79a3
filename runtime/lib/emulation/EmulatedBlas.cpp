//===- EmulatedBlas.cpp - Test tool: the emulated device's cuBLAS ---------===//
//
// Under weftc --target=cuda-emulation a GEMM that the CUDA target hands to
// cuBLAS runs on the CPU runtime's BLAS, after the checks a GPU would fail
// without: each operand inside its device allocation, and a matrix cuBLAS
// reads.
//
//===----------------------------------------------------------------------===//

#include "core/StridedView.h"
#include "emulation/DeviceAllocations.h"

#include "weft/runtime/Contract.h"
#include "weft/runtime/GemmLayout.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

extern "C" void weft_gemm_f32(int64_t rankA, void *descA, int64_t rankB,
                              void *descB, int64_t rankC, void *descC,
                              int64_t rankBias, void *descBias, int64_t rankAux,
                              void *descAux, int64_t flags);
extern "C" void weft_gemm_bf16(int64_t rankA, void *descA, int64_t rankB,
                               void *descB, int64_t rankC, void *descC,
                               int64_t rankBias, void *descBias,
                               int64_t rankAux, void *descAux, int64_t flags);
extern "C" void weft_gemm_f16(int64_t rankA, void *descA, int64_t rankB,
                              void *descB, int64_t rankC, void *descC,
                              int64_t rankBias, void *descBias, int64_t rankAux,
                              void *descAux, int64_t flags);
extern "C" void weft_gemm_bf16_bf16(int64_t rankA, void *descA, int64_t rankB,
                                    void *descB, int64_t rankC, void *descC,
                                    int64_t rankBias, void *descBias,
                                    int64_t rankAux, void *descAux,
                                    int64_t flags);

namespace {

/// Checks that a GEMM operand lies inside its allocation and is a matrix
/// cuBLAS reads, as it is on a GPU.
void checkGemmOperand(const char *name, int64_t rank, void *descriptor,
                      int64_t elementBytes, bool isWrite) {
  using weft::runtime::View;
  View view = weft::runtime::viewOf(rank, descriptor);
  std::optional<weft::runtime::ColumnMajorLayout> layout =
      weft::runtime::columnMajorLayout(
          view.sizes[rank - 2], view.sizes[rank - 1], view.strides[rank - 2],
          view.strides[rank - 1]);
  if (!layout) {
    fprintf(stderr,
            "error: emulated CUDA GEMM (cuBLAS) operand %s has strides %" PRId64
            " and %" PRId64
            ": cuBLAS cannot read it (weft-contractions-to-blas should "
            "have kept it a kernel)\n",
            name, view.strides[rank - 2], view.strides[rank - 1]);
    fflush(nullptr);
    std::_Exit(1);
  }
  // cuBLAS reads the matrix's contiguous lines (rows where it sees it
  // transposed, else columns), not what lies between them.
  int64_t inner = layout->transposed ? rank - 1 : rank - 2;
  auto base = reinterpret_cast<uintptr_t>(view.aligned);
  weft::runtime::forEachRow(rank, view, inner, [&](int64_t start) {
    weft::runtime::emulation::checkAccess(
        base, base + start * elementBytes, view.sizes[inner] * elementBytes,
        isWrite, "GEMM (cuBLAS) operand", name);
  });
}

/// The bytes from a view's first element to its last: what a GEMM operand
/// may touch.
struct Extent {
  uintptr_t begin = 0, end = 0;
  bool overlaps(const Extent &other) const {
    return begin < other.end && other.begin < end;
  }
};
Extent extentOf(int64_t rank, void *descriptor, int64_t elementBytes) {
  weft::runtime::View view = weft::runtime::viewOf(rank, descriptor);
  int64_t last = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (view.sizes[d] == 0)
      return Extent{};
    last += (view.sizes[d] - 1) * view.strides[d];
  }
  auto first = reinterpret_cast<uintptr_t>(view.aligned) +
               uintptr_t(view.offset * elementBytes);
  return Extent{first, first + uintptr_t((last + 1) * elementBytes)};
}

/// The checks a GPU would fail without, for `a` and `b` of `inputBytes`
/// bytes an element and `c` of `outputBytes`.
void checkGemm(int64_t inputBytes, int64_t outputBytes, int64_t rankA,
               void *descA, int64_t rankB, void *descB, int64_t rankC,
               void *descC, int64_t rankBias, void *descBias, int64_t rankAux,
               void *descAux, int64_t flags) {
  // The GELU epilogue writes the pre-activation, its gradient's reads it:
  // a matrix of c's type, shape and layout whose leading dimension cuBLASLt
  // takes (a multiple of 8 elements), sharing no bytes with the other
  // operands (cuBLASLt's may not overlap). Checked first: what it refuses
  // is the compiler's error wherever the buffers live.
  if (flags & (weft::runtime::kGemmGelu | weft::runtime::kGemmGeluGradient)) {
    weft::runtime::View c = weft::runtime::viewOf(rankC, descC),
                        aux = weft::runtime::viewOf(rankAux, descAux);
    const char *refusal = weft::runtime::geluEpilogueRefusal(
        flags, rankC, c.sizes[rankC - 1],
        c.strides[rankC - 1] == 1 ? c.strides[rankC - 2] : -1, outputBytes);
    if (!refusal)
      refusal = weft::runtime::geluAuxRefusal(rankC, c.sizes, c.strides[0],
                                              rankAux, aux.sizes, aux.strides);
    Extent auxBytes = extentOf(rankAux, descAux, outputBytes);
    std::pair<const char *, Extent> others[] = {
        {"a", extentOf(rankA, descA, inputBytes)},
        {"b", extentOf(rankB, descB, inputBytes)},
        {"c", extentOf(rankC, descC, outputBytes)},
        {"the bias", flags & weft::runtime::kGemmBias
                         ? extentOf(rankBias, descBias, outputBytes)
                         : Extent{}}};
    for (auto &[name, bytes] : others)
      if (!refusal && auxBytes.overlaps(bytes)) {
        fprintf(stderr,
                "error: emulated CUDA GEMM (cuBLASLt) GELU epilogue's aux "
                "matrix shares bytes with %s (cuBLASLt's operands may not "
                "overlap)\n",
                name);
        fflush(nullptr);
        std::_Exit(1);
      }
    if (refusal) {
      fprintf(stderr, "error: emulated CUDA GEMM (cuBLASLt) GELU epilogue %s\n",
              refusal);
      fflush(nullptr);
      std::_Exit(1);
    }
  }
  checkGemmOperand("a", rankA, descA, inputBytes, /*isWrite=*/false);
  checkGemmOperand("b", rankB, descB, inputBytes, /*isWrite=*/false);
  // The bias epilogue reads a contiguous vector as long as c's rows, the
  // bias-gradient epilogue writes one, of a GEMM of one matrix.
  bool gradient = flags & weft::runtime::kGemmBiasGradient;
  if ((flags & weft::runtime::kGemmBias) && gradient) {
    fprintf(stderr, "error: emulated CUDA GEMM (cuBLASLt): a bias and a bias "
                    "gradient at once\n");
    fflush(nullptr);
    std::_Exit(1);
  }
  if (gradient && rankC != 2) {
    fprintf(stderr,
            "error: emulated CUDA GEMM (cuBLASLt) bias gradient of a "
            "batch of %" PRId64 " dims\n",
            rankC - 2);
    fflush(nullptr);
    std::_Exit(1);
  }
  if ((flags & weft::runtime::kGemmBias) || gradient) {
    weft::runtime::View c = weft::runtime::viewOf(rankC, descC),
                        bias = weft::runtime::viewOf(1, descBias);
    if (rankBias != 1 || c.strides[rankC - 1] != 1 ||
        bias.sizes[0] != c.sizes[rankC - 1] || bias.strides[0] != 1) {
      fprintf(stderr,
              "error: emulated CUDA GEMM (cuBLASLt) bias epilogue: c's rows "
              "must be contiguous and the bias a contiguous vector as long "
              "(c's last stride %" PRId64 ", %" PRId64
              " columns; bias of %" PRId64 " elements, stride %" PRId64 ")\n",
              c.strides[rankC - 1], c.sizes[rankC - 1], bias.sizes[0],
              bias.strides[0]);
      fflush(nullptr);
      std::_Exit(1);
    }
    auto base = reinterpret_cast<uintptr_t>(bias.aligned);
    weft::runtime::emulation::checkAccess(
        base, base + bias.offset * outputBytes, bias.sizes[0] * outputBytes,
        /*isWrite=*/gradient, "GEMM (cuBLASLt) operand",
        gradient ? "bias gradient" : "bias");
  }
  if (flags & (weft::runtime::kGemmGelu | weft::runtime::kGemmGeluGradient))
    checkGemmOperand("aux", rankAux, descAux, outputBytes,
                     /*isWrite=*/flags & weft::runtime::kGemmGelu);
  // c += a * b reads c as well; c = a * b (beta = 0) does not.
  if (flags & weft::runtime::kGemmAccumulate)
    checkGemmOperand("c", rankC, descC, outputBytes, /*isWrite=*/false);
  checkGemmOperand("c", rankC, descC, outputBytes, /*isWrite=*/true);
}

} // namespace

/// The emulation's cuBLAS GEMMs (c (+)= a * b, weft-contractions-to-blas):
/// the CPU runtime's (which rounds f32 inputs to TF32 under kGemmTf32, as
/// tensor cores read them), after the checks a GPU would fail without.
#define WEFT_EMULATED_GEMM(SUFFIX, INPUT_BYTES, OUTPUT_BYTES)                  \
  extern "C" void weft_emulated_gemm_##SUFFIX(                                 \
      int64_t rankA, void *descA, int64_t rankB, void *descB, int64_t rankC,   \
      void *descC, int64_t rankBias, void *descBias, int64_t rankAux,          \
      void *descAux, int64_t flags) {                                          \
    checkGemm(INPUT_BYTES, OUTPUT_BYTES, rankA, descA, rankB, descB, rankC,    \
              descC, rankBias, descBias, rankAux, descAux, flags);             \
    weft_gemm_##SUFFIX(rankA, descA, rankB, descB, rankC, descC, rankBias,     \
                       descBias, rankAux, descAux, flags);                     \
  }
WEFT_EMULATED_GEMM(f32, 4, 4)
WEFT_EMULATED_GEMM(bf16, 2, 4)
WEFT_EMULATED_GEMM(f16, 2, 4)
WEFT_EMULATED_GEMM(bf16_bf16, 2, 2)
#undef WEFT_EMULATED_GEMM
