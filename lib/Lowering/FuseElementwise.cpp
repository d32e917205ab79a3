//===- FuseElementwise.cpp - Elementwise fusion that keeps GEMMs ----------===//

#include "weft/Lowering/Contractions.h"
#include "weft/Lowering/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
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

/// A generic computing each element from the same-position elements of its
/// inputs: all loops parallel, no index reads, no gathers, no nested loops.
bool isPlainElementwise(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumLoops() != generic.getNumParallelLoops())
    return false;
  return llvm::none_of(generic.getBody()->getOperations(), [](Operation &op) {
    return op.getNumRegions() || isa<tensor::ExtractOp, linalg::IndexOp>(op);
  });
}

/// A generic that only widens each element exactly (bf16 or f16 to f32, a
/// float to f64): a cast, as convert-weft-to-linalg writes one.
bool isExactWidening(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !isPlainElementwise(generic) ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  Block *body = generic.getBody();
  auto widen = dyn_cast<arith::ExtFOp>(body->front());
  auto from = widen ? dyn_cast<FloatType>(widen.getIn().getType()) : nullptr;
  auto to = widen ? dyn_cast<FloatType>(widen.getType()) : nullptr;
  return from && to && (to.isF32() || to.isF64()) &&
         widen.getIn() == body->getArgument(0) &&
         body->getTerminator()->getOperand(0) == widen.getResult() &&
         &body->front() == body->getTerminator()->getPrevNode();
}

/// A widening several elementwise ops read, each of which can take it in:
/// WideningPerReader gives each a copy, and nothing fuses into it or it
/// into a reader before (its body would no longer be only the cast).
bool isSharedWidening(Operation *op) {
  if (!isExactWidening(op) || op->hasOneUse() ||
      !cast<linalg::GenericOp>(op).hasPureTensorSemantics())
    return false;
  return llvm::all_of(op->getUses(), [](OpOperand &use) {
    auto reader = dyn_cast<linalg::GenericOp>(use.getOwner());
    return reader && !isContraction(reader) &&
           linalg::areElementwiseOpsFusable(&use);
  });
}

/// Makes `use` read a copy of `op` (a destination-style op of one result)
/// made right before its reader, with a fresh empty init where `op` had one.
void readCopyOf(DestinationStyleOpInterface op, OpOperand &use,
                PatternRewriter &rewriter) {
  rewriter.setInsertionPoint(use.getOwner());
  IRMapping mapping;
  Value init = op.getDpsInits()[0];
  if (auto empty = init.getDefiningOp<tensor::EmptyOp>())
    mapping.map(init, rewriter.clone(*empty)->getResult(0));
  Operation *copy = rewriter.clone(*op, mapping);
  rewriter.modifyOpInPlace(use.getOwner(),
                           [&] { use.set(copy->getResult(0)); });
}

/// A transpose that keeps the innermost dim in place (the attention's head
/// views, [b, s, h, d] <-> [b, h, s, d]) becomes a generic, so that the casts
/// and other elementwise work around it fuse into the copy: it needs no
/// shared-memory tiling, its rows staying contiguous on both sides. One a
/// GEMM reads stays for FoldTransposeIntoGemm.
struct GeneralizeRowKeepingTranspose
    : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> permutation = op.getPermutation();
    if (!op.hasPureTensorSemantics() || permutation.empty() ||
        permutation.back() != int64_t(permutation.size()) - 1 ||
        llvm::any_of(op->getUsers(), isContraction))
      return failure();
    return linalg::generalizeNamedOp(rewriter, op);
  }
};

/// Whether `producer`, read by other ops too, can fuse into the consumer
/// reading it through `fused` by staying a result of the fused op: the
/// producer's loop nest then runs once, inside its first user, instead of
/// once per user. Only into an all-parallel consumer that reads each
/// producer element once (no broadcast) through that one operand, and
/// only where every other user comes later in the block, so the fused op
/// (placed at the consumer) dominates them.
bool fusesAsExtraResult(OpOperand *fused, Operation *producer) {
  auto consumer = dyn_cast<linalg::GenericOp>(fused->getOwner());
  if (!consumer || consumer.getNumLoops() != consumer.getNumParallelLoops() ||
      !consumer.getMatchingIndexingMap(fused).isPermutation())
    return false;
  for (OpOperand &operand : consumer->getOpOperands())
    if (&operand != fused && operand.get().getDefiningOp() == producer)
      return false;
  for (Operation *user : producer->getUsers())
    if (user != consumer && (user->getBlock() != consumer->getBlock() ||
                             !consumer->isBeforeInBlock(user)))
      return false;
  return true;
}

