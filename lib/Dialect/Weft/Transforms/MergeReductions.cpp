//===- MergeReductions.cpp - One all-reduce for a sum of all-reduces ------===//
//
// A parallel residual (GPT-J, GPT-NeoX, Phi, Falcon) adds the attention's
// and the MLP's row-split outputs: two partial sums, each all-reduced on
// its own by the partitioner. Their sum is one partial sum: adding first
// and reducing once halves the layer's tensor-parallel traffic, as
// Megatron-LM does for these models. Terms that are not reduced (a
// row-split linear's bias, added after its reduction) move past the one
// reduction.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace weft {
#define GEN_PASS_DEF_WEFTMERGEREDUCTIONS
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// `value`'s all-reduce when it is a sum read only here.
shard::AllReduceOp soleSum(Value value) {
  auto reduce = value.getDefiningOp<shard::AllReduceOp>();
  if (!reduce || !value.hasOneUse() ||
      reduce.getReduction() != shard::ReductionKind::Sum ||
      reduce.getInput().getType() != reduce.getType())
    return nullptr;
  return reduce;
}

bool sameGroup(shard::AllReduceOp a, shard::AllReduceOp b) {
  return a.getGrid() == b.getGrid() && a.getGridAxes() == b.getGridAxes() &&
         a.getType() == b.getType();
}

/// A sum of terms (a tree of adds of one type, each read only by the next)
/// with two or more all-reduced partial sums among them: the partial sums
/// are added first and reduced once; the other terms are added after.
struct MergeSummedReductions : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp root,
                                PatternRewriter &rewriter) const override {
    // The outermost add of a tree rewrites it whole.
    if (root->hasOneUse()) {
      auto user = llvm::dyn_cast<AddOp>(*root->user_begin());
      if (user && user.getType() == root.getType())
        return failure();
    }
    SmallVector<Value> terms;
    // Left to right: the sum keeps the model's order of terms.
    SmallVector<Value> pending = {root.getRhs(), root.getLhs()};
    while (!pending.empty()) {
      Value term = pending.pop_back_val();
      auto inner = term.getDefiningOp<AddOp>();
      if (inner && term.hasOneUse() && inner.getType() == root.getType()) {
        pending.push_back(inner.getRhs());
        pending.push_back(inner.getLhs());
      } else {
        terms.push_back(term);
      }
    }
    // The largest group of reductions that sum over the same ranks.
    SmallVector<shard::AllReduceOp> merged;
    for (Value term : terms) {
      shard::AllReduceOp reduce = soleSum(term);
      if (!reduce || reduce.getType() != root.getType())
        continue;
      SmallVector<shard::AllReduceOp> group;
      for (Value other : terms)
        if (shard::AllReduceOp candidate = soleSum(other);
            candidate && sameGroup(reduce, candidate))
          group.push_back(candidate);
      if (group.size() > merged.size())
        merged = std::move(group);
    }
    if (merged.size() < 2)
      return failure();

    Location loc = root.getLoc();
    Value sum = merged.front().getInput();
    for (shard::AllReduceOp reduce : llvm::drop_begin(merged))
      sum = AddOp::create(rewriter, loc, sum, reduce.getInput());
    shard::AllReduceOp first = merged.front();
    Value result =
        shard::AllReduceOp::create(rewriter, first.getLoc(), first.getType(),
                                   first.getGrid(), first.getGridAxes(), sum);
    llvm::SmallPtrSet<Operation *, 4> reduced;
    for (shard::AllReduceOp reduce : merged)
      reduced.insert(reduce);
    for (Value term : terms)
      if (!reduced.contains(term.getDefiningOp()))
        result = AddOp::create(rewriter, loc, result, term);
    rewriter.replaceOp(root, result);
    return success();
  }
};

struct MergeReductionsPass
    : public weft::impl::WeftMergeReductionsBase<MergeReductionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MergeSummedReductions>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
