//===- Autodiff.cpp - Reverse-mode differentiation of weft functions ------===//
//
// The gradient function replays the forward ops, then walks them backwards
// applying each op's vector-Jacobian product (VJP) to the adjoint of its
// results and summing what reaches each operand. Every rule is written in
// weft ops, so the backward pass is partitioned and lowered like the
// forward one. Each rule is checked against finite differences of the
// reference evaluator (unittests/Dialect/AutodiffTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Transforms/Autodiff.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>

namespace weft {
#define GEN_PASS_DEF_WEFTAUTODIFF
#include "weft/Dialect/Weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

bool isFloatTensor(Value v) {
  auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
  return type && llvm::isa<FloatType>(type.getElementType());
}

/// Builds the backward ops of one function.
class Backward {
public:
  Backward(OpBuilder &builder)
      : b(builder), loc(UnknownLoc::get(builder.getContext())) {}

  /// The VJP of `op`: given the adjoint of each result (null where a
  /// result has none), the adjoint of each operand (null where it gets
  /// none). Fails, with an error at the op, for an op without a rule.
  LogicalResult vjp(Operation *op, ArrayRef<Value> resultGrads,
                    SmallVectorImpl<Value> &operandGrads);

private:
  OpBuilder &b;
  /// The location of the op whose VJP is being built.
  Location loc;

  Value scalar(Type element, double value) {
    return createScalar(b, loc, element, value);
  }
  Value scalarLike(Value v, double value) {
    return scalar(tensorTypeOf(v).getElementType(), value);
  }
  Value zerosLike(RankedTensorType type) {
    return createSplat(b, loc, type, 0);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (tensorTypeOf(x).getShape() == shape)
      return x;
    return ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, tensorTypeOf(x).getElementType()), x);
  }
  Value transpose(Value x, ArrayRef<int64_t> permutation) {
    return TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(permutation));
  }
  /// Swaps the last two dims.
  Value transposeLast2(Value x) {
    int64_t rank = tensorTypeOf(x).getRank();
    SmallVector<int64_t> permutation =
        llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(permutation[rank - 1], permutation[rank - 2]);
    return transpose(x, permutation);
  }
  Value sum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    if (axes.empty())
      return x;
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                               keepdims ? b.getUnitAttr() : UnitAttr());
  }
  /// Sums a result-shaped adjoint down to the shape of a broadcast
  /// operand (numpy rules).
  Value unbroadcast(Value grad, RankedTensorType operand) {
    RankedTensorType type = tensorTypeOf(grad);
    if (type.getShape() == operand.getShape())
      return grad;
    int64_t offset = type.getRank() - operand.getRank();
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d < offset ||
          (operand.getDimSize(d - offset) == 1 && type.getDimSize(d) != 1))
        axes.push_back(d);
    return reshape(sum(grad, axes, false), operand.getShape());
  }
  /// Broadcasts `x` (kept dims of size 1) to `shape`.
  Value expandTo(Value x, ArrayRef<int64_t> shape) {
    if (tensorTypeOf(x).getShape() == shape)
      return x;
    return ExpandOp::create(
        b, loc, RankedTensorType::get(shape, tensorTypeOf(x).getElementType()), x);
  }
  Value castTo(Value x, Type element) {
    if (tensorTypeOf(x).getElementType() == element)
      return x;
    return CastOp::create(
        b, loc, RankedTensorType::get(tensorTypeOf(x).getShape(), element), x);
  }

  LogicalResult linear(LinearOp op, Value g, SmallVectorImpl<Value> &grads);
  LogicalResult matmul(MatmulOp op, Value g, SmallVectorImpl<Value> &grads);
  LogicalResult layerNorm(Operation *op, Value g, bool centered,
                          SmallVectorImpl<Value> &grads);
  LogicalResult attention(AttentionOp op, Value g,
                          SmallVectorImpl<Value> &grads);
  LogicalResult gather(GatherOp op, Value g, SmallVectorImpl<Value> &grads);
  Value gelu(GeluOp op, Value g);
};

