//===- WeftToLinalg.cpp - Lower weft ops to linalg on tensors -------------===//
//
// Each weft op becomes destination-passing linalg on tensors. Broadcasting
// is expressed in indexing maps (a broadcast dim reads index 0), so no
// operand is ever materialized at the broadcast shape.
//
//===----------------------------------------------------------------------===//

#include "weft/Conversion/Passes.h"
#include "weft/Dialect/Weft/IR/AttentionGradients.h"
#include "weft/Dialect/Weft/IR/TargetAttrNames.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Lowering/ScalarMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/Transforms/DialectConversion.h"
#include <cmath>

namespace weft {
#define GEN_PASS_DEF_CONVERTWEFTTOLINALG
#include "weft/Conversion/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

using ScalarFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

RankedTensorType typeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

SmallVector<utils::IteratorType> iterators(int64_t parallel,
                                           int64_t reduction = 0) {
  SmallVector<utils::IteratorType> its(parallel, utils::IteratorType::parallel);
  its.append(reduction, utils::IteratorType::reduction);
  return its;
}

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

Value filled(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Value init = emptyTensor(b, loc, type);
  Value scalar = scalarConstant(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, ValueRange{scalar}, ValueRange{init})
      .getResult(0);
}

/// The map reading `operand` (aligned to the trailing dims) inside a loop
/// nest over `resultShape`; broadcast dims read index 0.
AffineMap broadcastMap(MLIRContext *ctx, ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape) {
  int64_t offset = resultShape.size() - operandShape.size();
  SmallVector<AffineExpr> exprs;
  for (auto [i, size] : llvm::enumerate(operandShape)) {
    bool broadcast = size == 1 && resultShape[offset + i] != 1;
    exprs.push_back(broadcast ? getAffineConstantExpr(0, ctx)
                              : getAffineDimExpr(offset + i, ctx));
  }
  return AffineMap::get(resultShape.size(), 0, exprs, ctx);
}

/// An elementwise generic over `resultType` applying `fn` to the scalars of
/// `operands`, broadcast by numpy rules.
Value elementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                  ValueRange operands, ScalarFn fn) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps;
  for (Value operand : operands)
    maps.push_back(
        broadcastMap(ctx, typeOf(operand).getShape(), resultType.getShape()));
  maps.push_back(AffineMap::getMultiDimIdentityMap(resultType.getRank(), ctx));
  return linalg::GenericOp::create(
             b, loc, TypeRange{resultType}, operands,
             ValueRange{emptyTensor(b, loc, resultType)}, maps,
             iterators(resultType.getRank()),
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc,
                                       fn(nb, nloc, args.drop_back()));
             })
      .getResult(0);
}

/// Converts a scalar between element types with weft.cast semantics.
Value castScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  auto fromFloat = llvm::dyn_cast<FloatType>(from);
  auto toFloat = llvm::dyn_cast<FloatType>(to);
  if (to.isInteger(1)) {
    if (fromFloat)
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v,
                                   scalarConstant(b, loc, from, 0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v,
                                 scalarConstant(b, loc, from, 0));
  }
  if (fromFloat && toFloat)
    return fromFloat.getWidth() < toFloat.getWidth()
               ? Value(arith::ExtFOp::create(b, loc, to, v))
               : Value(arith::TruncFOp::create(b, loc, to, v));
  if (fromFloat)
    return arith::FPToSIOp::create(b, loc, to, v);
  if (toFloat)
    return from.isInteger(1) ? Value(arith::UIToFPOp::create(b, loc, to, v))
                             : Value(arith::SIToFPOp::create(b, loc, to, v));
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  unsigned toWidth = to.getIntOrFloatBitWidth();
  if (fromWidth < toWidth)
    return from.isInteger(1) ? Value(arith::ExtUIOp::create(b, loc, to, v))
                             : Value(arith::ExtSIOp::create(b, loc, to, v));
  return arith::TruncIOp::create(b, loc, to, v);
}

/// Reshapes a static tensor to `type` through a 1-D collapse and expand.
Value reshapeTo(OpBuilder &b, Location loc, Value v, RankedTensorType type) {
  RankedTensorType from = typeOf(v);
  if (from == type)
    return v;
  int64_t count = from.getNumElements();
  auto flat = RankedTensorType::get({count}, from.getElementType());
  Value flatValue = v;
  if (from.getRank() == 0) {
    flatValue = tensor::ExpandShapeOp::create(b, loc, flat, v,
                                              ArrayRef<ReassociationIndices>{});
  } else if (from.getRank() > 1) {
    ReassociationIndices all(llvm::seq<int64_t>(0, from.getRank()).begin(),
                             llvm::seq<int64_t>(0, from.getRank()).end());
    flatValue = tensor::CollapseShapeOp::create(
        b, loc, flat, v, ArrayRef<ReassociationIndices>{all});
  }
  if (type.getRank() == 1)
    return flatValue;
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, flatValue,
                                           ArrayRef<ReassociationIndices>{});
  ReassociationIndices all(llvm::seq<int64_t>(0, type.getRank()).begin(),
                           llvm::seq<int64_t>(0, type.getRank()).end());
  return tensor::ExpandShapeOp::create(b, loc, type, flatValue,
                                       ArrayRef<ReassociationIndices>{all});
}

/// Marks a floating-point accumulation as reassociable, so that LLVM
/// vectorizes the loop carrying it.
Value reassociable(Value accumulated) {
  if (auto fastMath =
          accumulated.getDefiningOp<arith::ArithFastMathInterface>())
    fastMath->setAttr(
        fastMath.getFastMathAttrName(),
        arith::FastMathFlagsAttr::get(accumulated.getContext(),
                                      arith::FastMathFlags::reassoc |
                                          arith::FastMathFlags::contract));
  return accumulated;
}

/// The type a sum of `element`s accumulates in (a contraction, a
/// reduction): f32 for bf16 and f16
/// (mixed precision: 16-bit operands, a float accumulator), else itself.
Type accumulatorOf(Type element) {
  return element.isBF16() || element.isF16()
             ? Type(Float32Type::get(element.getContext()))
             : element;
}

/// `value` (a float accumulator) in `element`s.
Value narrowTo(OpBuilder &b, Location loc, Value value, Type element) {
  auto type = typeOf(value);
  if (type.getElementType() == element)
    return value;
  return elementwise(b, loc, type.clone(element), ValueRange{value},
                     [element](OpBuilder &nb, Location nloc, ValueRange s) {
                       return castScalar(nb, nloc, s[0], element);
                     });
}

/// Reduces `input` over `axes` (no kept dims) with `combine`, starting from
/// `init`. `extra` inputs are read with the input's own indexing (they must
/// have the input's shape or broadcast to it along reduced dims as given by
/// their maps).
Value reduce(OpBuilder &b, Location loc, Value input, ArrayRef<int64_t> axes,
             double init,
             function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  RankedTensorType type = typeOf(input);
  MLIRContext *ctx = b.getContext();
  int64_t rank = type.getRank();
  // Loop order: kept dims first (parallel), then reduced dims.
  SmallVector<int64_t> kept, order;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(axes, d))
      kept.push_back(d);
  SmallVector<int64_t> keptShape;
  for (int64_t d : kept)
    keptShape.push_back(type.getDimSize(d));
  order = kept;
  order.append(axes.begin(), axes.end());
  SmallVector<AffineExpr> inputExprs(rank);
  for (auto [loop, d] : llvm::enumerate(order))
    inputExprs[d] = getAffineDimExpr(loop, ctx);
  SmallVector<AffineExpr> outputExprs;
  for (size_t i = 0; i < kept.size(); ++i)
    outputExprs.push_back(getAffineDimExpr(i, ctx));
  // A bf16 (or f16) sum accumulates in f32, then rounds once.
  Type accumulator = accumulatorOf(type.getElementType());
  auto resultType = RankedTensorType::get(keptShape, accumulator);
  SmallVector<AffineMap> maps{AffineMap::get(rank, 0, inputExprs, ctx),
                              AffineMap::get(rank, 0, outputExprs, ctx)};
  Value result =
      linalg::GenericOp::create(
          b, loc, TypeRange{resultType}, ValueRange{input},
          ValueRange{filled(b, loc, resultType, init)}, maps,
          iterators(kept.size(), axes.size()),
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            Value x = castScalar(nb, nloc, args[0], accumulator);
            linalg::YieldOp::create(
                nb, nloc, reassociable(combine(nb, nloc, args[1], x)));
          })
          .getResult(0);
  return narrowTo(b, loc, result, type.getElementType());
}

Value addScalars(OpBuilder &b, Location loc, Value a, Value c) {
  if (llvm::isa<FloatType>(a.getType()))
    return arith::AddFOp::create(b, loc, a, c);
  return arith::AddIOp::create(b, loc, a, c);
}

Value mulScalars(OpBuilder &b, Location loc, Value a, Value c) {
  if (llvm::isa<FloatType>(a.getType()))
    return arith::MulFOp::create(b, loc, a, c);
  return arith::MulIOp::create(b, loc, a, c);
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// Lowers an op by a function of (op, operands, rewriter) returning the
/// replacement values.
template <typename OpTy> struct Lowering : public OpConversionPattern<OpTy> {
  using Fn = FailureOr<SmallVector<Value>> (*)(OpTy, ValueRange,
                                               ConversionPatternRewriter &);
  Lowering(MLIRContext *ctx, Fn fn) : OpConversionPattern<OpTy>(ctx), fn(fn) {}
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> values =
        fn(op, adaptor.getOperands(), rewriter);
    if (failed(values))
      return failure();
    rewriter.replaceOp(op, *values);
    return success();
  }
  Fn fn;
};

