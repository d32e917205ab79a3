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

/// What was found between the q*k^T product and the softmax.
struct ScoreChain {
  MatmulOp product;
  double scale = 1.0;
  Value mask; // additive (float) or keep-mask (i1); may be null
  bool negateMask = false;
  /// [B, H] when 3-D [B*H, S, T] scores are masked in a [B, H, S, T] view
  /// (as BART exports); empty otherwise.
  SmallVector<int64_t> headView;
};

/// Strips scale factors: scores = product * c or product / c. With `view`,
/// also looks through a reshape of 3-D scores to [B, H, S, T] and records
/// [B, H] in it.
MatmulOp matchScaledProduct(Value v, double &scale,
                            SmallVector<int64_t> *view = nullptr) {
  double factor;
  auto stripScales = [&] {
    while (Value inner = matchScaledBy(v, factor)) {
      scale *= factor;
      v = inner;
    }
  };
  stripScales();
  if (auto reshape = v.getDefiningOp<ReshapeOp>(); reshape && view) {
    auto in = llvm::cast<RankedTensorType>(reshape.getInput().getType());
    RankedTensorType out = reshape.getType();
    if (in.getRank() == 3 && out.getRank() == 4 &&
        in.getShape().take_back(2) == out.getShape().take_back(2)) {
      *view = {out.getDimSize(0), out.getDimSize(1)};
      v = reshape.getInput();
      stripScales();
    }
  }
  return v.getDefiningOp<MatmulOp>();
}

/// Walks back from the softmax input to the q*k^T product. `allowView`
/// permits the masked scores to be a 4-D view of 3-D scores.
std::optional<ScoreChain> matchScores(Value input, bool allowView) {
  ScoreChain chain;
  SmallVector<int64_t> *view = allowView ? &chain.headView : nullptr;
  if (auto where = input.getDefiningOp<WhereOp>()) {
    std::optional<double> fill;
    Value scores;
    if ((fill = getSplatConstant(where.getOnFalse()))) {
      scores = where.getOnTrue();
    } else if ((fill = getSplatConstant(where.getOnTrue()))) {
      scores = where.getOnFalse();
      chain.negateMask = true;
    }
    if (!fill || *fill > -1e4 || scores.getType() != input.getType())
      return std::nullopt;
    chain.mask = where.getCondition();
    input = scores;
  } else if (auto add = input.getDefiningOp<AddOp>()) {
    for (auto [scores, mask] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
      double scale = 1.0;
      SmallVector<int64_t> probeView;
      if (scores.getType() == input.getType() &&
          matchScaledProduct(scores, scale, view ? &probeView : nullptr)) {
        chain.mask = mask;
        input = scores;
        break;
      }
    }
    if (!chain.mask)
      return std::nullopt;
  }
  chain.product = matchScaledProduct(input, chain.scale, view);
  if (!chain.product || (allowView && (!chain.mask || chain.headView.empty())))
    return std::nullopt;
  return chain;
}

/// Turns [B, S, D] into [B, 1, S, D], or with a head view [B', H] (where
/// B = B' * H) into [B', H, S, D].
Value toFourD(PatternRewriter &rewriter, Location loc, Value v,
              ArrayRef<int64_t> headView) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  if (type.getRank() == 4)
    return v;
  if (headView.empty())
    return UnsqueezeOp::create(rewriter, loc, v,
                               rewriter.getDenseI64ArrayAttr({1}));
  SmallVector<int64_t> shape(headView);
  llvm::append_range(shape, type.getShape().drop_front());
  return ReshapeOp::create(rewriter, loc, type.clone(shape), v);
}

