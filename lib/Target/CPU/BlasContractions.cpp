//===- BlasContractions.cpp - GEMMs to BLAS, polynomial math --------------===//

#include "weft/Lowering/BufferFills.h"
#include "weft/Lowering/Contractions.h"
#include "weft/Target/CPU/Passes.h"
#include "weft/runtime/GemmLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTCONTRACTIONSTOBLAS
#define GEN_PASS_DEF_WEFTAPPROXIMATEMATH
#include "weft/Target/CPU/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// The type of a view of `memref` (indexed by `map`) with dims `loops`:
/// each view dim's stride is that of the operand dim indexed by the loop,
/// or 0 if absent.
MemRefType gemmViewType(Value memref, AffineMap map, ArrayRef<unsigned> loops,
                        ArrayRef<int64_t> loopSizes) {
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
  return MemRefType::get(
      viewSizes, type.getElementType(),
      StridedLayoutAttr::get(memref.getContext(), offset, viewStrides));
}

Value gemmView(OpBuilder &b, Location loc, Value memref, MemRefType viewType) {
  auto [strides, offset] = viewType.getStridesAndOffset();
  return memref::ReinterpretCastOp::create(b, loc, viewType, memref, offset,
                                           viewType.getShape(), strides);
}

/// Whether a column-major GEMM library reads the matrix `view` (its last
/// two dims).
bool readsAsColumnMajor(MemRefType type) {
  auto [strides, offset] = type.getStridesAndOffset();
  int64_t rank = type.getRank();
  return weft::runtime::columnMajorLayout(type.getDimSize(rank - 2),
                                          type.getDimSize(rank - 1),
                                          strides[rank - 2], strides[rank - 1])
      .has_value();
}

struct ContractionToBlas : public OpRewritePattern<linalg::GenericOp> {
  ContractionToBlas(MLIRContext *context, StringRef callee,
                    bool requireUnitStrides)
      : OpRewritePattern(context), callee(callee.str()),
        requireUnitStrides(requireUnitStrides) {}
  std::string callee;
  bool requireUnitStrides;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return failure();
    std::optional<GemmShape> gemm = matchGemm(op);
    if (!gemm)
      return failure();
    for (Value operand : op->getOperands()) {
      auto type = dyn_cast<MemRefType>(operand.getType());
      if (!type || !type.hasStaticShape() ||
          ShapedType::isDynamic(type.getStridesAndOffset().second))
        return failure();
    }
    // f32 x f32, or bf16 x bf16 accumulated in f32.
    Type input = getElementTypeOrSelf(op.getDpsInputs()[0].getType());
    if (!getElementTypeOrSelf(op.getDpsInits()[0].getType()).isF32() ||
        getElementTypeOrSelf(op.getDpsInputs()[1].getType()) != input ||
        !(input.isF32() || input.isBF16()))
      return failure();
    std::string function = callee + (input.isF32() ? "_f32" : "_bf16");
    SmallVector<int64_t> loopSizes = op.getStaticLoopRanges();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    unsigned aIndex = gemm->lhsIsA ? 0 : 1, bIndex = 1 - aIndex;
    auto loops = [&](unsigned row, unsigned col) {
      SmallVector<unsigned> l(gemm->batch);
      l.push_back(row);
      l.push_back(col);
      return l;
    };
    Value aOperand = op.getDpsInputs()[aIndex];
    Value bOperand = op.getDpsInputs()[bIndex];
    Value cOperand = op.getDpsInits()[0];
    MemRefType aType = gemmViewType(aOperand, maps[aIndex],
                                    loops(gemm->m, gemm->k), loopSizes);
    MemRefType bType = gemmViewType(bOperand, maps[bIndex],
                                    loops(gemm->k, gemm->n), loopSizes);
    MemRefType cType =
        gemmViewType(cOperand, maps[2], loops(gemm->m, gemm->n), loopSizes);
    if (requireUnitStrides &&
        !llvm::all_of(ArrayRef<MemRefType>{aType, bType, cType},
                      readsAsColumnMajor))
      return failure();
    // c = a * b (beta = 0) where a zero fill of all of c comes right
    // before: the library writes c without reading it, and the fill goes.
    linalg::FillOp zeroFill;
    if (cType.getNumElements() ==
        cast<MemRefType>(cOperand.getType()).getNumElements())
      if (linalg::FillOp fill = constantFillBefore(op, cOperand))
        if (auto zero = dyn_cast<FloatAttr>(fillConstant(fill));
            zero && zero.getValue().isZero())
          zeroFill = fill;
    Location loc = op.getLoc();
    Value a = gemmView(rewriter, loc, aOperand, aType);
    Value b = gemmView(rewriter, loc, bOperand, bType);
    Value c = gemmView(rewriter, loc, cOperand, cType);
    SmallVector<Value> args;
    SmallVector<Type> argTypes;
    for (Value v : {a, b, c}) {
      argTypes.push_back(UnrankedMemRefType::get(getElementTypeOrSelf(v), 0));
      args.push_back(memref::CastOp::create(rewriter, loc, argTypes.back(), v));
    }
    argTypes.push_back(rewriter.getI64Type());
    args.push_back(
        arith::ConstantIntOp::create(rewriter, loc, zeroFill ? 0 : 1, 64));
    auto module = op->getParentOfType<ModuleOp>();
    if (!module.lookupSymbol(function)) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto decl = func::FuncOp::create(rewriter, loc, function,
                                       rewriter.getFunctionType(argTypes, {}));
      decl.setPrivate();
    }
    func::CallOp::create(rewriter, loc, function, TypeRange{}, args);
    rewriter.eraseOp(op);
    if (zeroFill)
      rewriter.eraseOp(zeroFill);
    return success();
  }
};

struct WeftContractionsToBlasPass
    : public weft::impl::WeftContractionsToBlasBase<WeftContractionsToBlasPass> {
  using WeftContractionsToBlasBase::WeftContractionsToBlasBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ContractionToBlas>(&getContext(), callee, requireUnitStrides);
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