/// Fuses a producer that other ops read too into its first consumer, the
/// producer's values becoming an extra result of the fused op that its
/// other users then read: the producer's loop nest runs once, inside the
/// consumer, instead of as a kernel of its own (an AdamW update, whose
/// moments are both stored and read again, becomes one loop).
struct FuseProducerWithOtherUsers : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    if (isContraction(consumer) || isSharedWidening(consumer))
      return failure();
    for (OpOperand *operand : consumer.getDpsInputOperands()) {
      Operation *producer = operand->get().getDefiningOp();
      if (!producer || producer->hasOneUse() || isSharedWidening(producer) ||
          !linalg::areElementwiseOpsFusable(operand) ||
          !fusesAsExtraResult(operand, producer))
        continue;
      FailureOr<linalg::ElementwiseOpFusionResult> fused =
          linalg::fuseElementwiseOps(rewriter, operand);
      if (failed(fused))
        return failure();
      for (auto [original, replacement] : fused->replacements)
        rewriter.replaceAllUsesWith(original, replacement);
      rewriter.eraseOp(consumer);
      if (producer->use_empty())
        rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }
};

/// A value widened for several elementwise ops (CSE merges the casts
/// weft-sink-widening-casts gave each reader: a bf16 pre-activation read by
/// GELU and by its gradient) is widened again in each of them, the cast
/// fusing into each: stored, the wide copy would cost its bytes written
/// once and read back by every other reader, for one conversion per
/// element saved. Where some reader cannot take the cast in, the wide
/// values are stored anyway and the cast fuses into its first reader as an
/// extra result (FuseProducerWithOtherUsers).
struct WideningPerReader : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp widening,
                                PatternRewriter &rewriter) const override {
    if (!isSharedWidening(widening))
      return failure();
    // The original serves the last reader.
    SmallVector<OpOperand *> uses = llvm::to_vector(llvm::map_range(
        widening->getUses(), [](OpOperand &use) { return &use; }));
    for (OpOperand *use : ArrayRef<OpOperand *>(uses).drop_back()) {
      readCopyOf(widening, *use, rewriter);
    }
    return success();
  }
};

/// A fill that several ops write into (CSE merges identical fills) becomes
/// one fill per op. Shared, bufferization fills one buffer and copies it
/// into the others; one each, every GEMM or reduction finds its own fill
/// right before it and can take it in (a GEMM's beta = 0).
struct FillPerUser : public OpRewritePattern<linalg::FillOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::FillOp fill,
                                PatternRewriter &rewriter) const override {
    if (!fill.hasPureTensorSemantics() || fill->use_empty() ||
        fill->hasOneUse())
      return failure();
    SmallVector<OpOperand *> uses = llvm::to_vector(
        llvm::map_range(fill->getUses(), [](OpOperand &use) { return &use; }));
    // The first user in the block keeps the fill, the others get copies.
    Block *block = fill->getBlock();
    if (llvm::all_of(uses, [&](OpOperand *use) {
          return use->getOwner()->getBlock() == block;
        }))
      llvm::sort(uses, [](OpOperand *a, OpOperand *b) {
        return a->getOwner()->isBeforeInBlock(b->getOwner());
      });
    for (OpOperand *use : ArrayRef<OpOperand *>(uses).drop_front()) {
      readCopyOf(fill, *use, rewriter);
    }
    return success();
  }
};

struct WeftFuseElementwisePass
    : public weft::impl::WeftFuseElementwiseBase<WeftFuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // A producer with other users is never copied into a consumer: the
    // work would repeat and the kernels grow with every use (the backward
    // pass reads most forward values several times). It fuses only as an
    // extra result (FuseProducerWithOtherUsers).
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      return !isContraction(fused->getOwner()) &&
             !isSharedWidening(fused->getOwner()) && producer &&
             producer->hasOneUse();
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    // A reshape between two elementwise ops (a GEMM's [b * s, n] result
    // cast and then read as [b, s, n]) moves out of their way so that they
    // fuse; a GEMM keeps the shapes it was given.
    linalg::ControlFusionFn reshapeControl = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      if (!producer)
        return false;
      Operation *generic =
          isa<linalg::GenericOp>(producer) ? producer : fused->getOwner();
      return producer->hasOneUse() && isPlainElementwise(generic);
    };
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, reshapeControl);
    patterns.add<FillPerUser, FoldTransposeIntoGemm, FuseProducerWithOtherUsers,
                 GeneralizeRowKeepingTranspose>(&getContext());
    // Before anything fuses into a shared widening or it into a reader.
    patterns.add<WideningPerReader>(&getContext(), /*benefit=*/2);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
