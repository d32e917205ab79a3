//===- FuseElementwise.cpp - Elementwise fusion that keeps GEMMs ----------===//

#include "weft/Lowering/Contractions.h"
#include "weft/Lowering/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFUSEELEMENTWISE
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// A generic that multiplies and accumulates: a GEMM library takes it as
/// it is.
bool isContraction(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && matchGemm(generic).has_value();
}

struct WeftFuseElementwisePass
    : public weft::impl::WeftFuseElementwiseBase<WeftFuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // A producer with other users would be copied into each consumer:
    // the work repeats and the kernels grow with every use (the backward
    // pass reads most forward values several times).
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      return !isContraction(fused->getOwner()) && producer &&
             producer->hasOneUse();
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
