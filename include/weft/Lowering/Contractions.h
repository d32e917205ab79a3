//===- Contractions.h - GEMM-shaped linalg ops ------------------*- C++ -*-===//
//
// Which linalg.generic ops are matrix products: the lowering keeps them
// plain (weft-fuse-elementwise) so that each target can hand them to its
// GEMM library.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LOWERING_CONTRACTIONS_H
#define WEFT_LOWERING_CONTRACTIONS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace weft {

/// The loops of a `out += a * b` generic: which loop is m, n and k, and the
/// batch loops (the output's leading dims).
struct GemmShape {
  llvm::SmallVector<unsigned> batch;
  unsigned m, n, k;
  bool lhsIsA; // input 0 is indexed by (m, k), input 1 by (k, n)
};

/// Matches a generic computing out[batch.., m, n] += a[.., m, k] * b[.., k, n]
/// with plain dim or constant-0 indexing; `a` and `b` may be narrower floats
/// than `out`, widened in the body (bf16 products accumulated in f32).
std::optional<GemmShape> matchGemm(mlir::linalg::GenericOp op);

} // namespace weft

#endif // WEFT_LOWERING_CONTRACTIONS_H