LogicalResult Backward::linear(LinearOp op, Value g,
                               SmallVectorImpl<Value> &grads) {
  Value x = op.getInput(), w = op.getWeight();
  bool transposed = op.getTransposeWeight();
  // dx = g W^T (a linear with the weight's layout flipped).
  grads[0] = LinearOp::create(b, loc, g, w, Value(),
                              transposed ? UnitAttr() : b.getUnitAttr());
  // dW: x^T g over every leading dim.
  int64_t k = tensorTypeOf(x).getShape().back(), n = tensorTypeOf(g).getShape().back();
  int64_t rows = tensorTypeOf(x).getNumElements() / k;
  Value x2 = reshape(x, {rows, k}), g2 = reshape(g, {rows, n});
  grads[1] = transposed ? MatmulOp::create(b, loc, transposeLast2(g2), x2)
                        : MatmulOp::create(b, loc, transposeLast2(x2), g2);
  if (op.getBias())
    grads[2] = sum(g2, {0}, false);
  return success();
}

LogicalResult Backward::matmul(MatmulOp op, Value g,
                               SmallVectorImpl<Value> &grads) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  if (tensorTypeOf(lhs).getRank() < 2 || tensorTypeOf(rhs).getRank() < 2)
    return op.emitError("autodiff: weft.matmul of a 1-D operand has no "
                        "gradient rule");
  grads[0] = unbroadcast(MatmulOp::create(b, loc, g, transposeLast2(rhs)),
                         tensorTypeOf(lhs));
  grads[1] = unbroadcast(MatmulOp::create(b, loc, transposeLast2(lhs), g),
                         tensorTypeOf(rhs));
  return success();
}

/// Layer norm (centered) or RMS norm over dims axis..rank-1.
LogicalResult Backward::layerNorm(Operation *op, Value g, bool centered,
                                  SmallVectorImpl<Value> &grads) {
  Value x = op->getOperand(0), scale = op->getOperand(1);
  RankedTensorType type = tensorTypeOf(x);
  int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
  double epsilon =
      op->getAttrOfType<FloatAttr>("epsilon").getValue().convertToDouble();
  SmallVector<int64_t> normalized =
      llvm::to_vector(llvm::seq<int64_t>(axis, type.getRank()));
  SmallVector<int64_t> rows = llvm::to_vector(llvm::seq<int64_t>(0, axis));
  int64_t count = 1;
  for (int64_t d : normalized)
    count *= type.getDimSize(d);
  auto mean = [&](Value v) {
    return div(sum(v, normalized, true), scalarLike(v, count));
  };
  // x^ = (x - mean) * r with r = rsqrt(var + eps) (RMS: mean 0).
  Value centeredX = centered ? sub(x, mean(x)) : x;
  Value r = RsqrtOp::create(
      b, loc, add(mean(mul(centeredX, centeredX)), scalarLike(x, epsilon)));
  Value normalizedX = mul(centeredX, r);
  Value gNormalized = mul(g, scale);
  // dx = r (g^ - mean(g^) - x^ mean(g^ x^)); RMS drops the mean(g^) term.
  Value inner =
      sub(gNormalized, mul(normalizedX, mean(mul(gNormalized, normalizedX))));
  if (centered)
    inner = sub(inner, mean(gNormalized));
  grads[0] = mul(r, inner);
  grads[1] = sum(mul(g, normalizedX), rows, false);
  if (op->getNumOperands() > 2)
    grads[2] = sum(g, rows, false);
  return success();
}

