//===- SerializeInnerLoop.cpp - Parallel outer dims, vectorizable inner ---===//

#include "weft/Target/CPU/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSERIALIZEINNERLOOP
#include "weft/Target/CPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// Static trip count of dim `i` of a loop, or nullopt.
std::optional<int64_t> tripCount(Value lower, Value upper, Value step) {
  std::optional<int64_t> lb = getConstantIntValue(lower),
                         ub = getConstantIntValue(upper),
                         st = getConstantIntValue(step);
  if (!lb || !ub || !st || *st <= 0)
    return std::nullopt;
  return llvm::divideCeil(std::max<int64_t>(0, *ub - *lb), *st);
}

/// Iterations of the innermost loops under `region` (a loop with bounds
/// unknown at compile time counts as too many to serialize).
int64_t innerWork(Region &region, int64_t limit);

int64_t loopWork(Operation *op, int64_t limit) {
  int64_t trips = 1;
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    std::optional<int64_t> n =
        tripCount(loop.getLowerBound(), loop.getUpperBound(), loop.getStep());
    if (!n)
      return limit;
    trips = *n;
  } else if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
    for (unsigned i = 0; i < loop.getNumLoops(); ++i) {
      std::optional<int64_t> n = tripCount(
          loop.getLowerBound()[i], loop.getUpperBound()[i], loop.getStep()[i]);
      if (!n)
        return limit;
      trips = std::min(limit, trips * *n);
    }
  }
  return std::min(
      limit, trips * std::max<int64_t>(1, innerWork(op->getRegion(0), limit)));
}

int64_t innerWork(Region &region, int64_t limit) {
  int64_t work = 0;
  for (Operation &op : region.getOps())
    if (isa<scf::ForOp, scf::ParallelOp>(op))
      work = std::min(limit, work + loopWork(&op, limit));
  return work;
}

struct WeftSerializeInnerLoopPass
    : public weft::impl::WeftSerializeInnerLoopBase<
          WeftSerializeInnerLoopPass> {
  using WeftSerializeInnerLoopBase::WeftSerializeInnerLoopBase;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // A nest that adds into memory atomically (weft.scatter_add's) runs
    // sequentially with plain adds: the sum's order is then the program's,
    // so a run repeats bit for bit.
    SmallVector<scf::ParallelOp> atomic;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (!loop->getParentOfType<scf::ParallelOp>() &&
          loop->walk(
                  [](memref::AtomicRMWOp) { return WalkResult::interrupt(); })
              .wasInterrupted())
        atomic.push_back(loop);
    });
    for (scf::ParallelOp loop : atomic)
      serialize(rewriter, loop, 0);
    SmallVector<memref::AtomicRMWOp> adds;
    getOperation()->walk([&](memref::AtomicRMWOp add) {
      if (add.getKind() == arith::AtomicRMWKind::addf &&
          !add->getParentOfType<scf::ParallelOp>())
        adds.push_back(add);
    });
    for (memref::AtomicRMWOp add : adds) {
      rewriter.setInsertionPoint(add);
      Value old = memref::LoadOp::create(rewriter, add.getLoc(),
                                         add.getMemref(), add.getIndices());
      Value sum =
          arith::AddFOp::create(rewriter, add.getLoc(), old, add.getValue());
      memref::StoreOp::create(rewriter, add.getLoc(), sum, add.getMemref(),
                              add.getIndices());
      rewriter.replaceOp(add, old);
    }

    // A nest with little work runs sequentially: a parallel region's
    // fork and join would cost more than the loop.
    SmallVector<scf::ParallelOp> small;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (loop.getNumResults() == 0 &&
          !loop->getParentOfType<scf::ParallelOp>() &&
          loopWork(loop, minParallelWork) < minParallelWork)
        small.push_back(loop);
    });
    for (scf::ParallelOp loop : small)
      serialize(rewriter, loop, 0);

    SmallVector<scf::ParallelOp> loops;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (loop.getNumLoops() > 1 && loop.getNumResults() == 0)
        loops.push_back(loop);
    });
    for (scf::ParallelOp loop : loops)
      serialize(rewriter, loop, loop.getNumLoops() - 1);
  }

  /// Keeps dims [0, first) of `loop` parallel (none if first is 0) and
  /// turns the others into nested scf.for loops.
  void serialize(IRRewriter &rewriter, scf::ParallelOp loop, unsigned first) {
    rewriter.setInsertionPoint(loop);
    SmallVector<Value> ivs;
    if (first > 0) {
      auto outer = scf::ParallelOp::create(
          rewriter, loop.getLoc(), loop.getLowerBound().take_front(first),
          loop.getUpperBound().take_front(first),
          loop.getStep().take_front(first));
      llvm::append_range(ivs, outer.getInductionVars());
      rewriter.setInsertionPointToStart(outer.getBody());
    }
    for (unsigned i = first; i < loop.getNumLoops(); ++i) {
      auto inner =
          scf::ForOp::create(rewriter, loop.getLoc(), loop.getLowerBound()[i],
                             loop.getUpperBound()[i], loop.getStep()[i]);
      ivs.push_back(inner.getInductionVar());
      rewriter.setInsertionPoint(inner.getBody()->getTerminator());
    }
    Block *body = loop.getBody();
    rewriter.eraseOp(body->getTerminator()); // scf.reduce without operands
    rewriter.inlineBlockBefore(body, rewriter.getInsertionBlock(),
                               rewriter.getInsertionPoint(), ivs);
    rewriter.eraseOp(loop);
  }
};

} // namespace
