//===- ScalarMath.cpp - Scalar formulas the lowering builds ---------------===//

#include "weft/Lowering/ScalarMath.h"
#include "weft/runtime/Gelu.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;

Value weft::scalarConstant(OpBuilder &b, Location loc, Type type,
                           double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value weft::mathInF32(OpBuilder &b, Location loc, Value x,
                      function_ref<Value(OpBuilder &, Location, Value)> fn) {
  Type type = x.getType();
  if (type.getIntOrFloatBitWidth() >= 32)
    return fn(b, loc, x);
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  return arith::TruncFOp::create(b, loc, type, fn(b, loc, wide));
}

namespace {

/// The ops both forms of GELU and of its derivative share.
struct GeluBuilder {
  OpBuilder &b;
  Location loc;
  Value x;

  Value c(double v) { return weft::scalarConstant(b, loc, x.getType(), v); }
  Value mul(Value l, Value r) { return arith::MulFOp::create(b, loc, l, r); }
  Value add(Value l, Value r) { return arith::AddFOp::create(b, loc, l, r); }
  /// tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)), with x * x.
  Value tanhOfU(Value square) {
    Value poly = add(x, mul(c(weft::runtime::kGeluCubic), mul(x, square)));
    return math::TanhOp::create(b, loc,
                                mul(c(weft::runtime::kSqrtTwoOverPi), poly));
  }
  /// erf(x / sqrt(2)).
  Value erf() { return math::ErfOp::create(b, loc, mul(x, c(M_SQRT1_2))); }
};

} // namespace

Value weft::geluScalar(OpBuilder &b, Location loc, Value x, bool tanhForm) {
  return mathInF32(b, loc, x, [&](OpBuilder &b, Location loc, Value x) {
    GeluBuilder g{b, loc, x};
    Value inner = tanhForm ? g.tanhOfU(g.mul(x, x)) : g.erf();
    return g.mul(g.mul(g.c(0.5), x), g.add(g.c(1.0), inner));
  });
}

Value weft::geluGradientScalar(OpBuilder &b, Location loc, Value grad, Value x,
                               bool tanhForm) {
  Type type = x.getType();
  bool narrow = type.getIntOrFloatBitWidth() < 32;
  if (narrow) {
    grad = arith::ExtFOp::create(b, loc, b.getF32Type(), grad);
    x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  }
  GeluBuilder g{b, loc, x};
  Value derivative;
  if (tanhForm) {
    // 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx
    Value square = g.mul(x, x);
    Value th = g.tanhOfU(square);
    Value du =
        g.mul(g.c(runtime::kSqrtTwoOverPi),
              g.add(g.c(1.0), g.mul(g.c(3 * runtime::kGeluCubic), square)));
    Value slope =
        arith::SubFOp::create(b, loc, g.c(1.0), g.mul(th, th)).getResult();
    derivative = g.add(g.mul(g.c(0.5), g.add(g.c(1.0), th)),
                       g.mul(g.mul(g.c(0.5), x), g.mul(slope, du)));
  } else {
    // Phi(x) + x phi(x)
    Value cdf = g.mul(g.c(0.5), g.add(g.c(1.0), g.erf()));
    Value pdf =
        g.mul(g.c(0.3989422804014327),
              math::ExpOp::create(b, loc, g.mul(g.c(-0.5), g.mul(x, x))));
    derivative = g.add(cdf, g.mul(x, pdf));
  }
  Value result = g.mul(grad, derivative);
  return narrow ? arith::TruncFOp::create(b, loc, type, result) : result;
}

namespace {

/// Compares a value with the reference expression built in `reference`
/// from its arguments, which stand for `arguments`.
struct ExpressionComparison {
  Block &reference;
  ArrayRef<Value> arguments;
  /// Pairs compared already: a value and a reference subexpression may
  /// meet again through a shared operand.
  DenseMap<std::pair<Value, Value>, bool> known;

  bool same(Value value, Value expected) {
    if (auto argument = dyn_cast<BlockArgument>(expected);
        argument && argument.getOwner() == &reference)
      return value == arguments[argument.getArgNumber()];
    if (auto it = known.find({value, expected}); it != known.end())
      return it->second;
    Operation *op = value.getDefiningOp();
    Operation *want = expected.getDefiningOp();
    if (!op || !want || op->getName() != want->getName() ||
        op->getNumRegions() != 0 || want->getNumRegions() != 0 ||
        cast<OpResult>(value).getResultNumber() !=
            cast<OpResult>(expected).getResultNumber() ||
        op->getAttrDictionary() != want->getAttrDictionary() ||
        op->getNumOperands() != want->getNumOperands() ||
        value.getType() != expected.getType())
      return false;
    auto pairwise = [&](auto operands) {
      return llvm::all_of(llvm::zip_equal(operands, want->getOperands()),
                          [&](auto pair) {
                            return same(std::get<0>(pair), std::get<1>(pair));
                          });
    };
    bool matches = pairwise(op->getOperands());
    if (!matches && op->getNumOperands() == 2 &&
        op->hasTrait<OpTrait::IsCommutative>())
      matches =
          pairwise(SmallVector<Value>{op->getOperand(1), op->getOperand(0)});
    known[{value, expected}] = matches;
    return matches;
  }
};

} // namespace

bool weft::computesExpression(
    Value value, ArrayRef<Value> arguments,
    function_ref<Value(OpBuilder &, Location, ValueRange)> build) {
  // The reference lives in a block of its own, dropped on return.
  Block reference;
  Location loc = value.getLoc();
  for (Value argument : arguments)
    reference.addArgument(argument.getType(), loc);
  OpBuilder b(value.getContext());
  b.setInsertionPointToEnd(&reference);
  Value expected = build(b, loc, reference.getArguments());
  return ExpressionComparison{reference, arguments, {}}.same(value, expected);
}
