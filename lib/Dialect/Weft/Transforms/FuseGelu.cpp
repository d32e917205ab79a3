//===- FuseGelu.cpp - Decomposed GELU to weft.gelu ------------------------===//

#include "PatternUtils.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include <cmath>

namespace weft {
#define GEN_PASS_DEF_WEFTFUSEGELU
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

constexpr double kSqrtTwoOverPi = 0.7978845608028654;
constexpr double kCubicCoefficient = 0.044715;

/// Finds the op computing `0.5 * x * onePlus` from `onePlus` = 1 + erf(..)
/// or 1 + tanh(..): a chain of single-use multiplies whose other factors are
/// exactly x and 0.5 (possibly premultiplied as x * 0.5).
Operation *matchHalfXTimes(Value onePlus, Value x) {
  bool haveX = false, haveHalf = false;
  Value current = onePlus;
  while (!(haveX && haveHalf)) {
    if (!current.hasOneUse())
      return nullptr;
    auto mul = dyn_cast<MulOp>(*current.getUsers().begin());
    if (!mul)
      return nullptr;
    Value other = mul.getLhs() == current ? mul.getRhs() : mul.getLhs();
    double factor;
    if (other == x && !haveX) {
      haveX = true;
    } else if (isSplatConstant(other, 0.5) && !haveHalf) {
      haveHalf = true;
    } else if (matchScaledBy(other, factor) == x && !haveX && !haveHalf &&
               std::abs(factor - 0.5) < 1e-6) {
      haveX = haveHalf = true;
    } else {
      return nullptr;
    }
    current = mul.getResult();
  }
  if (current.getType() != x.getType())
    return nullptr;
  return current.getDefiningOp();
}

/// Returns the single `1 + v` user of `v`, if that is how `v` is used.
Value onePlusUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  auto add = dyn_cast<AddOp>(*v.getUsers().begin());
  if (!add)
    return nullptr;
  Value other = add.getLhs() == v ? add.getRhs() : add.getLhs();
  return isSplatConstant(other, 1.0) ? add.getResult() : nullptr;
}

LogicalResult replaceWithGelu(PatternRewriter &rewriter, Value x,
                              Value activation, StringRef approximate) {
  Value onePlus = onePlusUser(activation);
  if (!onePlus)
    return failure();
  Operation *root = matchHalfXTimes(onePlus, x);
  if (!root)
    return failure();
  rewriter.replaceOpWithNewOp<GeluOp>(root, x.getType(), x,
                                      rewriter.getStringAttr(approximate));
  return success();
}

/// 0.5 * x * (1 + erf(x / sqrt(2))).
struct FuseErfGelu : public OpRewritePattern<ErfOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ErfOp erf,
                                PatternRewriter &rewriter) const override {
    double factor;
    Value x = matchScaledBy(erf.getInput(), factor);
    if (!x || std::abs(factor - M_SQRT1_2) > 1e-4 * M_SQRT1_2)
      return failure();
    return replaceWithGelu(rewriter, x, erf.getResult(), "none");
  }
};

/// True if `v` is x^3 as pow(x, 3), x * x * x in any association.
bool isCubeOf(Value v, Value x) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isSplatConstant(pow.getRhs(), 3.0, 0);
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  return (mul.getLhs() == x && isSquareOf(mul.getRhs(), x)) ||
         (mul.getRhs() == x && isSquareOf(mul.getLhs(), x));
}

bool isCoefficient(double value, double expected) {
  return std::abs(value - expected) <= 1e-4 * expected;
}

/// True if `v` is c * x^2 with c = 0.044715, in any association.
bool isCubicTermOverX(Value v, Value x) {
  double coefficient;
  if (Value square = matchScaledBy(v, coefficient))
    if (isSquareOf(square, x) && isCoefficient(coefficient, kCubicCoefficient))
      return true;
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  for (auto [a, b] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())})
    if (a == x && matchScaledBy(b, coefficient) == x &&
        isCoefficient(coefficient, kCubicCoefficient))
      return true;
  return false;
}

/// Matches the tanh argument sqrt(2/pi) * (x + 0.044715 x^3), also written
/// (sqrt(2/pi) * x) * (1 + 0.044715 x^2) as Megatron does; returns x.
Value matchTanhArgument(Value v) {
  double outer;
  if (Value inner = matchScaledBy(v, outer)) {
    auto add = inner.getDefiningOp<AddOp>();
    if (!add || !isCoefficient(outer, kSqrtTwoOverPi))
      return nullptr;
    for (auto [x, cubic] : {std::pair(add.getLhs(), add.getRhs()),
                            std::pair(add.getRhs(), add.getLhs())}) {
      double coefficient;
      Value cube = matchScaledBy(cubic, coefficient);
      if (cube && isCubeOf(cube, x) &&
          isCoefficient(coefficient, kCubicCoefficient))
        return x;
    }
    return nullptr;
  }
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return nullptr;
  for (auto [scaledX, poly] : {std::pair(mul.getLhs(), mul.getRhs()),
                               std::pair(mul.getRhs(), mul.getLhs())}) {
    Value x = matchScaledBy(scaledX, outer);
    auto add = poly.getDefiningOp<AddOp>();
    if (!x || !add || !isCoefficient(outer, kSqrtTwoOverPi))
      continue;
    for (auto [one, term] : {std::pair(add.getLhs(), add.getRhs()),
                             std::pair(add.getRhs(), add.getLhs())})
      if (isSplatConstant(one, 1.0) && isCubicTermOverX(term, x))
        return x;
  }
  return nullptr;
}

/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
struct FuseTanhGelu : public OpRewritePattern<TanhOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TanhOp tanh,
                                PatternRewriter &rewriter) const override {
    Value x = matchTanhArgument(tanh.getInput());
    if (!x)
      return failure();
    return replaceWithGelu(rewriter, x, tanh.getResult(), "tanh");
  }
};

struct WeftFuseGeluPass
    : public weft::impl::WeftFuseGeluBase<WeftFuseGeluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseErfGelu, FuseTanhGelu>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