/// Attention recomputes its probabilities: P = softmax(S), S = scale q k^T
/// (+ mask), then dV = P^T dO, dS = P (dP - rowsum(dP P)) with dP = dO V^T,
/// dQ = scale dS K, dK = scale dS^T Q. Grouped KV heads sum over groups.
LogicalResult Backward::attention(AttentionOp op, Value g,
                                  SmallVectorImpl<Value> &grads) {
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  Value mask = op.getMask();
  RankedTensorType qt = tensorTypeOf(q), kt = tensorTypeOf(k), vt = tensorTypeOf(v);
  int64_t batch = qt.getDimSize(0), heads = qt.getDimSize(1),
          s = qt.getDimSize(2), d = qt.getDimSize(3);
  int64_t kvHeads = kt.getDimSize(1), t = kt.getDimSize(2),
          dv = vt.getDimSize(3);
  int64_t group = heads / kvHeads;
  Type element = qt.getElementType();
  // K and V seen per query head.
  auto perQueryHead = [&](Value x, int64_t last) {
    if (group == 1)
      return x;
    Value expanded = expandTo(reshape(x, {batch, kvHeads, 1, t, last}),
                              {batch, kvHeads, group, t, last});
    return reshape(expanded, {batch, heads, t, last});
  };
  auto perKvHead = [&](Value x, int64_t last) {
    if (group == 1)
      return x;
    return sum(reshape(x, {batch, kvHeads, group, t, last}), {2}, false);
  };
  Value kq = perQueryHead(k, d), vq = perQueryHead(v, dv);
  double scale = op.getEffectiveScale();
  Value scores = mul(MatmulOp::create(b, loc, q, transposeLast2(kq)),
                     scalar(element, scale));
  Value negInf = scalar(element, -INFINITY);
  if (mask) {
    if (tensorTypeOf(mask).getElementType().isInteger(1))
      scores = WhereOp::create(b, loc, mask, scores, negInf);
    else
      scores = add(scores, mask);
  }
  if (op.getCausal()) {
    // Query i sees keys j <= i + (t - s).
    auto index = [&](int64_t n, ArrayRef<int64_t> shape) {
      auto type = RankedTensorType::get({n}, b.getI64Type());
      return reshape(RangeOp::create(b, loc, type, b.getI64IntegerAttr(0),
                                     b.getI64IntegerAttr(1)),
                     shape);
    };
    Value i = index(s, {s, 1}), j = index(t, {1, t});
    Value visible =
        LessEqualOp::create(b, loc, j, add(i, scalar(b.getI64Type(), t - s)));
    scores = WhereOp::create(b, loc, visible, scores, negInf);
  }
  Value p = SoftmaxOp::create(b, loc, scores, b.getI64IntegerAttr(3));
  Value dvq = MatmulOp::create(b, loc, transposeLast2(p), g);
  Value dp = MatmulOp::create(b, loc, g, transposeLast2(vq));
  Value ds = mul(p, sub(dp, sum(mul(dp, p), {3}, true)));
  Value dsScaled = mul(ds, scalar(element, scale));
  grads[0] = MatmulOp::create(b, loc, dsScaled, kq);
  grads[1] =
      perKvHead(MatmulOp::create(b, loc, transposeLast2(dsScaled), q), d);
  grads[2] = perKvHead(dvq, dv);
  if (mask && !tensorTypeOf(mask).getElementType().isInteger(1))
    grads[3] = unbroadcast(ds, tensorTypeOf(mask));
  return success();
}

/// The table's adjoint adds each output row into the row it was read from:
/// a one-hot of the indices, contracted with the adjoint.
LogicalResult Backward::gather(GatherOp op, Value g,
                               SmallVectorImpl<Value> &grads) {
  if (op.getAxis() != 0)
    return op.emitError("autodiff: weft.gather has a gradient rule on axis "
                        "0 only");
  Value indices = op.getIndices();
  RankedTensorType table = tensorTypeOf(op.getData());
  int64_t rows = table.getDimSize(0);
  int64_t width = table.getNumElements() / rows;
  int64_t lookups = tensorTypeOf(indices).getNumElements();
  Type indexType = tensorTypeOf(indices).getElementType();
  Value ids = reshape(indices, {lookups, 1});
  // Negative indices count from the end, as in the forward gather.
  ids =
      WhereOp::create(b, loc, LessOp::create(b, loc, ids, scalar(indexType, 0)),
                      add(ids, scalar(indexType, rows)), ids);
  Value range =
      reshape(RangeOp::create(b, loc, RankedTensorType::get({rows}, indexType),
                              b.getIntegerAttr(indexType, 0),
                              b.getIntegerAttr(indexType, 1)),
              {1, rows});
  Value oneHot =
      castTo(EqualOp::create(b, loc, ids, range), table.getElementType());
  Value rowsGrad = MatmulOp::create(b, loc, transposeLast2(oneHot),
                                    reshape(g, {lookups, width}));
  grads[0] = reshape(rowsGrad, table.getShape());
  return success();
}

