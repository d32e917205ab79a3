//===- Bufferizations.h - The weft ops that bufferize themselves -*- C++
//-*-===//
//
// The weft ops that stay through convert-weft-to-linalg and bufferize into
// memref code of their own; weft::registerWeftBufferizationModels attaches
// them all.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_CONVERSION_WEFTTOLINALG_BUFFERIZATIONS_H
#define WEFT_LIB_CONVERSION_WEFTTOLINALG_BUFFERIZATIONS_H

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace weft {

/// weft.attention and weft.attention_grad marked weft.library_call: a call
/// of a fused attention kernel.
void attachAttentionBufferization(mlir::MLIRContext &context);

} // namespace weft

#endif // WEFT_LIB_CONVERSION_WEFTTOLINALG_BUFFERIZATIONS_H