using Values = FailureOr<SmallVector<Value>>;

Values one(Value v) { return SmallVector<Value>{v}; }

/// Elementwise op whose scalar form is `fn`.
template <typename OpTy>
Values lowerElementwise(OpTy op, ValueRange operands, OpBuilder &b,
                        ScalarFn fn) {
  return one(elementwise(b, op.getLoc(),
                         llvm::cast<RankedTensorType>(op.getType()), operands,
                         fn));
}

#define WEFT_FLOAT_UNARY(OP, BODY)                                             \
  Values lower##OP(OP op, ValueRange operands, ConversionPatternRewriter &b) { \
    return lowerElementwise(                                                   \
        op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) {        \
          return mathInF32(b, loc, s[0],                                       \
                           [](OpBuilder &b, Location loc, Value x) -> Value {  \
                             Type t = x.getType();                             \
                             (void)t;                                          \
                             return BODY;                                      \
                           });                                                 \
        });                                                                    \
  }
WEFT_FLOAT_UNARY(SqrtOp, math::SqrtOp::create(b, loc, x))
WEFT_FLOAT_UNARY(RsqrtOp, math::RsqrtOp::create(b, loc, x))
WEFT_FLOAT_UNARY(ExpOp, math::ExpOp::create(b, loc, x))
WEFT_FLOAT_UNARY(LogOp, math::LogOp::create(b, loc, x))
WEFT_FLOAT_UNARY(TanhOp, math::TanhOp::create(b, loc, x))
WEFT_FLOAT_UNARY(ErfOp, math::ErfOp::create(b, loc, x))
WEFT_FLOAT_UNARY(SinOp, math::SinOp::create(b, loc, x))
WEFT_FLOAT_UNARY(CosOp, math::CosOp::create(b, loc, x))
WEFT_FLOAT_UNARY(ReciprocalOp,
                 arith::DivFOp::create(b, loc, scalarConstant(b, loc, t, 1), x))
WEFT_FLOAT_UNARY(
    SigmoidOp,
    arith::DivFOp::create(
        b, loc, scalarConstant(b, loc, t, 1),
        arith::AddFOp::create(
            b, loc, scalarConstant(b, loc, t, 1),
            math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x)))))
WEFT_FLOAT_UNARY(
    SiluOp,
    arith::DivFOp::create(
        b, loc, x,
        arith::AddFOp::create(
            b, loc, scalarConstant(b, loc, t, 1),
            math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x)))))
#undef WEFT_FLOAT_UNARY

Values lowerGelu(GeluOp op, ValueRange operands, ConversionPatternRewriter &b) {
  bool tanhForm = op.getApproximate() == "tanh";
  return lowerElementwise(op, operands, b,
                          [&](OpBuilder &b, Location loc, ValueRange s) {
                            return geluScalar(b, loc, s[0], tanhForm);
                          });
}

Values lowerGeluGrad(GeluGradOp op, ValueRange operands,
                     ConversionPatternRewriter &b) {
  bool tanhForm = op.getApproximate() == "tanh";
  return lowerElementwise(
      op, operands, b, [&](OpBuilder &b, Location loc, ValueRange s) {
        return geluGradientScalar(b, loc, s[0], s[1], tanhForm);
      });
}

Values lowerNeg(NegOp op, ValueRange operands, ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        if (llvm::isa<FloatType>(s[0].getType()))
          return arith::NegFOp::create(b, loc, s[0]);
        return arith::SubIOp::create(
            b, loc, scalarConstant(b, loc, s[0].getType(), 0), s[0]);
      });
}

Values lowerAbs(AbsOp op, ValueRange operands, ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        if (llvm::isa<FloatType>(s[0].getType()))
          return math::AbsFOp::create(b, loc, s[0]);
        return math::AbsIOp::create(b, loc, s[0]);
      });
}

Values lowerRelu(ReluOp op, ValueRange operands, ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        Value zero = scalarConstant(b, loc, s[0].getType(), 0);
        if (llvm::isa<FloatType>(s[0].getType()))
          return arith::MaximumFOp::create(b, loc, s[0], zero);
        return arith::MaxSIOp::create(b, loc, s[0], zero);
      });
}

Values lowerNot(NotOp op, ValueRange operands, ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        return arith::XOrIOp::create(b, loc, s[0],
                                     scalarConstant(b, loc, s[0].getType(), 1));
      });
}

Values lowerCast(CastOp op, ValueRange operands, ConversionPatternRewriter &b) {
  Type to = op.getType().getElementType();
  return lowerElementwise(op, operands, b,
                          [to](OpBuilder &b, Location loc, ValueRange s) {
                            return castScalar(b, loc, s[0], to);
                          });
}

/// Binary arithmetic: one builder for floats, one for integers.
template <typename OpTy, typename FloatOp, typename IntOp>
Values lowerArith(OpTy op, ValueRange operands, ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        if (llvm::isa<FloatType>(s[0].getType()))
          return FloatOp::create(b, loc, s[0], s[1]);
        return IntOp::create(b, loc, s[0], s[1]);
      });
}

Values lowerPow(PowOp op, ValueRange operands, ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) {
        return mathInF32(b, loc, s[0],
                         [&](OpBuilder &b, Location loc, Value x) {
                           Value y = castScalar(b, loc, s[1], x.getType());
                           return Value(math::PowFOp::create(b, loc, x, y));
                         });
      });
}

template <typename OpTy, typename LogicOp>
Values lowerLogic(OpTy op, ValueRange operands, ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        return LogicOp::create(b, loc, s[0], s[1]);
      });
}

template <typename OpTy, arith::CmpFPredicate FP, arith::CmpIPredicate IP>
Values lowerCompare(OpTy op, ValueRange operands,
                    ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        if (llvm::isa<FloatType>(s[0].getType()))
          return arith::CmpFOp::create(b, loc, FP, s[0], s[1]);
        return arith::CmpIOp::create(b, loc, IP, s[0], s[1]);
      });
}

Values lowerWhere(WhereOp op, ValueRange operands,
                  ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b, [](OpBuilder &b, Location loc, ValueRange s) -> Value {
        return arith::SelectOp::create(b, loc, s[0], s[1], s[2]);
      });
}

Values lowerExpand(ExpandOp op, ValueRange operands,
                   ConversionPatternRewriter &b) {
  return lowerElementwise(
      op, operands, b,
      [](OpBuilder &, Location, ValueRange s) { return s[0]; });
}

Values lowerConstant(ConstantOp op, ValueRange, ConversionPatternRewriter &b) {
  return one(arith::ConstantOp::create(b, op.getLoc(),
                                       llvm::cast<TypedAttr>(op.getValue())));
}

Values lowerRange(RangeOp op, ValueRange, ConversionPatternRewriter &b) {
  RankedTensorType type = op.getType();
  Location loc = op.getLoc();
  Type element = type.getElementType();
  auto scalar = [](Attribute a) {
    if (auto f = llvm::dyn_cast<FloatAttr>(a))
      return f.getValueAsDouble();
    return static_cast<double>(llvm::cast<IntegerAttr>(a).getInt());
  };
  double start = scalar(op.getStart()), step = scalar(op.getStep());
  return one(
      linalg::GenericOp::create(
          b, loc, TypeRange{type}, ValueRange{},
          ValueRange{emptyTensor(b, loc, type)},
          {AffineMap::getMultiDimIdentityMap(1, b.getContext())}, iterators(1),
          [&](OpBuilder &nb, Location nloc, ValueRange) {
            Value i = linalg::IndexOp::create(nb, nloc, 0);
            Value asInt =
                arith::IndexCastOp::create(nb, nloc, nb.getI64Type(), i);
            Value v = castScalar(nb, nloc, asInt, element);
            v = addScalars(nb, nloc,
                           mulScalars(nb, nloc, v,
                                      scalarConstant(nb, nloc, element, step)),
                           scalarConstant(nb, nloc, element, start));
            linalg::YieldOp::create(nb, nloc, v);
          })
          .getResult(0));
}

