//===- BlasContractions.cpp - GEMMs to BLAS, fusion that keeps them -------===//

#include "weft/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SmallSet.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFUSEELEMENTWISE
#define GEN_PASS_DEF_WEFTCONTRACTIONSTOBLAS
#define GEN_PASS_DEF_WEFTAPPROXIMATEMATH
#include "weft/Target/CPU/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// The loops of a `out += a * b` generic: which loop is m, n and k, and the
/// batch loops (the output's leading dims).
struct GemmShape {
  SmallVector<unsigned> batch;
  unsigned m, n, k;
  bool lhsIsA; // input 0 is indexed by (m, k), input 1 by (k, n)
};

/// Matches a generic computing out[batch.., m, n] += a[.., m, k] * b[.., k, n]
/// with plain dim or constant-0 indexing.
std::optional<GemmShape> matchGemm(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  SmallVector<utils::IteratorType> its = op.getIteratorTypesArray();
  if (llvm::count(its, utils::IteratorType::reduction) != 1)
    return std::nullopt;
  // Body: yield(addf(out, mulf(in0, in1))) in either operand order.
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 3)
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  Value out = body.getArgument(2);
  Value product = add.getLhs() == out ? add.getRhs() : add.getLhs();
  if (add.getLhs() != out && add.getRhs() != out)
    return std::nullopt;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul || !((mul.getLhs() == body.getArgument(0) &&
                 mul.getRhs() == body.getArgument(1)) ||
                (mul.getLhs() == body.getArgument(1) &&
                 mul.getRhs() == body.getArgument(0))))
    return std::nullopt;
  // Every operand dim must be a loop or the constant 0.
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto loopsOf = [](AffineMap map) -> std::optional<llvm::SmallSet<unsigned, 4>> {
    llvm::SmallSet<unsigned, 4> loops;
    for (AffineExpr e : map.getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e))
        loops.insert(d.getPosition());
      else if (auto c = dyn_cast<AffineConstantExpr>(e); !c || c.getValue() != 0)
        return std::nullopt;
    }
    return loops;
  };
  auto a = loopsOf(maps[0]), b = loopsOf(maps[1]), c = loopsOf(maps[2]);
  if (!a || !b || !c)
    return std::nullopt;
  AffineMap outMap = maps[2];
  if (!outMap.isProjectedPermutation() || outMap.getNumResults() < 2)
    return std::nullopt;
  unsigned k = llvm::find(its, utils::IteratorType::reduction) - its.begin();
  GemmShape shape;
  shape.k = k;
  shape.m = cast<AffineDimExpr>(outMap.getResult(outMap.getNumResults() - 2))
                .getPosition();
  shape.n = cast<AffineDimExpr>(outMap.getResult(outMap.getNumResults() - 1))
                .getPosition();
  for (unsigned i = 0; i + 2 < outMap.getNumResults(); ++i)
    shape.batch.push_back(cast<AffineDimExpr>(outMap.getResult(i)).getPosition());
  if (!a->count(k) || !b->count(k) || c->count(k))
    return std::nullopt;
  bool aHasM = a->count(shape.m), aHasN = a->count(shape.n);
  bool bHasM = b->count(shape.m), bHasN = b->count(shape.n);
  if (aHasM && !aHasN && bHasN && !bHasM)
    shape.lhsIsA = true;
  else if (bHasM && !bHasN && aHasN && !aHasM)
    shape.lhsIsA = false;
  else
    return std::nullopt;
  // Inputs may use only batch loops besides their two GEMM loops.
  for (auto *loops : {&*a, &*b})
    for (unsigned l : *loops)
      if (l != k && l != shape.m && l != shape.n &&
          !llvm::is_contained(shape.batch, l))
        return std::nullopt;
  return shape;
}

/// A view of `memref` (indexed by `map`) with dims `loops`: each view dim's
/// stride is that of the operand dim indexed by the loop, or 0 if absent.
Value gemmView(OpBuilder &b, Location loc, Value memref, AffineMap map,
               ArrayRef<unsigned> loops, ArrayRef<int64_t> loopSizes) {
  auto type = cast<MemRefType>(memref.getType());
  auto [strides, offset] = type.getStridesAndOffset();
  SmallVector<int64_t> viewSizes, viewStrides;
  for (unsigned loop : loops) {
    int64_t stride = 0;
    for (auto [pos, e] : llvm::enumerate(map.getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(e); d && d.getPosition() == loop)
        stride = strides[pos];
    viewSizes.push_back(loopSizes[loop]);
    viewStrides.push_back(stride);
  }
  auto viewType = MemRefType::get(
      viewSizes, type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), offset, viewStrides));
  return memref::ReinterpretCastOp::create(b, loc, viewType, memref, offset,
                                           viewSizes, viewStrides);
}

struct ContractionToBlas : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return failure();
    std::optional<GemmShape> gemm = matchGemm(op);
    if (!gemm)
      return failure();
    for (Value operand : op->getOperands()) {
      auto type = dyn_cast<MemRefType>(operand.getType());
      if (!type || !type.getElementType().isF32() || !type.hasStaticShape() ||
          ShapedType::isDynamic(type.getStridesAndOffset().second))
        return failure();
    }
    SmallVector<int64_t> loopSizes = op.getStaticLoopRanges();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    unsigned aIndex = gemm->lhsIsA ? 0 : 1, bIndex = 1 - aIndex;
    auto loops = [&](unsigned row, unsigned col) {
      SmallVector<unsigned> l(gemm->batch);
      l.push_back(row);
      l.push_back(col);
      return l;
    };
    Location loc = op.getLoc();
    Value a = gemmView(rewriter, loc, op.getDpsInputs()[aIndex], maps[aIndex],
                       loops(gemm->m, gemm->k), loopSizes);
    Value b = gemmView(rewriter, loc, op.getDpsInputs()[bIndex], maps[bIndex],
                       loops(gemm->k, gemm->n), loopSizes);
    Value c = gemmView(rewriter, loc, op.getDpsInits()[0], maps[2],
                       loops(gemm->m, gemm->n), loopSizes);
    auto unranked = UnrankedMemRefType::get(rewriter.getF32Type(), 0);
    SmallVector<Value> args;
    for (Value v : {a, b, c})
      args.push_back(memref::CastOp::create(rewriter, loc, unranked, v));
    auto module = op->getParentOfType<ModuleOp>();
    constexpr StringLiteral callee = "weft_gemm_f32";
    if (!module.lookupSymbol(callee)) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto decl = func::FuncOp::create(
          rewriter, loc, callee,
          rewriter.getFunctionType({unranked, unranked, unranked}, {}));
      decl.setPrivate();
    }
    func::CallOp::create(rewriter, loc, callee, TypeRange{}, args);
    rewriter.eraseOp(op);
    return success();
  }
};

struct WeftContractionsToBlasPass
    : public weft::impl::WeftContractionsToBlasBase<WeftContractionsToBlasPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ContractionToBlas>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

/// A generic that multiplies and accumulates: BLAS takes it as it is.
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

struct WeftApproximateMathPass
    : public weft::impl::WeftApproximateMathBase<WeftApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) {
          return name == math::ErfOp::getOperationName() ||
                 name == math::TanhOp::getOperationName() ||
                 name == math::ExpOp::getOperationName() ||
                 name == math::LogOp::getOperationName();
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
