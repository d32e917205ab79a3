//===- ExpandBf16Conversions.cpp - f32 <-> bf16 as integer arithmetic -----===//
//
// LLVM lowers `fptrunc float to bfloat`, and any bf16 constant it has to
// materialize, on x86 without AVX512-BF16 to calls of `__truncsfbf2`, which
// GCC 12's libgcc (Debian 12) does not have: a bf16 program would not link
// with the system compiler runtime alone. Here the conversions become
// integer arithmetic on the bits, and bf16 values exist only as the bitcast
// of an i16 (upstream's expansion selects between bf16 values, and LLVM
// materializes its NaN constant with the very call).
//
//===----------------------------------------------------------------------===//

#include "weft/Lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTEXPANDBF16CONVERSIONS
#include "weft/Lowering/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// `type` (a scalar or a shaped type) with `element` for its elements.
Type withElement(Type type, Type element) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.clone(element);
  return element;
}

Value integerConstant(PatternRewriter &rewriter, Location loc, Type type,
                      int64_t value) {
  Type element = getElementTypeOrSelf(type);
  TypedAttr attr = rewriter.getIntegerAttr(element, value);
  if (auto shaped = dyn_cast<ShapedType>(type))
    attr = SplatElementsAttr::get(shaped, attr);
  return arith::ConstantOp::create(rewriter, loc, type, attr);
}

/// f32 -> bf16 rounding to nearest, ties to even: add 0x7fff plus the
/// lowest kept bit, keep the high half. A NaN is truncated instead (rounding
/// could carry its payload into the exponent) with its quiet bit set, so it
/// stays a NaN. The selects act on the i32 bits: LLVM moves a bitcast
/// through a select of the final bits, which would bring back bf16 values
/// and constants.
struct TruncToBf16 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type in = op.getIn().getType();
    if (!getElementTypeOrSelf(in).isF32() ||
        !getElementTypeOrSelf(op.getType()).isBF16())
      return failure();
    Location loc = op.getLoc();
    Type i32 = withElement(in, rewriter.getI32Type());
    Type i16 = withElement(in, rewriter.getI16Type());
    auto constant = [&](int64_t value) {
      return integerConstant(rewriter, loc, i32, value);
    };
    Value bits = arith::BitcastOp::create(rewriter, loc, i32, op.getIn());
    Value lowestKept = arith::AndIOp::create(
        rewriter, loc,
        arith::ShRUIOp::create(rewriter, loc, bits, constant(16)), constant(1));
    Value isNan = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::UNO, op.getIn(), op.getIn());
    Value bias = arith::SelectOp::create(
        rewriter, loc, isNan, constant(0),
        arith::AddIOp::create(rewriter, loc, lowestKept, constant(0x7fff)));
    Value quiet = arith::SelectOp::create(rewriter, loc, isNan,
                                          constant(0x400000), constant(0));
    Value rounded = arith::AddIOp::create(
        rewriter, loc, arith::OrIOp::create(rewriter, loc, bits, quiet), bias);
    Value kept = arith::TruncIOp::create(
        rewriter, loc, i16,
        arith::ShRUIOp::create(rewriter, loc, rounded, constant(16)));
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(), kept);
    return success();
  }
};

/// bf16 -> f32: the bf16 bits are the high half of the f32's.
struct ExtendBf16 : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    Type in = op.getIn().getType();
    if (!getElementTypeOrSelf(in).isBF16() ||
        !getElementTypeOrSelf(op.getType()).isF32())
      return failure();
    Location loc = op.getLoc();
    Type i32 = withElement(in, rewriter.getI32Type());
    Type i16 = withElement(in, rewriter.getI16Type());
    Value bits = arith::BitcastOp::create(rewriter, loc, i16, op.getIn());
    Value wide = arith::ExtUIOp::create(rewriter, loc, i32, bits);
    Value shifted = arith::ShLIOp::create(
        rewriter, loc, wide, integerConstant(rewriter, loc, i32, 16));
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(), shifted);
    return success();
  }
};

struct WeftExpandBf16ConversionsPass
    : public weft::impl::WeftExpandBf16ConversionsBase<
          WeftExpandBf16ConversionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<TruncToBf16, ExtendBf16>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