Values lowerTrilu(TriluOp op, ValueRange operands,
                  ConversionPatternRewriter &b) {
  RankedTensorType type = op.getType();
  int64_t rank = type.getRank();
  int64_t diagonal = op.getDiagonal();
  bool upper = op.getUpper();
  return lowerElementwise(
      op, operands, b, [&](OpBuilder &b, Location loc, ValueRange s) -> Value {
        Value row = linalg::IndexOp::create(b, loc, rank - 2);
        Value col = linalg::IndexOp::create(b, loc, rank - 1);
        // keep = col - row >= k (upper) or col - row <= k (lower)
        Value diff = arith::SubIOp::create(b, loc, col, row);
        Value k = arith::ConstantIndexOp::create(b, loc, diagonal);
        Value keep = arith::CmpIOp::create(b, loc,
                                           upper ? arith::CmpIPredicate::sge
                                                 : arith::CmpIPredicate::sle,
                                           diff, k);
        return arith::SelectOp::create(
            b, loc, keep, s[0], scalarConstant(b, loc, s[0].getType(), 0));
      });
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

template <typename OpTy>
Values lowerReduce(OpTy op, ValueRange operands, ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  Type element = op.getType().getElementType();
  bool isFloat = llvm::isa<FloatType>(element);
  ArrayRef<int64_t> axes = op.getAxes();
  double init = 0;
  function_ref<Value(OpBuilder &, Location, Value, Value)> combine = addScalars;
  auto maxFn = [](OpBuilder &b, Location loc, Value a, Value c) -> Value {
    if (llvm::isa<FloatType>(a.getType()))
      return arith::MaximumFOp::create(b, loc, a, c);
    return arith::MaxSIOp::create(b, loc, a, c);
  };
  auto minFn = [](OpBuilder &b, Location loc, Value a, Value c) -> Value {
    if (llvm::isa<FloatType>(a.getType()))
      return arith::MinimumFOp::create(b, loc, a, c);
    return arith::MinSIOp::create(b, loc, a, c);
  };
  if constexpr (std::is_same_v<OpTy, ReduceMaxOp>) {
    init = isFloat ? -INFINITY : static_cast<double>(INT64_MIN);
    combine = maxFn;
  } else if constexpr (std::is_same_v<OpTy, ReduceMinOp>) {
    init = isFloat ? INFINITY : static_cast<double>(INT64_MAX);
    combine = minFn;
  } else if constexpr (std::is_same_v<OpTy, ReduceProdOp>) {
    init = 1;
    combine = mulScalars;
  }
  if (!isFloat && element.getIntOrFloatBitWidth() == 32 &&
      (std::is_same_v<OpTy, ReduceMaxOp> || std::is_same_v<OpTy, ReduceMinOp>))
    init = std::is_same_v<OpTy, ReduceMaxOp> ? INT32_MIN : INT32_MAX;
  Value reduced = reduce(b, loc, operands[0], axes, init, combine);
  if constexpr (std::is_same_v<OpTy, ReduceMeanOp>) {
    int64_t count = 1;
    for (int64_t a : axes)
      count *= typeOf(operands[0]).getDimSize(a);
    reduced = elementwise(
        b, loc, typeOf(reduced), ValueRange{reduced},
        [count](OpBuilder &b, Location loc, ValueRange s) {
          return Value(arith::DivFOp::create(
              b, loc, s[0], scalarConstant(b, loc, s[0].getType(), count)));
        });
  }
  return one(reshapeTo(b, loc, reduced, op.getType()));
}

/// A generic over the full shape of `x` with per-row and per-feature inputs.
Value rowwise(OpBuilder &b, Location loc, RankedTensorType type,
              ArrayRef<Value> inputs, ArrayRef<AffineMap> maps, ScalarFn fn) {
  SmallVector<AffineMap> allMaps(maps);
  allMaps.push_back(
      AffineMap::getMultiDimIdentityMap(type.getRank(), b.getContext()));
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, inputs,
             ValueRange{emptyTensor(b, loc, type)}, allMaps,
             iterators(type.getRank()),
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc,
                                       fn(nb, nloc, args.drop_back()));
             })
      .getResult(0);
}

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

using RowLoopBody =
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange)>;

/// `scf.for j in [0, width)` carrying `inits`; `body(j, carried)` returns
/// the next carried values.
SmallVector<Value> loopOverRow(OpBuilder &b, Location loc, int64_t width,
                               ValueRange inits, RowLoopBody body) {
  auto loop = scf::ForOp::create(
      b, loc, arith::ConstantIndexOp::create(b, loc, 0),
      arith::ConstantIndexOp::create(b, loc, width),
      arith::ConstantIndexOp::create(b, loc, 1), inits,
      [&](OpBuilder &nb, Location nloc, Value j, ValueRange carried) {
        scf::YieldOp::create(nb, nloc, body(nb, nloc, j, carried));
      });
  return SmallVector<Value>(loop.getResults());
}

Value elementAt(OpBuilder &b, Location loc, Value row, Value j) {
  return tensor::ExtractOp::create(b, loc, row, ValueRange{j});
}

using RowBody =
    function_ref<Value(OpBuilder &, Location, Value row, Value outRow)>;
using IndexedRowBody = function_ref<SmallVector<Value>(
    OpBuilder &, Location, Value index, Value row, Value outRow)>;

/// A kernel over the rows of `x`, where a row is formed by the dims from
/// `axis` on: an scf.forall over rows whose body makes all of its passes
/// over one row while that row is in cache, instead of one pass over the
/// whole tensor per step. `body` gets the row's index, the input row and
/// the result row (both 1-D) and returns the written result row, of
/// `resultElement`, then a value per row of each of `perRowElements`.
/// Returns the result in `x`'s shape, then each per-row value as a
/// [rows] tensor.
SmallVector<Value> rowKernel(OpBuilder &b, Location loc, Value x, int64_t axis,
                             Type resultElement, ArrayRef<Type> perRowElements,
                             IndexedRowBody body) {
  RankedTensorType type = typeOf(x);
  int64_t rows = 1, width = 1;
  for (int64_t d = 0; d < type.getRank(); ++d)
    (d < axis ? rows : width) *= type.getDimSize(d);
  Type element = type.getElementType();
  auto matrixType = RankedTensorType::get({rows, width}, element);
  auto resultType = matrixType.clone(resultElement);
  Value matrix = reshapeTo(b, loc, x, matrixType);
  SmallVector<Value> outputs{emptyTensor(b, loc, resultType)};
  for (Type perRow : perRowElements)
    outputs.push_back(
        emptyTensor(b, loc, RankedTensorType::get({rows}, perRow)));
  auto forall = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(rows)}, outputs,
      std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forall.getBody());
  Value index = forall.getInductionVar(0);
  ValueRange shared = forall.getRegionIterArgs();
  SmallVector<OpFoldResult> offsets{index, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), b.getIndexAttr(width)};
  SmallVector<OpFoldResult> strides{b.getIndexAttr(1), b.getIndexAttr(1)};
  auto rowType = RankedTensorType::get({width}, element);
  Value row = tensor::ExtractSliceOp::create(b, loc, rowType, matrix, offsets,
                                             sizes, strides);
  Value outRow = tensor::ExtractSliceOp::create(
      b, loc, rowType.clone(resultElement), shared[0], offsets, sizes, strides);
  SmallVector<Value> written = body(b, loc, index, row, outRow);
  assert(written.size() == 1 + perRowElements.size() &&
         "a row kernel's body returns the row and each per-row value");
  // Each per-row value goes into its own one-element slot of its output.
  SmallVector<OpFoldResult> slotOffset{index}, one{b.getIndexAttr(1)};
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  for (size_t i = 1; i < written.size(); ++i) {
    Value slot = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({1}, perRowElements[i - 1]), shared[i],
        slotOffset, one, one);
    written[i] =
        tensor::InsertOp::create(b, loc, written[i], slot, ValueRange{zero});
  }
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, loc, written[0], shared[0], offsets,
                                        sizes, strides);
  for (size_t i = 1; i < written.size(); ++i)
    tensor::ParallelInsertSliceOp::create(b, loc, written[i], shared[i],
                                          slotOffset, one, one);
  b.setInsertionPointAfter(forall);
  SmallVector<Value> results{
      reshapeTo(b, loc, forall.getResult(0), type.clone(resultElement))};
  llvm::append_range(results, forall.getResults().drop_front());
  return results;
}

/// rowKernel without per-row values, for a body that needs only its row.
Value rowKernel(OpBuilder &b, Location loc, Value x, int64_t axis,
                Type resultElement, RowBody body) {
  return rowKernel(
      b, loc, x, axis, resultElement, {},
      [&](OpBuilder &b, Location loc, Value, Value row, Value outRow) {
        return SmallVector<Value>{body(b, loc, row, outRow)};
      })[0];
}

/// Layer norm (centered) or RMS norm over dims axis..rank-1: per row, a pass
/// for the mean (layer norm only), one for the variance, one to write.
Value normalize(OpBuilder &b, Location loc, Value x, Value scale, Value bias,
                int64_t axis, double epsilon, bool centered,
                Type resultElement) {
  RankedTensorType type = typeOf(x);
  Type element = type.getElementType();
  int64_t width = 1;
  for (int64_t d = axis; d < type.getRank(); ++d)
    width *= type.getDimSize(d);
  auto featureType = RankedTensorType::get({width}, element);
  scale = reshapeTo(b, loc, scale, featureType);
  if (bias)
    bias = reshapeTo(b, loc, bias, featureType);
  return rowKernel(
      b, loc, x, axis, resultElement,
      [&](OpBuilder &b, Location loc, Value row, Value outRow) {
        Value zero = scalarConstant(b, loc, element, 0);
        Value count = scalarConstant(b, loc, element, width);
        Value mean;
        if (centered) {
          Value sum = loopOverRow(
              b, loc, width, {zero},
              [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
                return SmallVector<Value>{reassociable(arith::AddFOp::create(
                    b, loc, acc[0], elementAt(b, loc, row, j)))};
              })[0];
          mean = arith::DivFOp::create(b, loc, sum, count);
        }
        auto centeredAt = [&](OpBuilder &b, Location loc, Value j) {
          Value v = elementAt(b, loc, row, j);
          return mean ? Value(arith::SubFOp::create(b, loc, v, mean)) : v;
        };
        Value squares = loopOverRow(
            b, loc, width, {zero},
            [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
              Value d = centeredAt(b, loc, j);
              return SmallVector<Value>{reassociable(arith::AddFOp::create(
                  b, loc, acc[0], arith::MulFOp::create(b, loc, d, d)))};
            })[0];
        Value inverse = math::RsqrtOp::create(
            b, loc,
            arith::AddFOp::create(b, loc,
                                  arith::DivFOp::create(b, loc, squares, count),
                                  scalarConstant(b, loc, element, epsilon)));
        return loopOverRow(
            b, loc, width, {outRow},
            [&](OpBuilder &b, Location loc, Value j, ValueRange out) {
              Value y = arith::MulFOp::create(
                  b, loc,
                  arith::MulFOp::create(b, loc, centeredAt(b, loc, j), inverse),
                  elementAt(b, loc, scale, j));
              if (bias)
                y = arith::AddFOp::create(b, loc, y,
                                          elementAt(b, loc, bias, j));
              return SmallVector<Value>{tensor::InsertOp::create(
                  b, loc, castScalar(b, loc, y, resultElement), out[0],
                  ValueRange{j})};
            })[0];
      });
}

