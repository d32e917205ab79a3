//===- SinkReshapes.cpp - Keep merged dims apart until they must merge ----===//
//
// PyTorch's nn.MultiheadAttention views the [tgt, batch, heads * hd]
// projection as [tgt, batch * heads, hd]: one reshape that splits the
// feature dim and merges batch with heads. A sharding rule maps each dim to
// one factor, so the heads half of a merged dim cannot carry tensor
// parallelism and the partitioner gathers it. This pass splits such a
// reshape into an expand (every dim cut into the pieces both shapes share)
// and a merge, then moves the merge down through transposes, unit-dim
// changes and attention until it meets the reshape that merges back into
// features, and below the output projection, which maps features alone:
// the heads then split over tp and the batch over dp all the way.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSINKRESHAPES
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// A half-open range of dims.
using DimRun = std::pair<int64_t, int64_t>;

SmallVector<int64_t> withoutUnitDims(ArrayRef<int64_t> shape) {
  return llvm::to_vector(
      llvm::make_filter_range(shape, [](int64_t size) { return size != 1; }));
}

bool isStatic(ArrayRef<int64_t> shape) {
  return llvm::all_of(shape, [](int64_t size) { return size > 0; });
}

/// The run of dims of `from` that each dim of `to` merges, when `to` only
/// merges consecutive dims of `from` (a unit dim of `to` merges none). `from`
/// must have no unit dims: one could belong to either neighbour.
std::optional<SmallVector<DimRun>> mergedRuns(ArrayRef<int64_t> from,
                                              ArrayRef<int64_t> to) {
  if (!isStatic(from) || !isStatic(to) || llvm::is_contained(from, 1))
    return std::nullopt;
  SmallVector<DimRun> runs;
  int64_t next = 0, end = static_cast<int64_t>(from.size());
  for (int64_t size : to) {
    int64_t start = next, product = 1;
    while (product < size && next < end)
      product *= from[next++];
    if (product != size)
      return std::nullopt;
    runs.push_back({start, next});
  }
  if (next != end)
    return std::nullopt;
  return runs;
}

/// The shape both `a` and `b` reach by cutting dims only: the sizes between
/// the union of their running products. None when a dim of one straddles a
/// boundary of the other unevenly ([4, 6] and [6, 4]).
std::optional<SmallVector<int64_t>> commonRefinement(ArrayRef<int64_t> a,
                                                     ArrayRef<int64_t> b) {
  SmallVector<int64_t> bounds;
  for (ArrayRef<int64_t> shape : {a, b}) {
    int64_t product = 1;
    for (int64_t size : shape)
      bounds.push_back(product *= size);
  }
  llvm::sort(bounds);
  bounds.erase(llvm::unique(bounds), bounds.end());
  SmallVector<int64_t> pieces;
  int64_t previous = 1;
  for (int64_t bound : bounds) {
    if (bound % previous != 0)
      return std::nullopt;
    pieces.push_back(bound / previous);
    previous = bound;
  }
  return pieces;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

/// Whether some run holds two dims or more.
bool mergesDims(ArrayRef<DimRun> runs) {
  return llvm::any_of(runs,
                      [](DimRun run) { return run.second - run.first > 1; });
}

/// A reshape, squeeze or unsqueeze whose result only merges consecutive dims
/// of its input (which has no unit dims) and merges at least two of them.
struct Merge {
  Operation *op;
  Value input;
  SmallVector<DimRun> runs;
};

std::optional<Merge> matchMerge(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !isa<ReshapeOp, SqueezeOp, UnsqueezeOp>(op))
    return std::nullopt;
  Value input = op->getOperand(0);
  std::optional<SmallVector<DimRun>> runs =
      mergedRuns(shapeOf(input), shapeOf(v));
  if (!runs || !mergesDims(*runs))
    return std::nullopt;
  return Merge{op, input, std::move(*runs)};
}

Value reshapeTo(PatternRewriter &rewriter, Location loc, Value v,
                ArrayRef<int64_t> shape) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  return ReshapeOp::create(rewriter, loc, type.clone(shape), v);
}

/// reshape [5, 2, 32] -> [5, 8, 8] (32 = 4 x 8 heads, 8 = 2 x 4 batch x
/// heads) becomes reshape [5, 2, 32] -> [5, 2, 4, 8] -> [5, 8, 8].
struct SplitMixedReshape : public OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<int64_t> in = withoutUnitDims(shapeOf(op.getInput()));
    SmallVector<int64_t> out = withoutUnitDims(shapeOf(op.getResult()));
    if (!isStatic(in) || !isStatic(out) || mergedRuns(in, out) ||
        mergedRuns(out, in))
      return failure();
    std::optional<SmallVector<int64_t>> pieces = commonRefinement(in, out);
    if (!pieces)
      return failure();
    Value expanded = reshapeTo(rewriter, op.getLoc(), op.getInput(), *pieces);
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), expanded);
    return success();
  }
};