struct FuseScaledDotProduct : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp root,
                                PatternRewriter &rewriter) const override {
    auto softmax = root.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || static_cast<int64_t>(softmax.getAxis()) !=
                        softmax.getType().getRank() - 1)
      return failure();
    // BART masks a [B, H, S, T] view of [B*H, S, T] scores between two
    // reshapes.
    std::optional<ScoreChain> chain;
    auto outer = softmax.getInput().getDefiningOp<ReshapeOp>();
    if (outer && outer.getType().getRank() == 3 &&
        llvm::cast<RankedTensorType>(outer.getInput().getType()).getRank() == 4)
      chain = matchScores(outer.getInput(), /*allowView=*/true);
    else
      chain = matchScores(softmax.getInput(), /*allowView=*/false);
    if (!chain)
      return failure();
    ArrayRef<int64_t> headView = chain->headView;
    Value query = chain->product.getLhs();
    Value keyT = chain->product.getRhs();
    Value value = root.getRhs();
    double factor;
    if (Value unscaled = matchScaledBy(query, factor)) {
      chain->scale *= factor;
      query = unscaled;
    }
    if (Value unscaled = matchScaledBy(keyT, factor)) {
      chain->scale *= factor;
      keyT = unscaled;
    }
    auto qType = llvm::cast<RankedTensorType>(query.getType());
    auto kType = llvm::cast<RankedTensorType>(keyT.getType());
    auto vType = llvm::cast<RankedTensorType>(value.getType());
    int64_t rank = qType.getRank();
    if ((rank != 3 && rank != 4) || kType.getRank() != rank ||
        vType.getRank() != rank || (!headView.empty() && rank != 3) ||
        !qType.hasStaticShape() || !kType.hasStaticShape() ||
        !vType.hasStaticShape() ||
        !llvm::isa<FloatType>(qType.getElementType()))
      return failure();
    // Batch (and head) dims must agree exactly: no broadcasting inside.
    if (qType.getShape().drop_back(2) != kType.getShape().drop_back(2) ||
        qType.getShape().drop_back(2) != vType.getShape().drop_back(2))
      return failure();
    int64_t s = qType.getDimSize(rank - 2), t = kType.getDimSize(rank - 1);
    if (chain->scale <= 0 || !std::isfinite(chain->scale))
      return failure();

    Location loc = root.getLoc();
    Value mask = chain->mask;
    bool causal = false;
    if (mask) {
      auto maskType = llvm::cast<RankedTensorType>(mask.getType());
      if (maskType.getRank() > (headView.empty() ? rank : 4))
        return failure();
      bool isBool = maskType.getElementType().isInteger(1);
      if (isBool && !chain->negateMask &&
          AttentionOp::isCausalMask(mask, s, t)) {
        causal = true;
        mask = nullptr;
      } else if (chain->negateMask) {
        mask = NotOp::create(rewriter, loc, mask);
      }
      if (mask && rank == 3 && headView.empty() && maskType.getRank() == 3)
        mask = toFourD(rewriter, loc, mask, headView);
    }

    // key = transpose of key^T's last two dims.
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 1], perm[rank - 2]);
    Value key = TransposeOp::create(rewriter, loc, keyT,
                                    rewriter.getDenseI64ArrayAttr(perm));
    Value q4 = toFourD(rewriter, loc, query, headView);
    Value k4 = toFourD(rewriter, loc, key, headView);
    Value v4 = toFourD(rewriter, loc, value, headView);
    double defaultScale =
        1.0 / std::sqrt(static_cast<double>(qType.getDimSize(rank - 1)));
    FloatAttr scaleAttr;
    if (std::abs(chain->scale - defaultScale) > 1e-6 * defaultScale)
      scaleAttr = rewriter.getF64FloatAttr(chain->scale);
    Value result = AttentionOp::create(
        rewriter, loc, q4, k4, v4, mask,
        causal ? rewriter.getUnitAttr() : UnitAttr(), scaleAttr);
    if (rank == 3 && headView.empty())
      result = SqueezeOp::create(rewriter, loc, result,
                                 rewriter.getDenseI64ArrayAttr({1}));
    else if (rank == 3)
      result = ReshapeOp::create(rewriter, loc, root.getType(), result);
    if (result.getType() != root.getType())
      return failure();
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