Values lowerLayerNorm(LayerNormOp op, ValueRange operands,
                      ConversionPatternRewriter &b) {
  return one(normalize(b, op.getLoc(), operands[0], operands[1],
                       operands.size() > 2 ? operands[2] : nullptr,
                       static_cast<int64_t>(op.getAxis()),
                       op.getEpsilon().convertToDouble(), true,
                       op.getType().getElementType()));
}

Values lowerRmsNorm(RmsNormOp op, ValueRange operands,
                    ConversionPatternRewriter &b) {
  return one(normalize(b, op.getLoc(), operands[0], operands[1], nullptr,
                       static_cast<int64_t>(op.getAxis()),
                       op.getEpsilon().convertToDouble(), false,
                       op.getType().getElementType()));
}

/// A norm's input gradient: one row kernel whose passes over a row find its
/// mean, its variance, then the means of g^ and g^ x^ together (in f32),
/// and a last pass writes the gradient (plus the addend) and the row's
/// statistics.
Values lowerNormGrad(NormGradOp op, ValueRange operands,
                     ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  RankedTensorType type = op.getInput().getType();
  int64_t axis = op.getAxis(), rows = 1, width = 1;
  for (int64_t d = 0; d < type.getRank(); ++d)
    (d < axis ? rows : width) *= type.getDimSize(d);
  Type element = type.getElementType(), f32 = b.getF32Type();
  auto matrixOf = [&](Value value) {
    return reshapeTo(
        b, loc, value,
        RankedTensorType::get({rows, width}, typeOf(value).getElementType()));
  };
  Value scale =
      reshapeTo(b, loc, operands[1], RankedTensorType::get({width}, element));
  Value g = matrixOf(operands[2]);
  Value addend = operands.size() > 3 ? matrixOf(operands[3]) : Value();
  bool centered = op.getCentered();
  double epsilon = op.getEpsilon().convertToDouble();
  SmallVector<Value> results = rowKernel(
      b, loc, operands[0], axis, element, {element, element},
      [&](OpBuilder &b, Location loc, Value index, Value row, Value outRow) {
        auto xAt = [&](OpBuilder &b, Location loc, Value j) {
          return castScalar(b, loc, elementAt(b, loc, row, j), f32);
        };
        auto at = [&](OpBuilder &b, Location loc, Value matrix, Value j) {
          return castScalar(
              b, loc,
              tensor::ExtractOp::create(b, loc, matrix, ValueRange{index, j}),
              f32);
        };
        Value zero = scalarConstant(b, loc, f32, 0);
        Value count = scalarConstant(b, loc, f32, width);
        Value mean = zero;
        if (centered)
          mean = arith::DivFOp::create(
              b, loc,
              loopOverRow(
                  b, loc, width, {zero},
                  [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
                    return SmallVector<Value>{reassociable(
                        arith::AddFOp::create(b, loc, acc[0], xAt(b, loc, j)))};
                  })[0],
              count);
        auto centeredAt = [&](OpBuilder &b, Location loc, Value j) {
          return arith::SubFOp::create(b, loc, xAt(b, loc, j), mean);
        };
        Value squares = loopOverRow(
            b, loc, width, {zero},
            [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
              Value d = centeredAt(b, loc, j);
              return SmallVector<Value>{reassociable(arith::AddFOp::create(
                  b, loc, acc[0], arith::MulFOp::create(b, loc, d, d)))};
            })[0];
        Value inverse = math::RsqrtOp::create(
            b, loc,
            arith::AddFOp::create(b, loc,
                                  arith::DivFOp::create(b, loc, squares, count),
                                  scalarConstant(b, loc, f32, epsilon)));
        auto gHatAt = [&](OpBuilder &b, Location loc, Value j) {
          return arith::MulFOp::create(
              b, loc, at(b, loc, g, j),
              castScalar(b, loc, elementAt(b, loc, scale, j), f32));
        };
        auto xHatAt = [&](OpBuilder &b, Location loc, Value j) {
          return arith::MulFOp::create(b, loc, centeredAt(b, loc, j), inverse);
        };
        SmallVector<Value> sums = loopOverRow(
            b, loc, width, {zero, zero},
            [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
              Value gHat = gHatAt(b, loc, j);
              return SmallVector<Value>{
                  reassociable(arith::AddFOp::create(b, loc, acc[0], gHat)),
                  reassociable(arith::AddFOp::create(
                      b, loc, acc[1],
                      arith::MulFOp::create(b, loc, gHat, xHatAt(b, loc, j))))};
            });
        Value gMean = centered
                          ? Value(arith::DivFOp::create(b, loc, sums[0], count))
                          : zero;
        Value gxMean = arith::DivFOp::create(b, loc, sums[1], count);
        // dx = inv (g^ - mean(g^) - x^ mean(g^ x^)).
        Value written = loopOverRow(
            b, loc, width, {outRow},
            [&](OpBuilder &b, Location loc, Value j, ValueRange out) {
              Value inner = arith::SubFOp::create(
                  b, loc,
                  arith::SubFOp::create(b, loc, gHatAt(b, loc, j), gMean),
                  arith::MulFOp::create(b, loc, xHatAt(b, loc, j), gxMean));
              Value dx = arith::MulFOp::create(b, loc, inverse, inner);
              if (addend)
                dx = arith::AddFOp::create(b, loc, dx, at(b, loc, addend, j));
              return SmallVector<Value>{tensor::InsertOp::create(
                  b, loc, castScalar(b, loc, dx, element), out[0],
                  ValueRange{j})};
            })[0];
        return SmallVector<Value>{written, castScalar(b, loc, mean, element),
                                  castScalar(b, loc, inverse, element)};
      });
  RankedTensorType statsType = op.getMean().getType();
  return SmallVector<Value>{results[0],
                            reshapeTo(b, loc, results[1], statsType),
                            reshapeTo(b, loc, results[2], statsType)};
}

/// softmax or log_softmax over rows (the last dim): per row, a pass for the
/// max, one for the sum of exponentials, one to write.
Value softmaxRows(OpBuilder &b, Location loc, Value x, bool logarithm) {
  RankedTensorType type = typeOf(x);
  Type element = type.getElementType();
  int64_t width = type.getShape().back();
  auto exp = [](OpBuilder &b, Location loc, Value v) {
    return mathInF32(b, loc, v, [](OpBuilder &b, Location loc, Value v) {
      return Value(math::ExpOp::create(b, loc, v));
    });
  };
  return rowKernel(
      b, loc, x, type.getRank() - 1, element,
      [&](OpBuilder &b, Location loc, Value row, Value outRow) {
        // maxnumf (not maximumf) vectorizes; a NaN input still poisons the row
        // through exp(x - max).
        Value max = loopOverRow(
            b, loc, width, {scalarConstant(b, loc, element, -INFINITY)},
            [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
              return SmallVector<Value>{reassociable(arith::MaxNumFOp::create(
                  b, loc, acc[0], elementAt(b, loc, row, j)))};
            })[0];
        auto shiftedAt = [&](OpBuilder &b, Location loc, Value j) {
          return Value(
              arith::SubFOp::create(b, loc, elementAt(b, loc, row, j), max));
        };
        Value zero = scalarConstant(b, loc, element, 0);
        if (logarithm) {
          Value sum = loopOverRow(
              b, loc, width, {zero},
              [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
                return SmallVector<Value>{reassociable(arith::AddFOp::create(
                    b, loc, acc[0], exp(b, loc, shiftedAt(b, loc, j))))};
              })[0];
          Value logSum =
              mathInF32(b, loc, sum, [](OpBuilder &b, Location loc, Value v) {
                return Value(math::LogOp::create(b, loc, v));
              });
          return loopOverRow(
              b, loc, width, {outRow},
              [&](OpBuilder &b, Location loc, Value j, ValueRange out) {
                Value y =
                    arith::SubFOp::create(b, loc, shiftedAt(b, loc, j), logSum);
                return SmallVector<Value>{
                    tensor::InsertOp::create(b, loc, y, out[0], ValueRange{j})};
              })[0];
        }
        // The exponentials go straight into the result row; the last pass
        // divides them in place.
        SmallVector<Value> expsAndSum = loopOverRow(
            b, loc, width, {outRow, zero},
            [&](OpBuilder &b, Location loc, Value j, ValueRange carried) {
              Value e = exp(b, loc, shiftedAt(b, loc, j));
              return SmallVector<Value>{
                  tensor::InsertOp::create(b, loc, e, carried[0],
                                           ValueRange{j}),
                  reassociable(arith::AddFOp::create(b, loc, carried[1], e))};
            });
        Value sum = expsAndSum[1];
        return loopOverRow(
            b, loc, width, {expsAndSum[0]},
            [&](OpBuilder &b, Location loc, Value j, ValueRange out) {
              Value y = arith::DivFOp::create(
                  b, loc, elementAt(b, loc, out[0], j), sum);
              return SmallVector<Value>{
                  tensor::InsertOp::create(b, loc, y, out[0], ValueRange{j})};
            })[0];
      });
}

