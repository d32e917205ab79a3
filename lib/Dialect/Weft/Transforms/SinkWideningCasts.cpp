//===- SinkWideningCasts.cpp - Data movement on the narrow side -----------===//
//
// A --precision bf16 step widens each contraction's result to f32 and
// narrows the next contraction's operands again; what lies between them is
// often only data movement (the attention's head views and, backward, their
// concatenation). Moving the widening cast below that data movement lets it
// meet the narrowing cast and vanish: the copies move bf16, and no f32 copy
// of the head views is ever made. A widened value several ops read is
// widened in each of them instead of being stored in f32, a norm's gradient
// included.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSINKWIDENINGCASTS
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

Type elementOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

/// A cast from a float to f32 or f64 of more bits: every value survives.
bool isExactWidening(CastOp op) {
  auto from = dyn_cast<FloatType>(elementOf(op.getInput()));
  auto to = dyn_cast<FloatType>(elementOf(op.getResult()));
  return from && to && (to.isF32() || to.isF64()) &&
         from.getWidth() < to.getWidth();
}

/// The widening cast `value` comes from, when data movement is its only
/// reader.
CastOp wideningReadOnce(Value value) {
  auto cast = value.getDefiningOp<CastOp>();
  return cast && isExactWidening(cast) && cast->hasOneUse() ? cast : CastOp();
}

/// Data movement whose tensor operands are all widened, read by it alone,
/// from one narrow type: it runs on the narrow values instead and its
/// results are widened.
struct SinkBelowDataMovement : public RewritePattern {
  SinkBelowDataMovement(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<ReshapeOp, TransposeOp, SliceOp, SplitOp, ConcatOp, SqueezeOp,
             UnsqueezeOp, ExpandOp>(op) ||
        op->getNumOperands() == 0)
      return failure();
    SmallVector<Value> narrow;
    for (Value operand : op->getOperands()) {
      CastOp widening = wideningReadOnce(operand);
      if (!widening)
        return failure();
      narrow.push_back(widening.getInput());
    }
    Type narrowType = elementOf(narrow.front());
    if (llvm::any_of(narrow,
                     [&](Value v) { return elementOf(v) != narrowType; }))
      return failure();
    Operation *moved = rewriter.clone(*op);
    moved->setOperands(narrow);
    SmallVector<Value> widened;
    for (auto [result, original] :
         llvm::zip(moved->getResults(), op->getResults())) {
      auto type = cast<RankedTensorType>(original.getType());
      result.setType(type.clone(narrowType));
      widened.push_back(CastOp::create(rewriter, op->getLoc(), type, result));
    }
    SmallVector<Operation *> casts;
    for (Value operand : op->getOperands())
      casts.push_back(operand.getDefiningOp());
    rewriter.replaceOp(op, widened);
    for (Operation *cast : casts)
      rewriter.eraseOp(cast);
    return success();
  }
};

/// Whether `user`, reading a widened value, lowers to a loop that can widen
/// each element as it reads it (elementwise work, a reduction) or is data
/// movement the cast then moves below.
bool widensAsItReads(Operation *user) {
  return user->hasTrait<OpTrait::Elementwise>() ||
         isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, WhereOp,
             ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReshapeOp,
             TransposeOp, SliceOp, SplitOp, ConcatOp, SqueezeOp, UnsqueezeOp,
             ExpandOp>(user);
}

/// A widened value several ops read (a bf16 projection read by GELU and by
/// GELU's gradient): each reader that can widen as it reads gets a cast of
/// its own, which fuses into it, so the f32 copy is never stored and the
/// readers read bf16.
struct WideningCastPerReader : public OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    if (!isExactWidening(op) || op->hasOneUse())
      return failure();
    llvm::SetVector<Operation *> own;
    bool shared = false;
    for (Operation *user : op->getUsers()) {
      if (widensAsItReads(user))
        own.insert(user);
      else
        shared = true;
    }
    // Where every reader gets one, the original serves one of them.
    if (!shared && !own.empty())
      own.pop_back();
    if (own.empty())
      return failure();
    for (Operation *user : own) {
      rewriter.setInsertionPoint(user);
      Value copy = rewriter.clone(*op)->getResult(0);
      rewriter.modifyOpInPlace(
          user, [&] { user->replaceUsesOfWith(op.getResult(), copy); });
    }
    return success();
  }
};

/// A value widened and narrowed back to its own type is itself.
struct CancelRoundTrip : public OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto widening = op.getInput().getDefiningOp<CastOp>();
    if (!widening || !isExactWidening(widening) ||
        widening.getInput().getType() != op.getType())
      return failure();
    rewriter.replaceOp(op, widening.getInput());
    return success();
  }
};

/// A norm's gradient reads a widened result gradient narrow: it widens
/// each element as its row kernel reads it.
struct NormGradReadsNarrow : public OpRewritePattern<NormGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(NormGradOp op,
                                PatternRewriter &rewriter) const override {
    auto widening = op.getResultGrad().getDefiningOp<CastOp>();
    if (!widening || !isExactWidening(widening))
      return failure();
    rewriter.modifyOpInPlace(
        op, [&] { op.getResultGradMutable().assign(widening.getInput()); });
    return success();
  }
};

struct WeftSinkWideningCastsPass
    : public weft::impl::WeftSinkWideningCastsBase<WeftSinkWideningCastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<WideningCastPerReader, SinkBelowDataMovement, CancelRoundTrip,
                 NormGradReadsNarrow>(&getContext());
    // Only these rewrites: folding every op on the way would change more
    // than the casts.
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
