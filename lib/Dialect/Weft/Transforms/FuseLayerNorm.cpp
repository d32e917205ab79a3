//===- FuseLayerNorm.cpp - Decomposed layer norm to weft.layer_norm -------===//

#include "PatternUtils.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFUSELAYERNORM
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Matches `mean(x)` over trailing axes with keepdims; returns x and the
/// first reduced axis.
Value matchMean(Value v, int64_t &axis) {
  auto mean = v.getDefiningOp<ReduceMeanOp>();
  std::optional<int64_t> first = trailingMeanAxis(mean);
  if (!first)
    return nullptr;
  axis = *first;
  return mean.getInput();
}

/// Matches `var + eps` where var = mean((x - mean(x))^2) and `centered` is
/// the `x - mean(x)` value; returns x and sets axis/epsilon.
Value matchVariancePlusEps(Value v, Value centered, int64_t &axis,
                           double &epsilon) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return nullptr;
  Value variance = add.getLhs();
  std::optional<double> eps = getSplatConstant(add.getRhs());
  if (!eps) {
    variance = add.getRhs();
    eps = getSplatConstant(add.getLhs());
  }
  if (!eps)
    return nullptr;
  int64_t varianceAxis;
  Value square = matchMean(variance, varianceAxis);
  if (!square || !isSquareOf(square, centered))
    return nullptr;
  auto sub = centered.getDefiningOp<SubOp>();
  if (!sub)
    return nullptr;
  int64_t meanAxis;
  Value x = matchMean(sub.getRhs(), meanAxis);
  if (x != sub.getLhs() || meanAxis != varianceAxis)
    return nullptr;
  axis = meanAxis;
  epsilon = *eps;
  return x;
}

LayerNormOp createLayerNorm(PatternRewriter &rewriter, Operation *root, Value x,
                            Value scale, Value bias, int64_t axis,
                            double epsilon) {
  return LayerNormOp::create(rewriter, root->getLoc(), x.getType(), x, scale,
                             bias, rewriter.getI64IntegerAttr(axis),
                             rewriter.getF64FloatAttr(epsilon));
}

Value onesLike(PatternRewriter &rewriter, Location loc, RankedTensorType x,
               int64_t axis) {
  auto type =
      RankedTensorType::get(x.getShape().drop_front(axis), x.getElementType());
  return ConstantOp::create(
      rewriter, loc,
      DenseElementsAttr::get(
          type, rewriter.getFloatAttr(x.getElementType(), 1).getValue()));
}

/// (x - mean) / sqrt(var + eps), also written with rsqrt or reciprocal.
template <typename OpTy>
struct FuseNormalization : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Value centered, varianceEps;
    if constexpr (std::is_same_v<OpTy, DivOp>) {
      auto sqrt = op.getRhs().template getDefiningOp<SqrtOp>();
      if (!sqrt)
        return failure();
      centered = op.getLhs();
      varianceEps = sqrt.getInput();
    } else {
      if ((varianceEps = matchRsqrt(op.getRhs())))
        centered = op.getLhs();
      else if ((varianceEps = matchRsqrt(op.getLhs())))
        centered = op.getRhs();
      else
        return failure();
    }
    int64_t axis;
    double epsilon;
    Value x = matchVariancePlusEps(varianceEps, centered, axis, epsilon);
    if (!x || x.getType() != op.getType() ||
        !llvm::isa<FloatType>(getElementTypeOrSelf(x.getType())))
      return failure();
    auto type = llvm::cast<RankedTensorType>(x.getType());
    Value ones = onesLike(rewriter, op.getLoc(), type, axis);
    rewriter.replaceOp(
        op, createLayerNorm(rewriter, op, x, ones, nullptr, axis, epsilon));
    return success();
  }
};

/// layer_norm(x, 1) * gamma -> layer_norm(x, gamma).
struct AbsorbScale : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    for (auto [norm, gamma] : {std::pair(mul.getLhs(), mul.getRhs()),
                               std::pair(mul.getRhs(), mul.getLhs())}) {
      auto ln = norm.getDefiningOp<LayerNormOp>();
      if (!ln || ln.getBias() || !ln->hasOneUse() ||
          !isSplatConstant(ln.getScale(), 1.0, 0) ||
          mul.getType() != ln.getType())
        continue;
      Value scale = asNormalizedParam(rewriter, mul.getLoc(), gamma,
                                      ln.getScale().getType().getShape());
      if (!scale)
        continue;
      rewriter.replaceOp(mul,
                         createLayerNorm(rewriter, mul, ln.getInput(), scale,
                                         nullptr, ln.getAxis(),
                                         ln.getEpsilon().convertToDouble()));
      return success();
    }
    return failure();
  }
};