/// softmax or log_softmax of `x` along `axis`. Along the last dim this is a
/// row kernel; along another dim the row is strided, and it stays a few
/// reduction and elementwise generics.
Value softmax(OpBuilder &b, Location loc, Value x, int64_t axis,
              bool logarithm) {
  if (axis == typeOf(x).getRank() - 1)
    return softmaxRows(b, loc, x, logarithm);
  RankedTensorType type = typeOf(x);
  MLIRContext *ctx = b.getContext();
  int64_t rank = type.getRank();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  SmallVector<AffineExpr> rowExprs;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      rowExprs.push_back(getAffineDimExpr(d, ctx));
  AffineMap row = AffineMap::get(rank, 0, rowExprs, ctx);
  // maxnumf (not maximumf) vectorizes; a NaN input still poisons the row
  // through exp(x - max).
  Value max = reduce(b, loc, x, {axis}, -INFINITY,
                     [](OpBuilder &b, Location loc, Value a, Value c) {
                       return Value(arith::MaxNumFOp::create(b, loc, a, c));
                     });
  Value exps = rowwise(b, loc, type, {x, max}, {identity, row},
                       [](OpBuilder &b, Location loc, ValueRange s) {
                         return mathInF32(
                             b, loc, arith::SubFOp::create(b, loc, s[0], s[1]),
                             [](OpBuilder &b, Location loc, Value v) {
                               return Value(math::ExpOp::create(b, loc, v));
                             });
                       });
  Value sum = reduce(b, loc, exps, {axis}, 0, addScalars);
  if (!logarithm)
    return rowwise(b, loc, type, {exps, sum}, {identity, row},
                   [](OpBuilder &b, Location loc, ValueRange s) {
                     return Value(arith::DivFOp::create(b, loc, s[0], s[1]));
                   });
  return rowwise(
      b, loc, type, {x, max, sum}, {identity, row, row},
      [](OpBuilder &b, Location loc, ValueRange s) {
        Value logSum =
            mathInF32(b, loc, s[2], [](OpBuilder &b, Location loc, Value v) {
              return Value(math::LogOp::create(b, loc, v));
            });
        return Value(arith::SubFOp::create(
            b, loc, arith::SubFOp::create(b, loc, s[0], s[1]), logSum));
      });
}

Values lowerSoftmax(SoftmaxOp op, ValueRange operands,
                    ConversionPatternRewriter &b) {
  return one(softmax(b, op.getLoc(), operands[0],
                     static_cast<int64_t>(op.getAxis()), false));
}

Values lowerLogSoftmax(LogSoftmaxOp op, ValueRange operands,
                       ConversionPatternRewriter &b) {
  return one(softmax(b, op.getLoc(), operands[0],
                     static_cast<int64_t>(op.getAxis()), true));
}

/// What the cross-entropy and its gradient read: the logits as rows
/// [positions, classes], the labels as [positions], and the type of a value
/// per position.
struct CrossEntropyRows {
  Value rows, labels;
  int64_t positions, classes;
  Type element;
  RankedTensorType perPosition;
};

/// `positionElement`: the element type of the per-position loss and
/// log-sum-exp (the logits' own, or f32 for narrow logits).
CrossEntropyRows crossEntropyRows(OpBuilder &b, Location loc, Value logits,
                                  Value labels, Type positionElement) {
  RankedTensorType type = typeOf(logits);
  CrossEntropyRows r;
  r.element = type.getElementType();
  r.classes = type.getShape().back();
  r.positions = type.getNumElements() / std::max<int64_t>(r.classes, 1);
  r.rows =
      reshapeTo(b, loc, logits,
                RankedTensorType::get({r.positions, r.classes}, r.element));
  r.labels = reshapeTo(
      b, loc, labels,
      RankedTensorType::get({r.positions}, typeOf(labels).getElementType()));
  r.perPosition = RankedTensorType::get({r.positions}, positionElement);
  return r;
}

/// Whether `label` (an integer scalar) is `ignoreIndex`.
Value isIgnored(OpBuilder &b, Location loc, Value label, int64_t ignoreIndex) {
  return arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, label,
      scalarConstant(b, loc, label.getType(), double(ignoreIndex)));
}

Value expF32(OpBuilder &b, Location loc, Value x) {
  return mathInF32(b, loc, x, [](OpBuilder &b, Location loc, Value v) {
    return Value(math::ExpOp::create(b, loc, v));
  });
}

/// One generic over the positions whose body makes the passes over its row
/// of logits (max, then the sum of exponentials in f32) and reads the
/// label's logit: loss = lse - logit[label] (0 where ignored) and lse.
Values lowerSoftmaxCrossEntropy(SoftmaxCrossEntropyOp op, ValueRange operands,
                                ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  CrossEntropyRows r =
      crossEntropyRows(b, loc, operands[0], operands[1],
                       op.getLoss().getType().getElementType());
  Value rows = r.rows, labels = r.labels;
  int64_t classes = r.classes;
  Type element = r.perPosition.getElementType(), f32 = b.getF32Type();
  RankedTensorType perPosition = r.perPosition;
  AffineMap identity = AffineMap::getMultiDimIdentityMap(1, ctx);
  int64_t ignoreIndex = op.getIgnoreIndex();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{perPosition, perPosition}, ValueRange{labels},
      ValueRange{emptyTensor(b, loc, perPosition),
                 emptyTensor(b, loc, perPosition)},
      SmallVector<AffineMap>(3, identity), iterators(1),
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value row = linalg::IndexOp::create(b, loc, 0);
        auto logitAt = [&](OpBuilder &b, Location loc, Value j) {
          return castScalar(
              b, loc,
              tensor::ExtractOp::create(b, loc, rows, ValueRange{row, j}), f32);
        };
        Value max = loopOverRow(
            b, loc, classes, {scalarConstant(b, loc, f32, -INFINITY)},
            [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
              return SmallVector<Value>{reassociable(arith::MaxNumFOp::create(
                  b, loc, acc[0], logitAt(b, loc, j)))};
            })[0];
        Value sum = loopOverRow(
            b, loc, classes, {scalarConstant(b, loc, f32, 0)},
            [&](OpBuilder &b, Location loc, Value j, ValueRange acc) {
              Value shifted =
                  arith::SubFOp::create(b, loc, logitAt(b, loc, j), max);
              return SmallVector<Value>{reassociable(arith::AddFOp::create(
                  b, loc, acc[0], expF32(b, loc, shifted)))};
            })[0];
        Value lse = arith::AddFOp::create(b, loc, max,
                                          math::LogOp::create(b, loc, sum));
        // An ignored (or out-of-range) label reads class 0, and is zeroed.
        Value label = args[0];
        Value ignored = isIgnored(b, loc, label, ignoreIndex);
        Value index =
            arith::IndexCastOp::create(b, loc, b.getIndexType(), label);
        Value atLeastZero =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, index,
                                  arith::ConstantIndexOp::create(b, loc, 0));
        Value belowClasses = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::slt, index,
            arith::ConstantIndexOp::create(b, loc, classes));
        Value valid = arith::AndIOp::create(b, loc, atLeastZero, belowClasses);
        Value safe = arith::SelectOp::create(
            b, loc, valid, index, arith::ConstantIndexOp::create(b, loc, 0));
        Value loss = arith::SelectOp::create(
            b, loc, ignored, scalarConstant(b, loc, f32, 0),
            arith::SubFOp::create(b, loc, lse, logitAt(b, loc, safe)));
        linalg::YieldOp::create(b, loc,
                                ValueRange{castScalar(b, loc, loss, element),
                                           castScalar(b, loc, lse, element)});
      });
  RankedTensorType resultType = op.getLoss().getType();
  return SmallVector<Value>{
      reshapeTo(b, loc, generic.getResult(0), resultType),
      reshapeTo(b, loc, generic.getResult(1), resultType)};
}

