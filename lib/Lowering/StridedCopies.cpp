//===- StridedCopies.cpp - Copies of strided buffers as loops -------------===//

#include "weft/Lowering/Memrefs.h"
#include "weft/Lowering/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSTRIDEDCOPIESTOLOOPS
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

struct StridedCopyToLinalg : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp copy,
                                PatternRewriter &rewriter) const override {
    Type source = copy.getSource().getType(), target = copy.getTarget().getType();
    if (!isa<MemRefType>(source) || !isa<MemRefType>(target) ||
        (weft::isContiguousMemRef(source) && weft::isContiguousMemRef(target)))
      return failure();
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                copy.getTarget());
    return success();
  }
};

struct WeftStridedCopiesToLoops
    : weft::impl::WeftStridedCopiesToLoopsBase<WeftStridedCopiesToLoops> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<StridedCopyToLinalg>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
