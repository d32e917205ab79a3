//===- ColumnReductions.cpp - Sums over rows, vectorized along the rows ---===//
//
// A sum over the rows of a row-major matrix (a bias's gradient, a norm's
// scale gradient) loops over the columns, then down each column: the inner
// loop strides by a row, and LLVM vectorizes it with gathers. Tiles of
// columns instead, each summing row after row over its columns: the inner
// loop reads contiguous memory, and each column still adds its rows in
// order.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace weft {
#define GEN_PASS_DEF_WEFTTILECOLUMNREDUCTIONS
#include "weft/Target/CPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The parallel loop along which every operand of `op` is contiguous (the
/// loop its last dim is indexed by, at unit stride), where the innermost
/// loop is a reduction; none otherwise.
std::optional<unsigned> contiguousParallelLoop(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (!op.hasPureBufferSemantics() || iterators.empty() ||
      iterators.back() != utils::IteratorType::reduction)
    return std::nullopt;
  std::optional<unsigned> loop;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.hasStaticShape())
      return std::nullopt;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (type.getRank() == 0)
      continue;
    auto [strides, offset] = type.getStridesAndOffset();
    auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
    if (!last || strides.back() != 1 ||
        iterators[last.getPosition()] != utils::IteratorType::parallel ||
        (loop && *loop != last.getPosition()))
      return std::nullopt;
    loop = last.getPosition();
  }
  return loop;
}

struct WeftTileColumnReductionsPass
    : public weft::impl::WeftTileColumnReductionsBase<
          WeftTileColumnReductionsPass> {
  using WeftTileColumnReductionsBase::WeftTileColumnReductionsBase;
  void runOnOperation() override {
    if (columns < 1) {
      getOperation()->emitError(
          "weft-tile-column-reductions: columns must be at least 1");
      return signalPassFailure();
    }
    SmallVector<std::pair<linalg::GenericOp, unsigned>> reductions;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (std::optional<unsigned> loop = contiguousParallelLoop(op))
        reductions.push_back({op, *loop});
    });
    IRRewriter rewriter(&getContext());
    for (auto [op, loop] : reductions) {
      unsigned loops = op.getNumLoops();
      SmallVector<int64_t> tiles(loops, 0);
      tiles[loop] = columns;
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::TiledLinalgOp> tiled = linalg::tileLinalgOp(
          rewriter, op,
          linalg::LinalgTilingOptions().setTileSizes(tiles).setLoopType(
              linalg::LinalgTilingLoopType::ParallelLoops));
      if (failed(tiled))
        continue;
      rewriter.eraseOp(op);
      // The contiguous loop innermost, the others in their order.
      SmallVector<unsigned> order;
      for (unsigned d = 0; d < loops; ++d)
        if (d != loop)
          order.push_back(d);
      order.push_back(loop);
      rewriter.setInsertionPoint(tiled->op);
      FailureOr<linalg::GenericOp> tile = linalg::interchangeGenericOp(
          rewriter, cast<linalg::GenericOp>(tiled->op.getOperation()), order);
      // Sequential loops inside the tile: the tiles are the parallel loop.
      if (failed(tile) || failed(linalg::linalgOpToLoops(rewriter, *tile)))
        return signalPassFailure();
      rewriter.eraseOp(*tile);
    }
  }
};

} // namespace