Value Backward::gelu(GeluOp op, Value g) {
  Value x = op.getInput();
  auto c = [&](double v) { return scalarLike(x, v); };
  if (op.getApproximate() == "tanh") {
    // y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
    Value x2 = mul(x, x);
    Value u = mul(c(0.7978845608028654), add(x, mul(c(0.044715), mul(x2, x))));
    Value th = TanhOp::create(b, loc, u);
    Value du = mul(c(0.7978845608028654), add(c(1), mul(c(3 * 0.044715), x2)));
    Value dy = add(mul(c(0.5), add(c(1), th)),
                   mul(mul(c(0.5), x), mul(sub(c(1), mul(th, th)), du)));
    return mul(g, dy);
  }
  // y = x Phi(x): dy = Phi(x) + x phi(x).
  Value cdf =
      mul(c(0.5), add(c(1), ErfOp::create(b, loc, mul(x, c(M_SQRT1_2)))));
  Value pdf = mul(c(0.3989422804014327),
                  ExpOp::create(b, loc, mul(c(-0.5), mul(x, x))));
  return mul(g, add(cdf, mul(x, pdf)));
}

LogicalResult Backward::vjp(Operation *op, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &grads) {
  loc = op->getLoc();
  grads.assign(op->getNumOperands(), Value());
  Value g = resultGrads.empty() ? Value() : resultGrads[0];
  Value y = op->getNumResults() ? op->getResult(0) : Value();
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  auto sameAsOperand = [&](unsigned i, Value grad) {
    grads[i] = unbroadcast(grad, tensorTypeOf(operand(i)));
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<AddOp>([&](auto) {
        sameAsOperand(0, g);
        sameAsOperand(1, g);
        return success();
      })
      .Case<SubOp>([&](auto) {
        sameAsOperand(0, g);
        sameAsOperand(1, neg(g));
        return success();
      })
      .Case<MulOp>([&](auto) {
        sameAsOperand(0, mul(g, operand(1)));
        sameAsOperand(1, mul(g, operand(0)));
        return success();
      })
      .Case<DivOp>([&](auto) {
        sameAsOperand(0, div(g, operand(1)));
        sameAsOperand(1, neg(div(mul(g, y), operand(1))));
        return success();
      })
      .Case<PowOp>([&](auto) {
        // d(a^b)/da = b a^(b-1) = b y / a; d/db = y log(a).
        Value a = operand(0), e = operand(1);
        sameAsOperand(0, mul(g, div(mul(e, y), a)));
        if (isFloatTensor(e))
          sameAsOperand(1, mul(g, mul(y, LogOp::create(b, loc, a))));
        return success();
      })
      .Case<MaxOp, MinOp>([&](auto) {
        // The adjoint goes to the chosen operand (the first on ties).
        Value first =
            isa<MaxOp>(op)
                ? Value(GreaterEqualOp::create(b, loc, operand(0), operand(1)))
                : Value(LessEqualOp::create(b, loc, operand(0), operand(1)));
        Value zero = scalarLike(g, 0);
        sameAsOperand(0, WhereOp::create(b, loc, first, g, zero));
        sameAsOperand(1, WhereOp::create(b, loc, first, zero, g));
        return success();
      })
      .Case<NegOp>([&](auto) {
        grads[0] = neg(g);
        return success();
      })
      .Case<ExpOp>([&](auto) {
        grads[0] = mul(g, y);
        return success();
      })
      .Case<LogOp>([&](auto) {
        grads[0] = div(g, operand(0));
        return success();
      })
      .Case<SqrtOp>([&](auto) {
        grads[0] = div(mul(g, scalarLike(g, 0.5)), y);
        return success();
      })
      .Case<RsqrtOp>([&](auto) {
        grads[0] = mul(mul(g, scalarLike(g, -0.5)), mul(y, mul(y, y)));
        return success();
      })
      .Case<ReciprocalOp>([&](auto) {
        grads[0] = neg(mul(g, mul(y, y)));
        return success();
      })
      .Case<TanhOp>([&](auto) {
        grads[0] = mul(g, sub(scalarLike(g, 1), mul(y, y)));
        return success();
      })
      .Case<SigmoidOp>([&](auto) {
        grads[0] = mul(g, mul(y, sub(scalarLike(g, 1), y)));
        return success();
      })
      .Case<SiluOp>([&](auto) {
        Value s = SigmoidOp::create(b, loc, operand(0));
        Value one = scalarLike(g, 1);
        grads[0] = mul(g, mul(s, add(one, mul(operand(0), sub(one, s)))));
        return success();
      })
      .Case<ErfOp>([&](auto) {
        Value x = operand(0);
        grads[0] = mul(g, mul(scalarLike(g, 1.1283791670955126),
                              ExpOp::create(b, loc, neg(mul(x, x)))));
        return success();
      })
      .Case<SinOp>([&](auto) {
        grads[0] = mul(g, CosOp::create(b, loc, operand(0)));
        return success();
      })
      .Case<CosOp>([&](auto) {
        grads[0] = neg(mul(g, SinOp::create(b, loc, operand(0))));
        return success();
      })
      .Case<AbsOp, ReluOp>([&](auto) {
        Value x = operand(0), zero = scalarLike(x, 0);
        Value positive = GreaterOp::create(b, loc, x, zero);
        grads[0] = isa<ReluOp>(op)
                       ? Value(WhereOp::create(b, loc, positive, g, zero))
                       : Value(WhereOp::create(b, loc, positive, g, neg(g)));
        return success();
      })
      .Case<GeluOp>([&](GeluOp gelu) {
        grads[0] = this->gelu(gelu, g);
        return success();
      })
      .Case<CastOp>([&](auto) {
        if (isFloatTensor(operand(0)))
          grads[0] = castTo(g, tensorTypeOf(operand(0)).getElementType());
        return success();
      })
      .Case<ReshapeOp, SqueezeOp, UnsqueezeOp>([&](auto) {
        grads[0] = reshape(g, tensorTypeOf(operand(0)).getShape());
        return success();
      })
      .Case<ExpandOp>([&](auto) {
        sameAsOperand(0, g);
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp t) {
        SmallVector<int64_t> inverse(t.getPermutation().size());
        for (auto [i, p] : llvm::enumerate(t.getPermutation()))
          inverse[p] = i;
        grads[0] = transpose(g, inverse);
        return success();
      })
      .Case<SplitOp>([&](SplitOp split) {
        SmallVector<Value> parts;
        for (auto [i, result] : llvm::enumerate(split.getResults()))
          parts.push_back(resultGrads[i] ? resultGrads[i]
                                         : zerosLike(tensorTypeOf(result)));
        grads[0] = ConcatOp::create(b, loc, parts, split.getAxisAttr());
        return success();
      })
      .Case<ConcatOp>([&](ConcatOp concat) {
        int64_t axis = static_cast<int64_t>(concat.getAxis());
        int64_t offset = 0;
        for (auto [i, input] : llvm::enumerate(concat.getInputs())) {
          RankedTensorType type = tensorTypeOf(input);
          SmallVector<int64_t> offsets(type.getRank(), 0),
              strides(type.getRank(), 1);
          offsets[axis] = offset;
          offset += type.getDimSize(axis);
          if (isFloatTensor(input))
            grads[i] =
                SliceOp::create(b, loc, g, offsets, type.getShape(), strides);
        }
        return success();
      })
      .Case<SliceOp>([&](SliceOp slice) -> LogicalResult {
        // Zeros around the slice, dim by dim.
        RankedTensorType in = tensorTypeOf(slice.getInput());
        Value grad = g;
        for (int64_t d = 0; d < in.getRank(); ++d) {
          if (slice.getStrides()[d] != 1)
            return slice.emitError("autodiff: weft.slice with a stride "
                                   "other than 1 has no gradient rule");
          int64_t before = slice.getOffsets()[d];
          int64_t after = in.getDimSize(d) - before - slice.getSizes()[d];
          SmallVector<Value> pieces;
          SmallVector<int64_t> shape(tensorTypeOf(grad).getShape());
          if (before) {
            shape[d] = before;
            pieces.push_back(
                zerosLike(RankedTensorType::get(shape, in.getElementType())));
          }
          pieces.push_back(grad);
          if (after) {
            shape[d] = after;
            pieces.push_back(
                zerosLike(RankedTensorType::get(shape, in.getElementType())));
          }
          if (pieces.size() > 1)
            grad = ConcatOp::create(b, loc, pieces, b.getI64IntegerAttr(d));
        }
        grads[0] = grad;
        return success();
      })
      .Case<WhereOp>([&](WhereOp where) {
        Value zero = scalarLike(g, 0);
        if (isFloatTensor(where.getOnTrue()))
          sameAsOperand(1,
                        WhereOp::create(b, loc, where.getCondition(), g, zero));
        if (isFloatTensor(where.getOnFalse()))
          sameAsOperand(2,
                        WhereOp::create(b, loc, where.getCondition(), zero, g));
        return success();
      })
      .Case<ReduceSumOp, ReduceMeanOp>([&](Operation *reduce) {
        RankedTensorType in = tensorTypeOf(reduce->getOperand(0));
        ArrayRef<int64_t> axes =
            reduce->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
        SmallVector<int64_t> kept(in.getShape());
        int64_t count = 1;
        for (int64_t a : axes) {
          kept[a] = 1;
          count *= in.getDimSize(a);
        }
        Value grad = expandTo(reshape(g, kept), in.getShape());
        if (isa<ReduceMeanOp>(reduce))
          grad = div(grad, scalarLike(g, count));
        grads[0] = grad;
        return success();
      })
      .Case<SoftmaxOp>([&](SoftmaxOp softmax) {
        int64_t axis = static_cast<int64_t>(softmax.getAxis());
        grads[0] = mul(y, sub(g, sum(mul(g, y), {axis}, true)));
        return success();
      })
      .Case<LogSoftmaxOp>([&](LogSoftmaxOp logSoftmax) {
        int64_t axis = static_cast<int64_t>(logSoftmax.getAxis());
        grads[0] = sub(g, mul(ExpOp::create(b, loc, y), sum(g, {axis}, true)));
        return success();
      })
      .Case<LinearOp>(
          [&](LinearOp linear) { return this->linear(linear, g, grads); })
      .Case<MatmulOp>([&](MatmulOp m) { return matmul(m, g, grads); })
      .Case<LayerNormOp>([&](auto) { return layerNorm(op, g, true, grads); })
      .Case<RmsNormOp>([&](auto) { return layerNorm(op, g, false, grads); })
      .Case<AttentionOp>([&](AttentionOp a) { return attention(a, g, grads); })
      .Case<GatherOp>(
          [&](GatherOp gather) { return this->gather(gather, g, grads); })
      .Default([&](Operation *) {
        return op->emitError()
               << "autodiff: no gradient rule for '" << op->getName() << "'";
      });
}

} // namespace

