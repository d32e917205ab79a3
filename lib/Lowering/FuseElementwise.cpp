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

/// A transpose read only by a GEMM becomes the GEMM's indexing of the
/// transpose's input: the GEMM library reads the matrix with a layout flag
/// (a transposed or strided view) instead of a copy being made for it.
/// Only where the input's innermost dim stays one of the operand's two
/// matrix dims, so that the view keeps a contiguous dim for the library.
struct FoldTransposeIntoGemm : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<GemmShape> gemm = matchGemm(op);
    if (!gemm || !op.hasPureTensorSemantics())
      return failure();
    for (OpOperand *operand : op.getDpsInputOperands()) {
      auto transpose = operand->get().getDefiningOp<linalg::TransposeOp>();
      if (!transpose || !transpose->hasOneUse())
        continue;
      // Result dim i is input dim permutation[i].
      AffineMap map = op.getMatchingIndexingMap(operand);
      ArrayRef<int64_t> permutation = transpose.getPermutation();
      SmallVector<AffineExpr> inputExprs(map.getNumResults());
      for (auto [i, dim] : llvm::enumerate(permutation))
        inputExprs[dim] = map.getResult(i);
      AffineMap inputMap =
          AffineMap::get(map.getNumDims(), 0, inputExprs, op.getContext());
      bool isA = (operand->getOperandNumber() == 0) == gemm->lhsIsA;
      unsigned row = isA ? gemm->m : gemm->k, col = isA ? gemm->k : gemm->n;
      auto innermost = dyn_cast<AffineDimExpr>(inputExprs.back());
      if (!innermost ||
          (innermost.getPosition() != row && innermost.getPosition() != col))
        continue;
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      maps[operand->getOperandNumber()] = inputMap;
      rewriter.modifyOpInPlace(op, [&] {
        operand->set(transpose.getInput());
        op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
      });
      rewriter.eraseOp(transpose);
      return success();
    }
    return failure();
  }
};

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
    patterns.add<FoldTransposeIntoGemm>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