/// transpose(merge(x)) = merge(transpose(x)), the runs permuted.
struct SinkMergeThroughTranspose : public OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<Merge> merge = matchMerge(op.getInput());
    if (!merge || !merge->op->hasOneUse())
      return failure();
    SmallVector<int64_t> permutation;
    for (int64_t source : op.getPermutation())
      for (int64_t d = merge->runs[source].first;
           d < merge->runs[source].second; ++d)
        permutation.push_back(d);
    Value transposed =
        TransposeOp::create(rewriter, op.getLoc(), merge->input,
                            rewriter.getDenseI64ArrayAttr(permutation));
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), transposed);
    return success();
  }
};

/// A reshape, squeeze or unsqueeze of a merge that itself only merges the
/// merge's input is one reshape of that input.
template <typename OpTy> struct FoldMergeChain : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    std::optional<Merge> merge = matchMerge(op->getOperand(0));
    if (!merge || !mergedRuns(shapeOf(merge->input), shapeOf(op.getResult())))
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), merge->input);
    return success();
  }
};

/// Attention over [B * H, 1, S, D] views of [B, H, S, D] operands is
/// attention over the operands: batch and head dims are both independent.
struct SinkMergeThroughAttention : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getSaveLogSumExp())
      return failure();
    SmallVector<Value> unmerged;
    for (Value operand : {op.getQuery(), op.getKey(), op.getValue()}) {
      std::optional<Merge> merge = matchMerge(operand);
      if (!merge || !merge->op->hasOneUse())
        return failure();
      // The sequence and feature dims stay themselves; the batch dims come
      // from exactly two dims of the input.
      ArrayRef<DimRun> runs = merge->runs;
      if (runs[2] != DimRun{2, 3} || runs[3] != DimRun{3, 4} ||
          shapeOf(merge->input).size() != 4)
        return failure();
      unmerged.push_back(merge->input);
    }
    ArrayRef<int64_t> batch = shapeOf(unmerged[0]).take_front(2);
    if (shapeOf(unmerged[1]).take_front(2) != batch ||
        shapeOf(unmerged[2]).take_front(2) != batch)
      return failure();
    // A mask that broadcasts over batch and heads reads the same either way.
    if (Value mask = op.getMask()) {
      ArrayRef<int64_t> maskShape = shapeOf(mask);
      if (llvm::any_of(
              maskShape.drop_back(std::min<size_t>(2, maskShape.size())),
              [](int64_t size) { return size != 1; }))
        return failure();
    }
    auto attention = AttentionOp::create(rewriter, op.getLoc(), unmerged[0],
                                         unmerged[1], unmerged[2], op.getMask(),
                                         op.getCausalAttr(), op.getScaleAttr(),
                                         /*save_log_sum_exp=*/UnitAttr());
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getResult().getType(),
                                           attention.getResult());
    return success();
  }
};

/// A linear maps the last dim alone, so the rows it reads may stay apart:
/// linear(merge(x)) = merge(linear(x with only its features merged)).
struct SinkMergeThroughLinear : public OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<Merge> merge = matchMerge(op.getInput());
    if (!merge || !merge->op->hasOneUse())
      return failure();
    ArrayRef<DimRun> rows = ArrayRef<DimRun>(merge->runs).drop_back();
    if (!mergesDims(rows))
      return failure();
    ArrayRef<int64_t> unmerged = shapeOf(merge->input);
    SmallVector<int64_t> shape(unmerged.take_front(merge->runs.back().first));
    shape.push_back(shapeOf(op.getInput()).back());
    Value input = reshapeTo(rewriter, op.getLoc(), merge->input, shape);
    auto linear = LinearOp::create(rewriter, op.getLoc(), input, op.getWeight(),
                                   op.getBias(), op.getTransposeWeightAttr());
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(),
                                           linear.getResult());
    return success();
  }
};

struct WeftSinkReshapesPass
    : public weft::impl::WeftSinkReshapesBase<WeftSinkReshapesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitMixedReshape, SinkMergeThroughTranspose,
                 SinkMergeThroughAttention, SinkMergeThroughLinear,
                 FoldMergeChain<ReshapeOp>, FoldMergeChain<SqueezeOp>,
                 FoldMergeChain<UnsqueezeOp>>(&getContext());
    TransposeOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