/// One elementwise generic over the logits, written over them (in place
/// where nothing else reads them): (exp(x - lse) - [j == label]) * grad.
Values lowerSoftmaxCrossEntropyGrad(SoftmaxCrossEntropyGradOp op,
                                    ValueRange operands,
                                    ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  CrossEntropyRows r =
      crossEntropyRows(b, loc, operands[0], operands[1],
                       op.getLogSumExp().getType().getElementType());
  Value rows = r.rows, labels = r.labels;
  RankedTensorType rowsType = typeOf(rows);
  Type element = r.element;
  Type f32 = b.getF32Type();
  RankedTensorType perPosition = r.perPosition;
  Value lse = reshapeTo(b, loc, operands[2], perPosition);
  Value grad = reshapeTo(b, loc, operands[3], perPosition);
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  int64_t ignoreIndex = op.getIgnoreIndex();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{rowsType}, ValueRange{labels, lse, grad},
      ValueRange{rows}, SmallVector<AffineMap>{row, row, row, identity},
      iterators(2), [&](OpBuilder &b, Location loc, ValueRange args) {
        Value label = args[0];
        Value x = castScalar(b, loc, args[3], f32);
        Value p = expF32(
            b, loc,
            arith::SubFOp::create(b, loc, x, castScalar(b, loc, args[1], f32)));
        Value j = arith::IndexCastOp::create(
            b, loc, label.getType(), linalg::IndexOp::create(b, loc, 1));
        Value hit =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, j, label);
        Value target =
            arith::SelectOp::create(b, loc, hit, scalarConstant(b, loc, f32, 1),
                                    scalarConstant(b, loc, f32, 0));
        Value y = arith::MulFOp::create(
            b, loc, arith::SubFOp::create(b, loc, p, target),
            castScalar(b, loc, args[2], f32));
        y = arith::SelectOp::create(b, loc,
                                    isIgnored(b, loc, label, ignoreIndex),
                                    scalarConstant(b, loc, f32, 0), y);
        linalg::YieldOp::create(b, loc, castScalar(b, loc, y, element));
      });
  return one(reshapeTo(b, loc, generic.getResult(0), op.getType()));
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// The multiply-add of a contraction's body, in the accumulator's type.
Value multiplyAdd(OpBuilder &b, Location loc, ValueRange s) {
  Type accumulator = s[2].getType();
  return addScalars(b, loc, s[2],
                    mulScalars(b, loc, castScalar(b, loc, s[0], accumulator),
                               castScalar(b, loc, s[1], accumulator)));
}

/// out[batch, m, n] (+)= sum_k lhs[batch, m, k] * rhs[batch, k, n] with
/// numpy batch broadcasting; lhs/rhs are at least 2-D here.
Value contract(OpBuilder &b, Location loc, Value lhs, Value rhs, Value init,
               RankedTensorType resultType) {
  MLIRContext *ctx = b.getContext();
  int64_t batchRank = resultType.getRank() - 2;
  int64_t loops = batchRank + 3; // batch..., m, n, k
  AffineExpr m = getAffineDimExpr(batchRank, ctx);
  AffineExpr n = getAffineDimExpr(batchRank + 1, ctx);
  AffineExpr k = getAffineDimExpr(batchRank + 2, ctx);
  auto operandMap = [&](RankedTensorType type, AffineExpr row, AffineExpr col) {
    SmallVector<AffineExpr> exprs;
    int64_t offset = batchRank - (type.getRank() - 2);
    for (int64_t d = 0; d < type.getRank() - 2; ++d) {
      bool broadcast =
          type.getDimSize(d) == 1 && resultType.getDimSize(offset + d) != 1;
      exprs.push_back(broadcast ? getAffineConstantExpr(0, ctx)
                                : getAffineDimExpr(offset + d, ctx));
    }
    exprs.push_back(row);
    exprs.push_back(col);
    return AffineMap::get(loops, 0, exprs, ctx);
  };
  SmallVector<AffineExpr> outExprs;
  for (int64_t d = 0; d < batchRank; ++d)
    outExprs.push_back(getAffineDimExpr(d, ctx));
  outExprs.push_back(m);
  outExprs.push_back(n);
  SmallVector<AffineMap> maps{operandMap(typeOf(lhs), m, k),
                              operandMap(typeOf(rhs), k, n),
                              AffineMap::get(loops, 0, outExprs, ctx)};
  return linalg::GenericOp::create(
             b, loc, TypeRange{resultType}, ValueRange{lhs, rhs},
             ValueRange{init}, maps, iterators(batchRank + 2, 1),
             [](OpBuilder &nb, Location nloc, ValueRange s) {
               linalg::YieldOp::create(nb, nloc, multiplyAdd(nb, nloc, s));
             })
      .getResult(0);
}

Values lowerMatmul(MatmulOp op, ValueRange operands,
                   ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  Value lhs = operands[0], rhs = operands[1];
  RankedTensorType lt = typeOf(lhs), rt = typeOf(rhs);
  Type element = lt.getElementType();
  // numpy promotion of 1-D operands, undone on the result.
  if (lt.getRank() == 1)
    lhs = reshapeTo(b, loc, lhs,
                    RankedTensorType::get({1, lt.getDimSize(0)}, element));
  if (rt.getRank() == 1)
    rhs = reshapeTo(b, loc, rhs,
                    RankedTensorType::get({rt.getDimSize(0), 1}, element));
  ArrayRef<int64_t> l = typeOf(lhs).getShape(), r = typeOf(rhs).getShape();
  SmallVector<int64_t> shape = *broadcastShapes(l.drop_back(2), r.drop_back(2));
  shape.push_back(l[l.size() - 2]);
  shape.push_back(r.back());
  auto resultType = RankedTensorType::get(shape, accumulatorOf(element));
  Value product =
      contract(b, loc, lhs, rhs, filled(b, loc, resultType, 0), resultType);
  return one(reshapeTo(b, loc, narrowTo(b, loc, product, element),
                       op.getType()));
}

Values lowerLinear(LinearOp op, ValueRange operands,
                   ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value x = operands[0], w = operands[1];
  Value bias = operands.size() > 2 ? operands[2] : nullptr;
  RankedTensorType xt = typeOf(x);
  Type element = xt.getElementType();
  int64_t k = xt.getShape().back();
  int64_t rows = xt.getNumElements() / std::max<int64_t>(k, 1);
  int64_t n = op.getType().getShape().back();
  Value flat = reshapeTo(b, loc, x, RankedTensorType::get({rows, k}, element));
  auto resultType = RankedTensorType::get({rows, n}, accumulatorOf(element));
  // Start from the broadcast bias, or zeros.
  Value init = filled(b, loc, resultType, 0);
  if (bias)
    init = elementwise(
        b, loc, resultType, ValueRange{bias},
        [&](OpBuilder &nb, Location nloc, ValueRange s) {
          return castScalar(nb, nloc, s[0], resultType.getElementType());
        });
  AffineExpr i = getAffineDimExpr(0, ctx), j = getAffineDimExpr(1, ctx),
             p = getAffineDimExpr(2, ctx);
  SmallVector<AffineMap> maps{AffineMap::get(3, 0, {i, p}, ctx),
                              AffineMap::get(3, 0,
                                             op.getTransposeWeight()
                                                 ? ArrayRef<AffineExpr>{j, p}
                                                 : ArrayRef<AffineExpr>{p, j},
                                             ctx),
                              AffineMap::get(3, 0, {i, j}, ctx)};
  Value product =
      linalg::GenericOp::create(
          b, loc, TypeRange{resultType}, ValueRange{flat, w}, ValueRange{init},
          maps, iterators(2, 1),
          [](OpBuilder &nb, Location nloc, ValueRange s) {
            linalg::YieldOp::create(nb, nloc, multiplyAdd(nb, nloc, s));
          })
          .getResult(0);
  return one(reshapeTo(b, loc, narrowTo(b, loc, product, element),
                       op.getType()));
}

Values lowerConv(ConvOp op, ValueRange operands, ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  if (op.getGroup() != 1)
    return failure(); // rejected with a message before the conversion
  Value x = operands[0], w = operands[1];
  Value bias = operands.size() > 2 ? operands[2] : nullptr;
  RankedTensorType xt = typeOf(x), wt = typeOf(w);
  RankedTensorType resultType = op.getType();
  int64_t spatial = xt.getRank() - 2;
  Type element = xt.getElementType();
  ArrayRef<int64_t> pads = op.getPads();
  // Zero padding: insert the input into a zero tensor of the padded shape.
  if (llvm::any_of(pads, [](int64_t p) { return p != 0; })) {
    SmallVector<int64_t> padded(xt.getShape());
    SmallVector<int64_t> offsets(xt.getRank(), 0), strides(xt.getRank(), 1);
    for (int64_t d = 0; d < spatial; ++d) {
      padded[2 + d] += pads[d] + pads[spatial + d];
      offsets[2 + d] = pads[d];
    }
    Value zeros = filled(b, loc, RankedTensorType::get(padded, element), 0);
    x = tensor::InsertSliceOp::create(b, loc, x, zeros, ValueRange{},
                                      ValueRange{}, ValueRange{}, offsets,
                                      xt.getShape(), strides);
  }
  // Loops: n, m, o_1..o_s, c, k_1..k_s.
  int64_t loops = 2 + 2 * spatial + 1;
  auto dim = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineExpr> inExprs{dim(0), dim(2 + spatial)};
  SmallVector<AffineExpr> wExprs{dim(1), dim(2 + spatial)};
  SmallVector<AffineExpr> outExprs{dim(0), dim(1)};
  for (int64_t d = 0; d < spatial; ++d) {
    AffineExpr o = dim(2 + d), kk = dim(3 + spatial + d);
    inExprs.push_back(o * op.getStrides()[d] + kk * op.getDilations()[d]);
    wExprs.push_back(kk);
    outExprs.push_back(o);
  }
  Value init = filled(b, loc, resultType, 0);
  if (bias) {
    SmallVector<AffineExpr> biasExpr{dim(1)};
    init = linalg::GenericOp::create(
               b, loc, TypeRange{resultType}, ValueRange{bias},
               ValueRange{emptyTensor(b, loc, resultType)},
               {AffineMap::get(resultType.getRank(), 0, biasExpr, ctx),
                AffineMap::getMultiDimIdentityMap(resultType.getRank(), ctx)},
               iterators(resultType.getRank()),
               [](OpBuilder &nb, Location nloc, ValueRange s) {
                 linalg::YieldOp::create(nb, nloc, s[0]);
               })
               .getResult(0);
  }
  (void)wt;
  return one(
      linalg::GenericOp::create(
          b, loc, TypeRange{resultType}, ValueRange{x, w}, ValueRange{init},
          {AffineMap::get(loops, 0, inExprs, ctx),
           AffineMap::get(loops, 0, wExprs, ctx),
           AffineMap::get(loops, 0, outExprs, ctx)},
          iterators(2 + spatial, 1 + spatial),
          [](OpBuilder &nb, Location nloc, ValueRange s) {
            linalg::YieldOp::create(
                nb, nloc,
                addScalars(nb, nloc, s[2], mulScalars(nb, nloc, s[0], s[1])));
          })
          .getResult(0));
}

