//===- FuseAttention.cpp - Attention idiom to weft.attention --------------===//

#include "PatternUtils.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include <cmath>

namespace weft {
#define GEN_PASS_DEF_WEFTFUSEATTENTION
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Score views are [B*H, S, T] (3-D, as `bmm` exports) or [B, H, S, T];
/// exporters switch between the two around the masks.
bool isHeadViewReshape(ReshapeOp reshape, SmallVector<int64_t> &headView) {
  auto in = llvm::cast<RankedTensorType>(reshape.getInput().getType());
  RankedTensorType out = reshape.getType();
  RankedTensorType threeD = in.getRank() == 3 ? in : out;
  RankedTensorType fourD = in.getRank() == 3 ? out : in;
  if (threeD.getRank() != 3 || fourD.getRank() != 4 ||
      threeD.getShape().take_back(2) != fourD.getShape().take_back(2) ||
      threeD.getDimSize(0) != fourD.getDimSize(0) * fourD.getDimSize(1))
    return false;
  SmallVector<int64_t> view = {fourD.getDimSize(0), fourD.getDimSize(1)};
  if (!headView.empty() && headView != view)
    return false;
  headView = view;
  return true;
}

/// A mask added to the scores, with the factor the scores were scaled by
/// after it (the mask is scaled with them) and whether it was added to a
/// 3-D view.
struct AdditiveMask {
  Value mask;
  double factor;
  bool threeD;
};

/// What was found between the q*k^T product and the softmax, walking back:
/// scale factors, at most one keep-mask (Where with a large negative
/// fill), additive masks (a padding or causal mask, ALiBi's bias), a clamp
/// at a large negative value (OPT's max(scores, finfo.min)), and views
/// between 3-D and 4-D scores.
struct ScoreChain {
  MatmulOp product;
  double scale = 1.0;
  Value keepMask; // i1; may be null
  bool negateKeepMask = false;
  bool keepMaskThreeD = false;
  SmallVector<AdditiveMask> additiveMasks;
  /// [B, H] when some scores are 3-D [B*H, S, T] viewed as [B, H, S, T].
  SmallVector<int64_t> headView;
};

bool isLargeNegative(Value v, double bound) {
  std::optional<double> value = getSplatConstant(v);
  return value && *value <= bound;
}

/// Walks back from `scores` (the softmax input or a value before it) to the
/// q*k^T product, recording what it passes in `chain`.
bool matchScores(Value scores, ScoreChain &chain) {
  while (true) {
    auto type = llvm::cast<RankedTensorType>(scores.getType());
    bool threeD = type.getRank() == 3;
    double factor;
    if (Value inner = matchScaledBy(scores, factor)) {
      chain.scale *= factor;
      scores = inner;
      continue;
    }
    if (auto reshape = scores.getDefiningOp<ReshapeOp>()) {
      if (!isHeadViewReshape(reshape, chain.headView))
        return false;
      scores = reshape.getInput();
      continue;
    }
    if (auto max = scores.getDefiningOp<MaxOp>()) {
      // max(s, c) with c at least as low as any mask's fill changes no
      // softmax result: such a clamp only keeps -inf away.
      Value kept = isLargeNegative(max.getRhs(), -1e30)   ? max.getLhs()
                   : isLargeNegative(max.getLhs(), -1e30) ? max.getRhs()
                                                          : Value();
      if (!kept || kept.getType() != type)
        return false;
      scores = kept;
      continue;
    }
    if (auto where = scores.getDefiningOp<WhereOp>()) {
      Value kept;
      bool negate = false;
      if (isLargeNegative(where.getOnFalse(), -1e4)) {
        kept = where.getOnTrue();
      } else if (isLargeNegative(where.getOnTrue(), -1e4)) {
        kept = where.getOnFalse();
        negate = true;
      }
      if (!kept || kept.getType() != type || chain.keepMask)
        return false;
      chain.keepMask = where.getCondition();
      chain.negateKeepMask = negate;
      chain.keepMaskThreeD = threeD;
      scores = kept;
      continue;
    }
    if (auto add = scores.getDefiningOp<AddOp>()) {
      for (auto [kept, mask] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
        if (kept.getType() != type)
          continue;
        ScoreChain probe = chain;
        probe.additiveMasks.push_back({mask, chain.scale, threeD});
        if (matchScores(kept, probe)) {
          chain = std::move(probe);
          return true;
        }
      }
      return false;
    }
    chain.product = scores.getDefiningOp<MatmulOp>();
    return bool(chain.product);
  }
}

/// Turns [B, S, D] into [B, 1, S, D], or with a head view [B', H] (where
/// B = B' * H) into [B', H, S, D]. A 3-D operand whose leading dim is 1
/// (a mask shared by every batch and head) becomes [1, 1, S, D].
Value toFourD(PatternRewriter &rewriter, Location loc, Value v,
              ArrayRef<int64_t> headView) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  if (type.getRank() != 3)
    return v;
  if (headView.empty() || type.getDimSize(0) == 1)
    return UnsqueezeOp::create(rewriter, loc, v,
                               rewriter.getDenseI64ArrayAttr({1}));
  SmallVector<int64_t> shape(headView);
  llvm::append_range(shape, type.getShape().drop_front());
  return ReshapeOp::create(rewriter, loc, type.clone(shape), v);
}

