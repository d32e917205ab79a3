//===- BufferFills.h - The fill an op overwrites ----------------*- C++ -*-===//
//
// After bufferization a GEMM or a reduction accumulates into a buffer that a
// linalg.fill initialized just before it. A target whose library or kernel
// can start from the fill's value (a GEMM's beta = 0, a reduction's initial
// value) takes the fill in and saves its pass over memory.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LOWERING_BUFFERFILLS_H
#define WEFT_LOWERING_BUFFERFILLS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace weft {

/// The linalg.fill of a constant that last wrote all of `buffer` before
/// `user`, in `user`'s block, where nothing between the two touches
/// `buffer` or a view of it; null otherwise. `user` writes all of `buffer`
/// for the fill to be left out.
mlir::linalg::FillOp constantFillBefore(mlir::Operation *user,
                                        mlir::Value buffer);

/// The constant `fill` writes.
mlir::TypedAttr fillConstant(mlir::linalg::FillOp fill);

} // namespace weft

#endif // WEFT_LOWERING_BUFFERFILLS_H