FailureOr<func::FuncOp> weft::buildGradientFunction(func::FuncOp func,
                                                    StringRef name) {
  auto lossType =
      func.getNumResults()
          ? llvm::dyn_cast<RankedTensorType>(func.getResultTypes()[0])
          : RankedTensorType();
  if (!lossType || !llvm::isa<FloatType>(lossType.getElementType()) ||
      lossType.getNumElements() != 1)
    return func.emitError("autodiff: the first result must be a scalar "
                          "float loss");
  if (!func.getBody().hasOneBlock())
    return func.emitError("autodiff: needs a single-block function");
  OpBuilder b(func);
  b.setInsertionPointAfter(func);
  auto grad = cast<func::FuncOp>(b.clone(*func));
  grad.setSymName(name);
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Only ops that read a value depending on a parameter need adjoints:
  // the rest (masks, RoPE tables, shapes computed from constants) are
  // constants of the differentiation and have no rule to follow.
  llvm::DenseSet<Value> varied;
  for (BlockArgument arg : grad.getArguments())
    if (grad.getArgAttr(arg.getArgNumber(), WeftDialect::kParamAttrName) &&
        isFloatTensor(arg))
      varied.insert(arg);
  auto isVaried = [&](Value v) { return varied.contains(v); };
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator()) {
    if (llvm::none_of(op.getOperands(), isVaried))
      continue;
    forward.push_back(&op);
    for (Value result : op.getResults())
      if (isFloatTensor(result))
        varied.insert(result);
  }

  // Adjoints start at d loss / d loss = 1 and flow backwards.
  llvm::DenseMap<Value, Value> adjoint;
  b.setInsertionPoint(ret);
  Value loss = ret.getOperand(0);
  adjoint[loss] = ConstantOp::create(
      b, loss.getLoc(),
      DenseElementsAttr::get(lossType,
                             b.getFloatAttr(lossType.getElementType(), 1.0)));
  Backward backward(b);
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(adjoint.lookup(result));
      any |= resultGrads.back() != nullptr;
    }
    if (!any)
      continue;
    SmallVector<Value> operandGrads;
    b.setInsertionPoint(ret);
    if (failed(backward.vjp(op, resultGrads, operandGrads))) {
      grad.erase();
      return failure();
    }
    for (auto [operand, operandGrad] :
         llvm::zip(op->getOperands(), operandGrads)) {
      if (!operandGrad || !isVaried(operand))
        continue;
      Value &slot = adjoint[operand];
      slot = slot ? Value(AddOp::create(b, op->getLoc(), slot, operandGrad))
                  : operandGrad;
    }
  }

  // Results: the original ones, then the gradient of every parameter.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<Attribute> names;
  if (auto outputs =
          grad->getAttrOfType<ArrayAttr>(WeftDialect::kOutputsAttrName))
    names.append(outputs.begin(), outputs.end());
  else
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      names.push_back(b.getStringAttr("result" + std::to_string(i)));
  for (BlockArgument arg : grad.getArguments()) {
    auto param = grad.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   WeftDialect::kParamAttrName);
    if (!param || !isFloatTensor(arg))
      continue;
    Value g = adjoint.lookup(arg);
    if (!g)
      g = ConstantOp::create(
          b, grad.getLoc(),
          DenseElementsAttr::get(
              tensorTypeOf(arg), b.getFloatAttr(tensorTypeOf(arg).getElementType(), 0)));
    results.push_back(g);
    names.push_back(b.getStringAttr("grad:" + param.getValue()));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  grad.setType(FunctionType::get(func.getContext(), grad.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  grad.removeResAttrsAttr();
  grad->setAttr(WeftDialect::kOutputsAttrName, b.getArrayAttr(names));
  return grad;
}

namespace {

struct WeftAutodiffPass
    : public weft::impl::WeftAutodiffBase<WeftAutodiffPass> {
  using WeftAutodiffBase::WeftAutodiffBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func) {
      module.emitError() << "autodiff: no function '" << function << "'";
      return signalPassFailure();
    }
    if (failed(buildGradientFunction(func, function + "_grad")))
      signalPassFailure();
  }
};

} // namespace