Values lowerAttention(AttentionOp op, ValueRange operands,
                      ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value q = operands[0], k = operands[1], v = operands[2];
  Value mask = operands.size() > 3 ? operands[3] : nullptr;
  RankedTensorType qt = typeOf(q), kt = typeOf(k);
  Type element = qt.getElementType();
  int64_t batch = qt.getDimSize(0), heads = qt.getDimSize(1),
          s = qt.getDimSize(2), t = kt.getDimSize(2);
  int64_t group = heads / kt.getDimSize(1);
  auto dim = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  // scores[b, h, i, j] = sum_d q[b, h, i, d] * k[b, h / group, j, d]
  auto scoresType = RankedTensorType::get({batch, heads, s, t}, element);
  Value scores =
      linalg::GenericOp::create(
          b, loc, TypeRange{scoresType}, ValueRange{q, k},
          ValueRange{filled(b, loc, scoresType, 0)},
          {AffineMap::get(5, 0, {dim(0), dim(1), dim(2), dim(4)}, ctx),
           AffineMap::get(
               5, 0, {dim(0), dim(1).floorDiv(group), dim(3), dim(4)}, ctx),
           AffineMap::get(5, 0, {dim(0), dim(1), dim(2), dim(3)}, ctx)},
          iterators(4, 1),
          [](OpBuilder &nb, Location nloc, ValueRange a) {
            linalg::YieldOp::create(
                nb, nloc,
                addScalars(nb, nloc, a[2], mulScalars(nb, nloc, a[0], a[1])));
          })
          .getResult(0);
  // Scale, mask and causal mask in one elementwise pass.
  double scale = op.getEffectiveScale();
  bool causal = op.getCausal();
  bool boolMask = mask && typeOf(mask).getElementType().isInteger(1);
  SmallVector<Value> inputs{scores};
  if (mask)
    inputs.push_back(mask);
  Value masked = elementwise(
      b, loc, scoresType, inputs,
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        Value x = arith::MulFOp::create(b, loc, a[0],
                                        scalarConstant(b, loc, element, scale));
        Value negInf = scalarConstant(b, loc, element, -INFINITY);
        if (mask && boolMask)
          x = arith::SelectOp::create(b, loc, a[1], x, negInf);
        else if (mask)
          x = arith::AddFOp::create(b, loc, x, a[1]);
        if (causal) {
          Value i = linalg::IndexOp::create(b, loc, 2);
          Value j = linalg::IndexOp::create(b, loc, 3);
          Value limit = arith::AddIOp::create(
              b, loc, i, arith::ConstantIndexOp::create(b, loc, t - s));
          Value hidden = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::sgt, j, limit);
          x = arith::SelectOp::create(b, loc, hidden, negInf, x);
        }
        return x;
      });
  Value probabilities = softmax(b, loc, masked, 3, false);
  // out[b, h, i, e] = sum_j p[b, h, i, j] * v[b, h / group, j, e]
  RankedTensorType outType = op.getResult().getType();
  return one(
      linalg::GenericOp::create(
          b, loc, TypeRange{outType}, ValueRange{probabilities, v},
          ValueRange{filled(b, loc, outType, 0)},
          {AffineMap::get(5, 0, {dim(0), dim(1), dim(2), dim(4)}, ctx),
           AffineMap::get(
               5, 0, {dim(0), dim(1).floorDiv(group), dim(4), dim(3)}, ctx),
           AffineMap::get(5, 0, {dim(0), dim(1), dim(2), dim(3)}, ctx)},
          iterators(4, 1),
          [](OpBuilder &nb, Location nloc, ValueRange a) {
            linalg::YieldOp::create(
                nb, nloc,
                addScalars(nb, nloc, a[2], mulScalars(nb, nloc, a[0], a[1])));
          })
          .getResult(0));
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Values lowerGather(GatherOp op, ValueRange operands,
                   ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value data = operands[0], indices = operands[1];
  RankedTensorType resultType = op.getType();
  auto axis = static_cast<int64_t>(op.getAxis());
  int64_t indexRank = typeOf(indices).getRank();
  int64_t dimSize = typeOf(data).getDimSize(axis);
  SmallVector<AffineExpr> indexExprs;
  for (int64_t d = 0; d < indexRank; ++d)
    indexExprs.push_back(getAffineDimExpr(axis + d, ctx));
  int64_t rank = resultType.getRank();
  return one(
      linalg::GenericOp::create(
          b, loc, TypeRange{resultType}, ValueRange{indices},
          ValueRange{emptyTensor(b, loc, resultType)},
          {AffineMap::get(rank, 0, indexExprs, ctx),
           AffineMap::getMultiDimIdentityMap(rank, ctx)},
          iterators(rank),
          [&](OpBuilder &nb, Location nloc, ValueRange a) {
            Value index =
                arith::IndexCastOp::create(nb, nloc, nb.getIndexType(), a[0]);
            // A negative index counts from the end.
            Value negative = arith::CmpIOp::create(
                nb, nloc, arith::CmpIPredicate::slt, index,
                arith::ConstantIndexOp::create(nb, nloc, 0));
            Value wrapped = arith::AddIOp::create(
                nb, nloc, index,
                arith::ConstantIndexOp::create(nb, nloc, dimSize));
            index = arith::SelectOp::create(nb, nloc, negative, wrapped, index);
            SmallVector<Value> coords;
            for (int64_t d = 0; d < axis; ++d)
              coords.push_back(linalg::IndexOp::create(nb, nloc, d));
            coords.push_back(index);
            for (int64_t d = axis + indexRank; d < rank; ++d)
              coords.push_back(linalg::IndexOp::create(nb, nloc, d));
            linalg::YieldOp::create(
                nb, nloc,
                Value(tensor::ExtractOp::create(nb, nloc, data, coords)));
          })
          .getResult(0));
}

template <typename OpTy>
Values lowerReshapeLike(OpTy op, ValueRange operands,
                        ConversionPatternRewriter &b) {
  return one(reshapeTo(b, op.getLoc(), operands[0],
                       llvm::cast<RankedTensorType>(op.getType())));
}

Values lowerTranspose(TransposeOp op, ValueRange operands,
                      ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  return one(linalg::TransposeOp::create(b, loc, operands[0],
                                         emptyTensor(b, loc, op.getType()),
                                         op.getPermutation())
                 .getResult()[0]);
}

Values lowerConcat(ConcatOp op, ValueRange operands,
                   ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  RankedTensorType type = op.getType();
  auto axis = static_cast<int64_t>(op.getAxis());
  Value result = emptyTensor(b, loc, type);
  int64_t offset = 0;
  for (Value input : operands) {
    RankedTensorType it = typeOf(input);
    SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
    offsets[axis] = offset;
    result = tensor::InsertSliceOp::create(b, loc, input, result, ValueRange{},
                                           ValueRange{}, ValueRange{}, offsets,
                                           it.getShape(), strides);
    offset += it.getDimSize(axis);
  }
  return one(result);
}

Values lowerSplit(SplitOp op, ValueRange operands,
                  ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  auto axis = static_cast<int64_t>(op.getAxis());
  int64_t rank = typeOf(operands[0]).getRank();
  SmallVector<Value> results;
  int64_t offset = 0;
  for (Value result : op.getResults()) {
    RankedTensorType type = typeOf(result);
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
    offsets[axis] = offset;
    results.push_back(tensor::ExtractSliceOp::create(
        b, loc, type, operands[0], ValueRange{}, ValueRange{}, ValueRange{},
        offsets, type.getShape(), strides));
    offset += type.getDimSize(axis);
  }
  return results;
}

