//===- AttentionGradients.h - Attention's backward in weft ops --*- C++ -*-===//
//
// One definition of attention's backward, used by its gradient rule and by
// the partitioner, which runs `weft.attention_grad` locally (unsplit, or
// split over heads) in this form.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_ATTENTIONGRADIENTS_H
#define WEFT_DIALECT_WEFT_IR_ATTENTIONGRADIENTS_H

#include "mlir/IR/Builders.h"

namespace weft {

struct AttentionGradients {
  mlir::Value query, key, value;
  /// The gradient of the masked, scaled scores [B, H, S, T] (a float
  /// mask's, before unbroadcasting).
  mlir::Value scores;
};

/// The gradients of `attention(q, k, v, mask)` given `outGrad`, built in
/// weft ops at `at`'s location. `mask` may be null.
AttentionGradients buildAttentionGradients(mlir::OpBuilder &builder,
                                           mlir::Operation *at, mlir::Value q,
                                           mlir::Value k, mlir::Value v,
                                           mlir::Value mask,
                                           mlir::Value outGrad, bool causal,
                                           double scale);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_ATTENTIONGRADIENTS_H
