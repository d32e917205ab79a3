//===- Blas.cpp - GEMM calls emitted by weft-contractions-to-blas ---------===//
//
// c[batch.., m, n] += a[batch.., m, k] * b[batch.., k, n] on strided views.
// Each matrix goes to cblas_sgemm when one of its two dims is contiguous
// (row-major as it is, or as a transpose); otherwise a plain loop runs.
//
//===----------------------------------------------------------------------===//

#include <cblas.h>
#include <cstdint>
#include <vector>

namespace {

struct View {
  float *aligned;
  int64_t offset;
  const int64_t *sizes;
  const int64_t *strides;
};

/// Reads the ranked descriptor behind an unranked memref argument:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
View viewOf(int64_t rank, void *descriptor) {
  struct Header {
    float *allocated;
    float *aligned;
    int64_t offset;
  };
  auto *header = static_cast<Header *>(descriptor);
  auto *dims = reinterpret_cast<const int64_t *>(header + 1);
  return {header->aligned, header->offset, dims, dims + rank};
}

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

} // namespace

extern "C" void weft_gemm_f32(int64_t rankA, void *descA, int64_t rankB,
                              void *descB, int64_t rankC, void *descC) {
  View a = viewOf(rankA, descA), b = viewOf(rankB, descB),
       c = viewOf(rankC, descC);
  int64_t batchRank = rankC - 2;
  int64_t m = c.sizes[batchRank], n = c.sizes[batchRank + 1],
          k = a.sizes[batchRank + 1];
  int64_t batches = 1;
  for (int64_t d = 0; d < batchRank; ++d)
    batches *= c.sizes[d];
  CBLAS_TRANSPOSE transA, transB;
  int64_t lda, ldb;
  bool blas =
      c.strides[batchRank + 1] == 1 && c.strides[batchRank] >= n &&
      blasLayout(a.strides[batchRank], a.strides[batchRank + 1], m, k, transA,
                 lda) &&
      blasLayout(b.strides[batchRank], b.strides[batchRank + 1], k, n, transB,
                 ldb);
  std::vector<int64_t> index(batchRank, 0);
  for (int64_t batch = 0; batch < batches; ++batch) {
    float *pa = a.aligned + a.offset, *pb = b.aligned + b.offset,
          *pc = c.aligned + c.offset;
    for (int64_t d = 0; d < batchRank; ++d) {
      pa += index[d] * a.strides[d];
      pb += index[d] * b.strides[d];
      pc += index[d] * c.strides[d];
    }
    if (blas) {
      cblas_sgemm(CblasRowMajor, transA, transB, m, n, k, 1.0f, pa, lda, pb,
                  ldb, 1.0f, pc, c.strides[batchRank]);
    } else {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          float acc = pc[i * c.strides[batchRank] + j * c.strides[batchRank + 1]];
          for (int64_t p = 0; p < k; ++p)
            acc += pa[i * a.strides[batchRank] + p * a.strides[batchRank + 1]] *
                   pb[p * b.strides[batchRank] + j * b.strides[batchRank + 1]];
          pc[i * c.strides[batchRank] + j * c.strides[batchRank + 1]] = acc;
        }
    }
    for (int64_t d = batchRank - 1; d >= 0; --d) {
      if (++index[d] < c.sizes[d])
        break;
      index[d] = 0;
    }
  }
}
