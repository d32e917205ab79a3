//===- ScalarMath.h - Scalar formulas the lowering builds -------*- C++ -*-===//
//
// The scalar bodies of ops whose formula another pass must recognize after
// fusion has merged them into larger bodies: the lowering builds them here,
// and a pass asks whether a value computes one (computesExpression), so the
// formula is written once. The host's form of the same formulas is
// weft/runtime/Gelu.h.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LOWERING_SCALARMATH_H
#define WEFT_LOWERING_SCALARMATH_H

#include "mlir/IR/Builders.h"

namespace weft {

/// A constant `value` of the int or float type `type`.
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type type, double value);

/// `fn(x)` computed in at least f32 (x widened, the result rounded back):
/// LLVM has no f16 libm for exp/log/tanh/erf.
mlir::Value
mathInF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
          llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                         mlir::Value)>
              fn);

/// weft.gelu of the float `x` (erf's form, or with `tanhForm` tanh's).
mlir::Value geluScalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       bool tanhForm);

/// weft.gelu_grad: `grad * gelu'(x)`, both of one float type.
mlir::Value geluGradientScalar(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::Value grad, mlir::Value x, bool tanhForm);

/// Whether `value` computes what `build` builds from `arguments`: the same
/// ops with the same attributes on equivalent operands (a commutative op's
/// two in either order), down to `arguments`. Values are compared, not
/// identities: CSE or a fused body's shared subexpressions do not matter.
bool computesExpression(
    mlir::Value value, mlir::ArrayRef<mlir::Value> arguments,
    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                   mlir::ValueRange)>
        build);

} // namespace weft

#endif // WEFT_LOWERING_SCALARMATH_H