/// The softmax whose result `probabilities` is, through a 4-D to 3-D view
/// (recorded in `headView`).
SoftmaxOp softmaxOf(Value probabilities, SmallVector<int64_t> &headView) {
  if (auto reshape = probabilities.getDefiningOp<ReshapeOp>()) {
    if (!isHeadViewReshape(reshape, headView))
      return nullptr;
    probabilities = reshape.getInput();
  }
  auto softmax = probabilities.getDefiningOp<SoftmaxOp>();
  if (!softmax || static_cast<int64_t>(softmax.getAxis()) !=
                      softmax.getType().getRank() - 1)
    return nullptr;
  return softmax;
}

struct FuseScaledDotProduct : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp root,
                                PatternRewriter &rewriter) const override {
    ScoreChain chain;
    SoftmaxOp softmax = softmaxOf(root.getLhs(), chain.headView);
    if (!softmax || !matchScores(softmax.getInput(), chain))
      return failure();
    ArrayRef<int64_t> headView = chain.headView;
    Value query = chain.product.getLhs();
    Value keyT = chain.product.getRhs();
    Value value = root.getRhs();
    double factor;
    if (Value unscaled = matchScaledBy(query, factor)) {
      chain.scale *= factor;
      query = unscaled;
    }
    if (Value unscaled = matchScaledBy(keyT, factor)) {
      chain.scale *= factor;
      keyT = unscaled;
    }
    // The operands as [B, H, S, D]: 3-D ones through the head view (or a
    // unit head dim when there is none).
    auto fourDShape = [&](Value v) -> std::optional<SmallVector<int64_t>> {
      auto type = llvm::cast<RankedTensorType>(v.getType());
      if (!type.hasStaticShape() ||
          !llvm::isa<FloatType>(type.getElementType()))
        return std::nullopt;
      if (type.getRank() == 4)
        return llvm::to_vector(type.getShape());
      if (type.getRank() != 3)
        return std::nullopt;
      SmallVector<int64_t> shape =
          headView.empty() ? SmallVector<int64_t>{type.getDimSize(0), 1}
                           : SmallVector<int64_t>(headView);
      if (!headView.empty() && type.getDimSize(0) != headView[0] * headView[1])
        return std::nullopt;
      llvm::append_range(shape, type.getShape().drop_front());
      return shape;
    };
    auto q = fourDShape(query), kT = fourDShape(keyT), v = fourDShape(value);
    if (!q || !kT || !v)
      return failure();
    // A 3-D operand beside a 4-D one needs the head view.
    auto rankOf = [](Value v) {
      return llvm::cast<RankedTensorType>(v.getType()).getRank();
    };
    int64_t rank = rankOf(query);
    if (headView.empty() && (rankOf(keyT) != rank || rankOf(value) != rank))
      return failure();
    // Batch dims agree; keys and values may hold one head the product
    // broadcasts to every query head (multi-query attention).
    int64_t heads = (*q)[1], kvHeads = (*kT)[1];
    if ((*kT)[0] != (*q)[0] || (*v)[0] != (*q)[0] || (*v)[1] != kvHeads ||
        (kvHeads != heads && kvHeads != 1) || (*kT)[2] != (*q)[3] ||
        (*v)[2] != (*kT)[3])
      return failure();
    int64_t s = (*q)[2], t = (*kT)[3];
    if (chain.scale <= 0 || !std::isfinite(chain.scale))
      return failure();

    // Every check comes before the first op is created.
    auto fitsFourD = [&](Value mask, bool threeD) {
      auto type = llvm::cast<RankedTensorType>(mask.getType());
      int64_t heads = headView.empty() ? 1 : headView[0] * headView[1];
      return type.getRank() <= 4 &&
             (!threeD || type.getRank() < 3 || type.getDimSize(0) == 1 ||
              type.getDimSize(0) == heads);
    };
    Value keep = chain.keepMask;
    bool causal =
        keep && !chain.negateKeepMask && AttentionOp::isCausalMask(keep, s, t);
    if (keep && !causal &&
        (!fitsFourD(keep, chain.keepMaskThreeD) ||
         !chain.additiveMasks.empty()))
      return failure(); // one mask operand: a keep-mask and a sum
    for (const AdditiveMask &added : chain.additiveMasks)
      if (!fitsFourD(added.mask, added.threeD))
        return failure();
    int64_t resultRank = root.getType().getRank();

    Location loc = root.getLoc();
    Value mask;
    if (keep && !causal) {
      mask =
          chain.keepMaskThreeD ? toFourD(rewriter, loc, keep, headView) : keep;
      if (chain.negateKeepMask)
        mask = NotOp::create(rewriter, loc, mask);
    }
    // Additive masks sum into one (ALiBi's bias and a causal mask).
    for (const AdditiveMask &added : chain.additiveMasks) {
      Value fourD = added.threeD ? toFourD(rewriter, loc, added.mask, headView)
                                 : added.mask;
      if (added.factor != 1.0) {
        auto elementType =
            llvm::cast<RankedTensorType>(fourD.getType()).getElementType();
        Value factorValue = ConstantOp::create(
            rewriter, loc,
            DenseElementsAttr::get(
                RankedTensorType::get({}, elementType),
                rewriter.getFloatAttr(elementType, added.factor)));
        fourD = MulOp::create(rewriter, loc, fourD, factorValue);
      }
      mask =
          mask ? AddOp::create(rewriter, loc, mask, fourD).getResult() : fourD;
    }

    // key = transpose of key^T's last two dims.
    int64_t keyRank = rankOf(keyT);
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, keyRank));
    std::swap(perm[keyRank - 1], perm[keyRank - 2]);
    Value key = TransposeOp::create(rewriter, loc, keyT,
                                    rewriter.getDenseI64ArrayAttr(perm));
    Value q4 = toFourD(rewriter, loc, query, headView);
    Value k4 = toFourD(rewriter, loc, key, headView);
    Value v4 = toFourD(rewriter, loc, value, headView);
    double defaultScale = 1.0 / std::sqrt(static_cast<double>((*q)[3]));
    FloatAttr scaleAttr;
    if (std::abs(chain.scale - defaultScale) > 1e-6 * defaultScale)
      scaleAttr = rewriter.getF64FloatAttr(chain.scale);
    Value result = AttentionOp::create(
                       rewriter, loc, q4, k4, v4, mask,
                       causal ? rewriter.getUnitAttr() : UnitAttr(), scaleAttr,
                       /*save_log_sum_exp=*/UnitAttr())
                       .getResult();
    if (resultRank == 3 && headView.empty())
      result = SqueezeOp::create(rewriter, loc, result,
                                 rewriter.getDenseI64ArrayAttr({1}));
    else if (resultRank == 3)
      result = ReshapeOp::create(rewriter, loc, root.getType(), result);
    rewriter.replaceOp(root, result);
    return success();
  }
};

struct WeftFuseAttentionPass
    : public weft::impl::WeftFuseAttentionBase<WeftFuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseScaledDotProduct>(&getContext());
    TransposeOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
