//===- GemmLayout.h - How a GEMM library reads a strided matrix -*- C++ -*-===//
//
// The compiler hands a GEMM to cuBLAS only when every operand is a matrix
// cuBLAS can read (weft-contractions-to-blas with require-unit-strides), and
// the runtime reads the operands the same way: this is the one definition
// of that rule. Header-only: the runtime has no compiler dependency.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_GEMMLAYOUT_H
#define WEFT_RUNTIME_GEMMLAYOUT_H

#include <algorithm>
#include <cstdint>
#include <optional>

namespace weft::runtime {

/// How a column-major GEMM library (cuBLAS) reads the matrix [rows, cols]
/// whose elements are `rowStride` and `colStride` apart: as it is, with
/// leading dimension `ld` (its columns are contiguous), or transposed (its
/// rows are: the library sees the [cols, rows] matrix).
struct ColumnMajorLayout {
  bool transposed;
  int64_t ld;
};

/// std::nullopt when neither dim is contiguous, or rows overlap.
inline std::optional<ColumnMajorLayout> columnMajorLayout(int64_t rows,
                                                          int64_t cols,
                                                          int64_t rowStride,
                                                          int64_t colStride) {
  // A dim of size 1 has no stride to speak of.
  if ((colStride == 1 || cols == 1) &&
      (rows == 1 || rowStride >= std::max<int64_t>(cols, 1)))
    return ColumnMajorLayout{true, rows == 1 ? std::max<int64_t>(cols, 1)
                                             : rowStride};
  if ((rowStride == 1 || rows == 1) &&
      (cols == 1 || colStride >= std::max<int64_t>(rows, 1)))
    return ColumnMajorLayout{false, cols == 1 ? std::max<int64_t>(rows, 1)
                                              : colStride};
  return std::nullopt;
}

} // namespace weft::runtime

#endif // WEFT_RUNTIME_GEMMLAYOUT_H