/// layer_norm(x, gamma) + beta -> layer_norm(x, gamma, beta).
struct AbsorbBias : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (auto [norm, beta] : {std::pair(add.getLhs(), add.getRhs()),
                              std::pair(add.getRhs(), add.getLhs())}) {
      auto ln = norm.getDefiningOp<LayerNormOp>();
      if (!ln || ln.getBias() || !ln->hasOneUse() ||
          add.getType() != ln.getType())
        continue;
      Value bias = asNormalizedParam(rewriter, add.getLoc(), beta,
                                     ln.getScale().getType().getShape());
      if (!bias)
        continue;
      rewriter.replaceOp(add,
                         createLayerNorm(rewriter, add, ln.getInput(),
                                         ln.getScale(), bias, ln.getAxis(),
                                         ln.getEpsilon().convertToDouble()));
      return success();
    }
    return failure();
  }
};

/// TensorFlow's batch-norm style: with m = gamma * rsqrt(var + eps),
/// x * m + (beta - mean * m).
struct FuseMultiplierForm : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (auto [scaled, shift] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
      auto sub = shift.getDefiningOp<SubOp>();
      auto xm = scaled.getDefiningOp<MulOp>();
      if (!sub || !xm)
        continue;
      auto meanTimesM = sub.getRhs().getDefiningOp<MulOp>();
      if (!meanTimesM)
        continue;
      // Find m: the operand shared by x*m and mean*m.
      for (auto [x, m] : {std::pair(xm.getLhs(), xm.getRhs()),
                          std::pair(xm.getRhs(), xm.getLhs())}) {
        Value mean = otherOperand<MulOp>(sub.getRhs(), m);
        int64_t axis;
        if (!mean || matchMean(mean, axis) != x)
          continue;
        // m = gamma * rsqrt(var + eps) or just rsqrt(var + eps).
        Value gamma, varianceEps;
        if ((varianceEps = matchRsqrt(m))) {
          gamma = nullptr;
        } else if (auto mm = m.getDefiningOp<MulOp>()) {
          if ((varianceEps = matchRsqrt(mm.getLhs())))
            gamma = mm.getRhs();
          else if ((varianceEps = matchRsqrt(mm.getRhs())))
            gamma = mm.getLhs();
        }
        if (!varianceEps)
          continue;
        // var = mean((x - mean)^2); the centered value is any x - mean.
        auto varAdd = varianceEps.getDefiningOp<AddOp>();
        if (!varAdd)
          continue;
        Value variance = getSplatConstant(varAdd.getRhs()) ? varAdd.getLhs()
                                                           : varAdd.getRhs();
        int64_t varianceAxis;
        Value square = matchMean(variance, varianceAxis);
        if (!square)
          continue;
        Value centered;
        if (auto sq = square.getDefiningOp<MulOp>())
          centered = sq.getLhs();
        else if (auto pow = square.getDefiningOp<PowOp>())
          centered = pow.getLhs();
        if (!centered)
          continue;
        int64_t checkedAxis;
        double epsilon;
        if (matchVariancePlusEps(varianceEps, centered, checkedAxis, epsilon) !=
                x ||
            checkedAxis != axis || add.getType() != x.getType())
          continue;
        auto type = llvm::cast<RankedTensorType>(x.getType());
        ArrayRef<int64_t> normalized = type.getShape().drop_front(axis);
        Value scale =
            gamma ? asNormalizedParam(rewriter, add.getLoc(), gamma, normalized)
                  : onesLike(rewriter, add.getLoc(), type, axis);
        Value bias =
            asNormalizedParam(rewriter, add.getLoc(), sub.getLhs(), normalized);
        if (!scale || !bias)
          continue;
        rewriter.replaceOp(
            add, createLayerNorm(rewriter, add, x, scale, bias, axis, epsilon));
        return success();
      }
    }
    return failure();
  }
};

struct WeftFuseLayerNormPass
    : public weft::impl::WeftFuseLayerNormBase<WeftFuseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseNormalization<DivOp>, FuseNormalization<MulOp>,
                 AbsorbScale, AbsorbBias, FuseMultiplierForm>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
