//===- SerializeInnerLoop.cpp - Parallel outer dims, vectorizable inner ---===//

#include "weft/Target/CPU/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSERIALIZEINNERLOOP
#include "weft/Target/CPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

struct WeftSerializeInnerLoopPass
    : public weft::impl::WeftSerializeInnerLoopBase<
          WeftSerializeInnerLoopPass> {
  void runOnOperation() override {
    SmallVector<scf::ParallelOp> loops;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (loop.getNumLoops() > 1 && loop.getNumResults() == 0)
        loops.push_back(loop);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp loop : loops) {
      unsigned last = loop.getNumLoops() - 1;
      rewriter.setInsertionPoint(loop);
      auto outer = scf::ParallelOp::create(
          rewriter, loop.getLoc(), loop.getLowerBound().drop_back(),
          loop.getUpperBound().drop_back(), loop.getStep().drop_back());
      rewriter.setInsertionPointToStart(outer.getBody());
      auto inner = scf::ForOp::create(
          rewriter, loop.getLoc(), loop.getLowerBound()[last],
          loop.getUpperBound()[last], loop.getStep()[last]);
      // Move the body: outer IVs for the first dims, the for IV for the last.
      SmallVector<Value> ivs(outer.getInductionVars());
      ivs.push_back(inner.getInductionVar());
      Block *body = loop.getBody();
      rewriter.eraseOp(body->getTerminator()); // scf.reduce without operands
      rewriter.setInsertionPoint(inner.getBody()->getTerminator());
      rewriter.inlineBlockBefore(body, inner.getBody()->getTerminator(), ivs);
      rewriter.eraseOp(loop);
    }
  }
};

} // namespace