Values lowerSlice(SliceOp op, ValueRange operands,
                  ConversionPatternRewriter &b) {
  Location loc = op.getLoc();
  RankedTensorType type = op.getType();
  ArrayRef<int64_t> offsets = op.getOffsets(), strides = op.getStrides();
  if (llvm::all_of(strides, [](int64_t s) { return s > 0; }))
    return one(tensor::ExtractSliceOp::create(
        b, loc, type, operands[0], ValueRange{}, ValueRange{}, ValueRange{},
        offsets, type.getShape(), strides));
  // Negative strides: read source[offset + i * stride] elementwise.
  Value source = operands[0];
  int64_t rank = type.getRank();
  return one(linalg::GenericOp::create(
                 b, loc, TypeRange{type}, ValueRange{},
                 ValueRange{emptyTensor(b, loc, type)},
                 {AffineMap::getMultiDimIdentityMap(rank, b.getContext())},
                 iterators(rank),
                 [&](OpBuilder &nb, Location nloc, ValueRange) {
                   SmallVector<Value> coords;
                   for (int64_t d = 0; d < rank; ++d) {
                     Value i = linalg::IndexOp::create(nb, nloc, d);
                     Value scaled = arith::MulIOp::create(
                         nb, nloc, i,
                         arith::ConstantIndexOp::create(nb, nloc, strides[d]));
                     coords.push_back(arith::AddIOp::create(
                         nb, nloc, scaled,
                         arith::ConstantIndexOp::create(nb, nloc, offsets[d])));
                   }
                   linalg::YieldOp::create(nb, nloc,
                                           Value(tensor::ExtractOp::create(
                                               nb, nloc, source, coords)));
                 })
                 .getResult(0));
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

template <typename OpTy>
void add(RewritePatternSet &patterns,
         FailureOr<SmallVector<Value>> (*fn)(OpTy, ValueRange,
                                             ConversionPatternRewriter &)) {
  patterns.add<Lowering<OpTy>>(patterns.getContext(), fn);
}

struct ConvertWeftToLinalgPass
    : public weft::impl::ConvertWeftToLinalgBase<ConvertWeftToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // A template holds two of its micro-batches: lowered as it is, it
    // would train on those alone.
    WalkResult templates = getOperation()->walk([](func::FuncOp func) {
      if (!func->hasAttr(WeftDialect::kMicrobatchesAttrName))
        return WalkResult::advance();
      func.emitError() << "convert-weft-to-linalg: '" << func.getSymName()
                       << "' is a micro-batch template (weft.microbatches): "
                          "run weft-outline-microbatches first";
      return WalkResult::interrupt();
    });
    if (templates.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(ctx);
    add<ConstantOp>(patterns, lowerConstant);
    add<RangeOp>(patterns, lowerRange);
    add<SqrtOp>(patterns, lowerSqrtOp);
    add<RsqrtOp>(patterns, lowerRsqrtOp);
    add<ExpOp>(patterns, lowerExpOp);
    add<LogOp>(patterns, lowerLogOp);
    add<TanhOp>(patterns, lowerTanhOp);
    add<ErfOp>(patterns, lowerErfOp);
    add<SigmoidOp>(patterns, lowerSigmoidOp);
    add<SiluOp>(patterns, lowerSiluOp);
    add<ReciprocalOp>(patterns, lowerReciprocalOp);
    add<SinOp>(patterns, lowerSinOp);
    add<CosOp>(patterns, lowerCosOp);
    add<GeluOp>(patterns, lowerGelu);
    add<GeluGradOp>(patterns, lowerGeluGrad);
    add<NegOp>(patterns, lowerNeg);
    add<AbsOp>(patterns, lowerAbs);
    add<ReluOp>(patterns, lowerRelu);
    add<NotOp>(patterns, lowerNot);
    add<CastOp>(patterns, lowerCast);
    add<AddOp>(patterns, lowerArith<AddOp, arith::AddFOp, arith::AddIOp>);
    add<SubOp>(patterns, lowerArith<SubOp, arith::SubFOp, arith::SubIOp>);
    add<MulOp>(patterns, lowerArith<MulOp, arith::MulFOp, arith::MulIOp>);
    add<DivOp>(patterns, lowerArith<DivOp, arith::DivFOp, arith::DivSIOp>);
    add<MaxOp>(patterns, lowerArith<MaxOp, arith::MaximumFOp, arith::MaxSIOp>);
    add<MinOp>(patterns, lowerArith<MinOp, arith::MinimumFOp, arith::MinSIOp>);
    add<PowOp>(patterns, lowerPow);
    add<AndOp>(patterns, lowerLogic<AndOp, arith::AndIOp>);
    add<OrOp>(patterns, lowerLogic<OrOp, arith::OrIOp>);
    add<XorOp>(patterns, lowerLogic<XorOp, arith::XOrIOp>);
    add<EqualOp>(patterns, lowerCompare<EqualOp, arith::CmpFPredicate::OEQ,
                                        arith::CmpIPredicate::eq>);
    add<LessOp>(patterns, lowerCompare<LessOp, arith::CmpFPredicate::OLT,
                                       arith::CmpIPredicate::slt>);
    add<LessEqualOp>(patterns,
                     lowerCompare<LessEqualOp, arith::CmpFPredicate::OLE,
                                  arith::CmpIPredicate::sle>);
    add<GreaterOp>(patterns, lowerCompare<GreaterOp, arith::CmpFPredicate::OGT,
                                          arith::CmpIPredicate::sgt>);
    add<GreaterEqualOp>(patterns,
                        lowerCompare<GreaterEqualOp, arith::CmpFPredicate::OGE,
                                     arith::CmpIPredicate::sge>);
    add<WhereOp>(patterns, lowerWhere);
    add<MatmulOp>(patterns, lowerMatmul);
    add<LinearOp>(patterns, lowerLinear);
    add<ConvOp>(patterns, lowerConv);
    add<ReduceSumOp>(patterns, lowerReduce<ReduceSumOp>);
    add<ReduceMeanOp>(patterns, lowerReduce<ReduceMeanOp>);
    add<ReduceMaxOp>(patterns, lowerReduce<ReduceMaxOp>);
    add<ReduceMinOp>(patterns, lowerReduce<ReduceMinOp>);
    add<ReduceProdOp>(patterns, lowerReduce<ReduceProdOp>);
    add<SoftmaxOp>(patterns, lowerSoftmax);
    add<LogSoftmaxOp>(patterns, lowerLogSoftmax);
    add<SoftmaxCrossEntropyOp>(patterns, lowerSoftmaxCrossEntropy);
    add<SoftmaxCrossEntropyGradOp>(patterns, lowerSoftmaxCrossEntropyGrad);
    add<LayerNormOp>(patterns, lowerLayerNorm);
    add<NormGradOp>(patterns, lowerNormGrad);
    add<RmsNormOp>(patterns, lowerRmsNorm);
    add<AttentionOp>(patterns, lowerAttention);
    add<GatherOp>(patterns, lowerGather);
    add<ReshapeOp>(patterns, lowerReshapeLike<ReshapeOp>);
    add<SqueezeOp>(patterns, lowerReshapeLike<SqueezeOp>);
    add<UnsqueezeOp>(patterns, lowerReshapeLike<UnsqueezeOp>);
    add<ExpandOp>(patterns, lowerExpand);
    add<TransposeOp>(patterns, lowerTranspose);
    add<ConcatOp>(patterns, lowerConcat);
    add<SplitOp>(patterns, lowerSplit);
    add<SliceOp>(patterns, lowerSlice);
    add<TriluOp>(patterns, lowerTrilu);

    // An attention gradient the partitioner left whole (or split over
    // heads) runs as its decomposition in weft ops, lowered below, unless
    // a fused kernel runs it (weft.library_call: bufferized into the call).
    SmallVector<AttentionGradOp> attentionGrads;
    getOperation()->walk([&](AttentionGradOp grad) {
      if (!grad->hasAttr(kLibraryCallAttrName))
        attentionGrads.push_back(grad);
    });
    for (AttentionGradOp grad : attentionGrads) {
      OpBuilder builder(grad);
      AttentionGradients grads = buildAttentionGradients(
          builder, grad, grad.getQuery(), grad.getKey(), grad.getValue(),
          grad.getMask(), grad.getOutGrad(), grad.getCausal(),
          grad.getEffectiveScale());
      grad.replaceAllUsesWith(ValueRange{grads.query, grads.key, grads.value});
      grad.erase();
    }

    // Configurations without a lowering get one clear error each, rather
    // than the conversion driver's generic "failed to legalize".
    WalkResult unsaved = getOperation()->walk([](AttentionOp attention) {
      if (!attention.getSaveLogSumExp() ||
          attention->hasAttr(kLibraryCallAttrName))
        return WalkResult::advance();
      attention.emitError("an attention saving its log-sum-exp runs only as "
                          "a fused kernel (weft-attention-to-library)");
      return WalkResult::interrupt();
    });
    if (unsaved.wasInterrupted())
      return signalPassFailure();
    WalkResult unsupported = getOperation()->walk([](ConvOp conv) {
      if (conv.getGroup() == 1)
        return WalkResult::advance();
      conv.emitError(
          "grouped convolution is not supported by the CPU backend yet");
      return WalkResult::interrupt();
    });
    if (unsupported.wasInterrupted())
      return signalPassFailure();

    ConversionTarget target(*ctx);
    target.addIllegalDialect<WeftDialect>();
    // Bufferized as atomic adds (its BufferizableOpInterface): a scatter has
    // no form as a linalg op on tensors.
    target.addLegalOp<ScatterAddOp>();
    // A fused attention kernel's call is made in bufferization too.
    target.addDynamicallyLegalOp<AttentionOp, AttentionGradOp>(
        [](Operation *op) { return op->hasAttr(kLibraryCallAttrName); });
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, scf::SCFDialect,
                           tensor::TensorDialect, func::FuncDialect>();
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
