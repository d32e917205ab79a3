//===- FuseRmsNorm.cpp - Decomposed RMS norm to weft.rms_norm -------------===//

#include "PatternUtils.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFUSERMSNORM
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Matches mean(x^2) + eps over trailing axes; sets axis and epsilon.
bool matchMeanSquarePlusEps(Value v, Value x, int64_t &axis, double &epsilon) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return false;
  for (auto [meanSquare, eps] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
    std::optional<double> value = getSplatConstant(eps);
    auto mean = meanSquare.getDefiningOp<ReduceMeanOp>();
    std::optional<int64_t> first = trailingMeanAxis(mean);
    if (value && first && isSquareOf(mean.getInput(), x)) {
      axis = *first;
      epsilon = *value;
      return true;
    }
  }
  return false;
}

/// A centered input (x - mean(x)) makes this a layer norm, not an RMS norm.
bool isCentered(Value x) {
  auto sub = x.getDefiningOp<SubOp>();
  auto mean = sub ? sub.getRhs().getDefiningOp<ReduceMeanOp>() : nullptr;
  return mean && mean.getInput() == sub.getLhs();
}

RmsNormOp createRmsNorm(PatternRewriter &rewriter, Location loc, Value x,
                        Value scale, int64_t axis, double epsilon) {
  return RmsNormOp::create(rewriter, loc, x.getType(), x, scale,
                           rewriter.getI64IntegerAttr(axis),
                           rewriter.getF64FloatAttr(epsilon));
}

/// x * rsqrt(mean(x^2) + eps), or x / sqrt(mean(x^2) + eps).
template <typename OpTy>
struct FuseRmsNormalization : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    SmallVector<std::pair<Value, Value>> candidates;
    if constexpr (std::is_same_v<OpTy, DivOp>) {
      if (auto sqrt = op.getRhs().template getDefiningOp<SqrtOp>())
        candidates.push_back({op.getLhs(), sqrt.getInput()});
    } else {
      if (Value e = matchRsqrt(op.getRhs()))
        candidates.push_back({op.getLhs(), e});
      if (Value e = matchRsqrt(op.getLhs()))
        candidates.push_back({op.getRhs(), e});
    }
    for (auto [x, meanSquareEps] : candidates) {
      int64_t axis;
      double epsilon;
      if (!matchMeanSquarePlusEps(meanSquareEps, x, axis, epsilon) ||
          isCentered(x) || x.getType() != op.getType())
        continue;
      auto type = llvm::cast<RankedTensorType>(x.getType());
      auto scaleType = RankedTensorType::get(type.getShape().drop_front(axis),
                                             type.getElementType());
      Value ones = ConstantOp::create(
          rewriter, op.getLoc(),
          DenseElementsAttr::get(
              scaleType,
              rewriter.getFloatAttr(type.getElementType(), 1).getValue()));
      rewriter.replaceOp(
          op, createRmsNorm(rewriter, op.getLoc(), x, ones, axis, epsilon));
      return success();
    }
    return failure();
  }
};

/// rms_norm(x, 1) * w -> rms_norm(x, w).
struct AbsorbRmsScale : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    for (auto [norm, weight] : {std::pair(mul.getLhs(), mul.getRhs()),
                                std::pair(mul.getRhs(), mul.getLhs())}) {
      auto rms = norm.getDefiningOp<RmsNormOp>();
      if (!rms || !rms->hasOneUse() || mul.getType() != rms.getType() ||
          !isSplatConstant(rms.getScale(), 1.0, 0))
        continue;
      Value scale = asNormalizedParam(rewriter, mul.getLoc(), weight,
                                      rms.getScale().getType().getShape());
      if (!scale)
        continue;
      rewriter.replaceOp(mul,
                         createRmsNorm(rewriter, mul.getLoc(), rms.getInput(),
                                       scale, rms.getAxis(),
                                       rms.getEpsilon().convertToDouble()));
      return success();
    }
    return failure();
  }
};

struct WeftFuseRmsNormPass
    : public weft::impl::WeftFuseRmsNormBase<WeftFuseRmsNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRmsNormalization<MulOp>, FuseRmsNormalization<DivOp>,
                 AbsorbRmsScale>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
