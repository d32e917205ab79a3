//===- Gradients.cpp - Each weft op's vector-Jacobian product -------------===//
//
// The GradientOpInterface of every weft op. Each rule is written in weft
// ops, so the backward pass is partitioned and lowered like the forward
// one, and each is checked against finite differences of the reference
// evaluator (unittests/Dialect/AutodiffTest.cpp). The driver that walks a
// function backwards is Transforms/Autodiff.cpp.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/AttentionGradients.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include <cmath>

using namespace mlir;
using namespace weft;

namespace {

/// Builds the adjoints of one op's operands at the op's location: the
/// small vocabulary the rules are written in.
class Adjoints {
public:
  Adjoints(OpBuilder &builder, Operation *op, SmallVectorImpl<Value> &grads)
      : b(builder), loc(op->getLoc()), op(op), grads(grads) {
    grads.assign(op->getNumOperands(), Value());
  }

  OpBuilder &b;
  Location loc;

  Value operand(unsigned i) { return op->getOperand(i); }
  Value result() { return op->getResult(0); }

  /// Sets operand `i`'s adjoint to `grad`, summed down to the operand's
  /// shape where the op broadcast it.
  void set(unsigned i, Value grad) {
    grads[i] = unbroadcast(grad, tensorTypeOf(operand(i)));
  }

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
  Value where(Value condition, Value onTrue, Value onFalse) {
    return WhereOp::create(b, loc, condition, onTrue, onFalse);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (tensorTypeOf(x).getShape() == shape)
      return x;
    return ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, tensorTypeOf(x).getElementType()),
        x);
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
        b, loc, RankedTensorType::get(shape, tensorTypeOf(x).getElementType()),
        x);
  }
  Value castTo(Value x, Type element) {
    if (tensorTypeOf(x).getElementType() == element)
      return x;
    return CastOp::create(
        b, loc, RankedTensorType::get(tensorTypeOf(x).getShape(), element), x);
  }
  /// The shape of a reduction's input with its `axes` kept as size 1.
  SmallVector<int64_t> keptShape(Value input, ArrayRef<int64_t> axes) {
    SmallVector<int64_t> kept(tensorTypeOf(input).getShape());
    for (int64_t axis : axes)
      kept[axis] = 1;
    return kept;
  }

private:
  Operation *op;
  SmallVectorImpl<Value> &grads;
};

/// The rule of an op whose results are never floats: no adjoint reaches
/// it, and its operands get none (a comparison is piecewise constant).
LogicalResult noAdjoints(Operation *op, SmallVectorImpl<Value> &grads) {
  grads.assign(op->getNumOperands(), Value());
  return success();
}

/// The adjoint of an elementwise unary op: g * dy/dx, with dy/dx built
/// from the input x and the result y.
template <typename Fn>
LogicalResult unaryRule(OpBuilder &builder, Operation *op,
                        ArrayRef<Value> resultGrads,
                        SmallVectorImpl<Value> &grads, Fn derivative) {
  Adjoints a(builder, op, grads);
  a.set(0, a.mul(resultGrads[0], derivative(a, a.operand(0), a.result())));
  return success();
}

/// Layer norm (centered) or RMS norm over dims axis..rank-1: the input's
/// gradient and each row's statistics from one weft.norm_grad; the scale's
/// gradient sums g * x^ over the rows, the bias's g.
LogicalResult normRule(OpBuilder &builder, Operation *op, Value g, int64_t axis,
                       double epsilon, bool centered,
                       SmallVectorImpl<Value> &grads) {
  Adjoints a(builder, op, grads);
  Value x = op->getOperand(0), scale = op->getOperand(1);
  RankedTensorType type = tensorTypeOf(x);
  SmallVector<int64_t> rowShape(type.getShape());
  for (int64_t d = axis; d < type.getRank(); ++d)
    rowShape[d] = 1;
  auto stats = type.clone(rowShape);
  // The adjoint of a norm that rounds its result to a narrower type passes
  // through that rounding unchanged; norm_grad widens it as it reads.
  auto normGrad = NormGradOp::create(
      a.b, a.loc, TypeRange{type, stats, stats}, x, scale, g, Value(),
      a.b.getI64IntegerAttr(axis), a.b.getF64FloatAttr(epsilon),
      centered ? a.b.getUnitAttr() : UnitAttr());
  if (tensorTypeOf(g) != type)
    g = CastOp::create(a.b, a.loc, type, g);
  grads[0] = normGrad.getInputGrad();
  SmallVector<int64_t> rows = llvm::to_vector(llvm::seq<int64_t>(0, axis));
  Value centeredX = centered ? a.sub(x, normGrad.getMean()) : x;
  Value normalizedX = a.mul(centeredX, normGrad.getInvStd());
  grads[1] = a.sum(a.mul(g, normalizedX), rows, false);
  if (op->getNumOperands() > 2)
    grads[2] = a.sum(g, rows, false);
  return success();
}

/// A sum (or mean) spreads the adjoint evenly over what it reduced.
LogicalResult sumRule(OpBuilder &builder, Operation *op, Value g,
                      ArrayRef<int64_t> axes, bool mean,
                      SmallVectorImpl<Value> &grads) {
  Adjoints a(builder, op, grads);
  Value input = a.operand(0);
  RankedTensorType in = tensorTypeOf(input);
  int64_t count = 1;
  for (int64_t axis : axes)
    count *= in.getDimSize(axis);
  Value grad =
      a.expandTo(a.reshape(g, a.keptShape(input, axes)), in.getShape());
  if (mean)
    grad = a.div(grad, a.scalarLike(g, count));
  grads[0] = grad;
  return success();
}

/// A maximum (or minimum) passes the adjoint to the elements that attain
/// it, shared evenly between ties (as PyTorch's amax and amin do).
LogicalResult extremumRule(OpBuilder &builder, Operation *op, Value g,
                           ArrayRef<int64_t> axes,
                           SmallVectorImpl<Value> &grads) {
  Adjoints a(builder, op, grads);
  Value x = a.operand(0);
  SmallVector<int64_t> kept = a.keptShape(x, axes);
  Value attains = EqualOp::create(a.b, a.loc, x, a.reshape(a.result(), kept));
  Value ties =
      a.sum(a.castTo(attains, tensorTypeOf(x).getElementType()), axes, true);
  grads[0] =
      a.where(attains, a.div(a.reshape(g, kept), ties), a.scalarLike(x, 0));
  return success();
}

/// A max or min passes the adjoint to the operand it chose, the first on
/// ties.
LogicalResult choiceRule(OpBuilder &builder, Operation *op, Value g,
                         bool greater, SmallVectorImpl<Value> &grads) {
  Adjoints a(builder, op, grads);
  Value first =
      greater
          ? Value(
                GreaterEqualOp::create(a.b, a.loc, a.operand(0), a.operand(1)))
          : Value(LessEqualOp::create(a.b, a.loc, a.operand(0), a.operand(1)));
  Value zero = a.scalarLike(g, 0);
  a.set(0, a.where(first, g, zero));
  a.set(1, a.where(first, zero, g));
  return success();
}

/// The adjoint of a reshape-like op is the adjoint reshaped back.
LogicalResult reshapeRule(OpBuilder &builder, Operation *op, Value g,
                          SmallVectorImpl<Value> &grads) {
  Adjoints a(builder, op, grads);
  grads[0] = a.reshape(g, tensorTypeOf(a.operand(0)).getShape());
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Ops without a float result, and sources
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                        SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult RangeOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                     SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult NotOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                   SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult AndOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                   SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult OrOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                  SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult XorOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                   SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult EqualOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                     SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult LessOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                    SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult LessEqualOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                         SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult GreaterOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                       SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}
LogicalResult GreaterEqualOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                            SmallVectorImpl<Value> &grads) {
  return noAdjoints(*this, grads);
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult ExpOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  return unaryRule(b, *this, resultGrads, grads,
                   [](Adjoints &, Value, Value y) { return y; });
}
LogicalResult LogOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  grads[0] = a.div(resultGrads[0], getInput());
  return success();
}
LogicalResult SqrtOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0];
  grads[0] = a.div(a.mul(g, a.scalarLike(g, 0.5)), getResult());
  return success();
}
LogicalResult RsqrtOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0], y = getResult();
  grads[0] = a.mul(a.mul(g, a.scalarLike(g, -0.5)), a.mul(y, a.mul(y, y)));
  return success();
}
LogicalResult ReciprocalOp::buildAdjoints(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value y = getResult();
  grads[0] = a.neg(a.mul(resultGrads[0], a.mul(y, y)));
  return success();
}
LogicalResult TanhOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  return unaryRule(b, *this, resultGrads, grads,
                   [](Adjoints &a, Value, Value y) {
                     return a.sub(a.scalarLike(y, 1), a.mul(y, y));
                   });
}
LogicalResult SigmoidOp::buildAdjoints(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &grads) {
  return unaryRule(b, *this, resultGrads, grads,
                   [](Adjoints &a, Value, Value y) {
                     return a.mul(y, a.sub(a.scalarLike(y, 1), y));
                   });
}
LogicalResult SiluOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  return unaryRule(b, *this, resultGrads, grads,
                   [](Adjoints &a, Value x, Value) {
                     Value s = SigmoidOp::create(a.b, a.loc, x);
                     Value one = a.scalarLike(x, 1);
                     return a.mul(s, a.add(one, a.mul(x, a.sub(one, s))));
                   });
}
LogicalResult ErfOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  return unaryRule(
      b, *this, resultGrads, grads, [](Adjoints &a, Value x, Value) {
        return a.mul(a.scalarLike(x, 1.1283791670955126),
                     ExpOp::create(a.b, a.loc, a.neg(a.mul(x, x))));
      });
}
LogicalResult SinOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  return unaryRule(
      b, *this, resultGrads, grads,
      [](Adjoints &a, Value x, Value) { return CosOp::create(a.b, a.loc, x); });
}
LogicalResult CosOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  grads[0] = a.neg(a.mul(resultGrads[0], SinOp::create(b, a.loc, getInput())));
  return success();
}
LogicalResult NegOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  grads[0] = a.neg(resultGrads[0]);
  return success();
}
LogicalResult AbsOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0], x = getInput();
  Value positive = GreaterOp::create(b, a.loc, x, a.scalarLike(x, 0));
  grads[0] = a.where(positive, g, a.neg(g));
  return success();
}
LogicalResult ReluOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value x = getInput(), zero = a.scalarLike(x, 0);
  Value positive = GreaterOp::create(b, a.loc, x, zero);
  grads[0] = a.where(positive, resultGrads[0], zero);
  return success();
}
LogicalResult GeluOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  grads[0] = GeluGradOp::create(b, a.loc, resultGrads[0], getInput(),
                                getApproximateAttr());
  return success();
}
/// Float to float converts the adjoint back; from an integer nothing flows.
LogicalResult CastOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  if (isFloatTensor(getInput()))
    grads[0] =
        a.castTo(resultGrads[0], tensorTypeOf(getInput()).getElementType());
  return success();
}

LogicalResult AddOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  a.set(0, resultGrads[0]);
  a.set(1, resultGrads[0]);
  return success();
}
LogicalResult SubOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  a.set(0, resultGrads[0]);
  a.set(1, a.neg(resultGrads[0]));
  return success();
}
LogicalResult MulOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  a.set(0, a.mul(resultGrads[0], getRhs()));
  a.set(1, a.mul(resultGrads[0], getLhs()));
  return success();
}
LogicalResult DivOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0];
  a.set(0, a.div(g, getRhs()));
  a.set(1, a.neg(a.div(a.mul(g, getResult()), getRhs())));
  return success();
}
/// d(a^b)/da = b a^(b-1) = b y / a; d/db = y log(a).
LogicalResult PowOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0], y = getResult(), base = getLhs(), e = getRhs();
  a.set(0, a.mul(g, a.div(a.mul(e, y), base)));
  if (isFloatTensor(e))
    a.set(1, a.mul(g, a.mul(y, LogOp::create(b, a.loc, base))));
  return success();
}
LogicalResult MaxOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  return choiceRule(b, *this, resultGrads[0], /*greater=*/true, grads);
}
LogicalResult MinOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &grads) {
  return choiceRule(b, *this, resultGrads[0], /*greater=*/false, grads);
}
LogicalResult WhereOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0], zero = a.scalarLike(g, 0);
  if (isFloatTensor(getOnTrue()))
    a.set(1, a.where(getCondition(), g, zero));
  if (isFloatTensor(getOnFalse()))
    a.set(2, a.where(getCondition(), zero, g));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0], lhs = getLhs(), rhs = getRhs();
  if (tensorTypeOf(lhs).getRank() < 2 || tensorTypeOf(rhs).getRank() < 2)
    return emitError("autodiff: weft.matmul of a 1-D operand has no "
                     "gradient rule");
  a.set(0, MatmulOp::create(b, a.loc, g, a.transposeLast2(rhs)));
  a.set(1, MatmulOp::create(b, a.loc, a.transposeLast2(lhs), g));
  return success();
}

LogicalResult LinearOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0], x = getInput(), w = getWeight();
  bool transposed = getTransposeWeight();
  // dx = g W^T (a linear with the weight's layout flipped).
  grads[0] = LinearOp::create(b, a.loc, g, w, Value(),
                              transposed ? UnitAttr() : b.getUnitAttr());
  // dW: x^T g over every leading dim.
  int64_t k = tensorTypeOf(x).getShape().back();
  int64_t n = tensorTypeOf(g).getShape().back();
  int64_t rows = tensorTypeOf(x).getNumElements() / k;
  Value x2 = a.reshape(x, {rows, k}), g2 = a.reshape(g, {rows, n});
  grads[1] = transposed ? MatmulOp::create(b, a.loc, a.transposeLast2(g2), x2)
                        : MatmulOp::create(b, a.loc, a.transposeLast2(x2), g2);
  if (getBias())
    grads[2] = a.sum(g2, {0}, false);
  return success();
}

LogicalResult ConvOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                    SmallVectorImpl<Value> &) {
  return emitError("autodiff: weft.conv has no gradient rule: its input's "
                   "adjoint is a transposed convolution, which weft has no "
                   "op for");
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildAdjoints(OpBuilder &b,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &grads) {
  return sumRule(b, *this, resultGrads[0], getAxes(), /*mean=*/false, grads);
}
LogicalResult ReduceMeanOp::buildAdjoints(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &grads) {
  return sumRule(b, *this, resultGrads[0], getAxes(), /*mean=*/true, grads);
}
LogicalResult ReduceMaxOp::buildAdjoints(OpBuilder &b,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &grads) {
  return extremumRule(b, *this, resultGrads[0], getAxes(), grads);
}
LogicalResult ReduceMinOp::buildAdjoints(OpBuilder &b,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &grads) {
  return extremumRule(b, *this, resultGrads[0], getAxes(), grads);
}
/// d y / d x_i is the product of the other elements: y / x_i where x_i is
/// not 0; where it is, the product of the nonzero others if x_i is the
/// line's only zero, else 0.
LogicalResult ReduceProdOp::buildAdjoints(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value x = getInput();
  Type element = tensorTypeOf(x).getElementType();
  SmallVector<int64_t> kept = a.keptShape(x, getAxes());
  Value isZero = EqualOp::create(b, a.loc, x, a.scalarLike(x, 0));
  Value nonzero = a.where(isZero, a.scalarLike(x, 1), x);
  Value nonzeroProduct =
      ReduceProdOp::create(b, a.loc, nonzero, getAxesAttr(), b.getUnitAttr());
  Value zeros = a.sum(a.castTo(isZero, element), getAxes(), true);
  Value onlyZero = EqualOp::create(b, a.loc, zeros, a.scalarLike(x, 1));
  Value atZero = a.where(onlyZero, nonzeroProduct, a.scalarLike(x, 0));
  Value others =
      a.where(isZero, atZero, a.div(a.reshape(getResult(), kept), nonzero));
  grads[0] = a.mul(others, a.reshape(resultGrads[0], kept));
  return success();
}

LogicalResult SoftmaxOp::buildAdjoints(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0], y = getResult();
  int64_t axis = static_cast<int64_t>(getAxis());
  grads[0] = a.mul(y, a.sub(g, a.sum(a.mul(g, y), {axis}, true)));
  return success();
}
LogicalResult LogSoftmaxOp::buildAdjoints(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Value g = resultGrads[0];
  int64_t axis = static_cast<int64_t>(getAxis());
  grads[0] = a.sub(
      g, a.mul(ExpOp::create(b, a.loc, getResult()), a.sum(g, {axis}, true)));
  return success();
}

LogicalResult LayerNormOp::buildAdjoints(OpBuilder &b,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &grads) {
  return normRule(b, *this, resultGrads[0], static_cast<int64_t>(getAxis()),
                  getEpsilon().convertToDouble(), /*centered=*/true, grads);
}
LogicalResult RmsNormOp::buildAdjoints(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &grads) {
  return normRule(b, *this, resultGrads[0], static_cast<int64_t>(getAxis()),
                  getEpsilon().convertToDouble(), /*centered=*/false, grads);
}

/// Attention recomputes its probabilities: P = softmax(S), S = scale q k^T
/// (+ mask), then dV = P^T dO, dS = P (dP - rowsum(dP P)) with dP = dO V^T,
/// dQ = scale dS K, dK = scale dS^T Q. Grouped KV heads sum over groups.
AttentionGradients weft::buildAttentionGradients(OpBuilder &b, Operation *at,
                                                 Value q, Value k, Value v,
                                                 Value mask, Value g,
                                                 bool causal, double scale) {
  SmallVector<Value> unused;
  Adjoints a(b, at, unused);
  Location loc = a.loc;
  RankedTensorType qt = tensorTypeOf(q), kt = tensorTypeOf(k),
                   vt = tensorTypeOf(v);
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
    Value expanded = a.expandTo(a.reshape(x, {batch, kvHeads, 1, t, last}),
                                {batch, kvHeads, group, t, last});
    return a.reshape(expanded, {batch, heads, t, last});
  };
  auto perKvHead = [&](Value x, int64_t last) {
    if (group == 1)
      return x;
    return a.sum(a.reshape(x, {batch, kvHeads, group, t, last}), {2}, false);
  };
  Value kq = perQueryHead(k, d), vq = perQueryHead(v, dv);
  Value scores = a.mul(MatmulOp::create(b, loc, q, a.transposeLast2(kq)),
                       a.scalar(element, scale));
  Value negInf = a.scalar(element, -INFINITY);
  if (mask) {
    if (tensorTypeOf(mask).getElementType().isInteger(1))
      scores = a.where(mask, scores, negInf);
    else
      scores = a.add(scores, mask);
  }
  if (causal) {
    // Query i sees keys j <= i + (t - s).
    auto index = [&](int64_t n, ArrayRef<int64_t> shape) {
      auto type = RankedTensorType::get({n}, b.getI64Type());
      return a.reshape(RangeOp::create(b, loc, type, b.getI64IntegerAttr(0),
                                       b.getI64IntegerAttr(1)),
                       shape);
    };
    Value i = index(s, {s, 1}), j = index(t, {1, t});
    Value visible = LessEqualOp::create(
        b, loc, j, a.add(i, a.scalar(b.getI64Type(), t - s)));
    scores = a.where(visible, scores, negInf);
  }
  Value p = SoftmaxOp::create(b, loc, scores, b.getI64IntegerAttr(3));
  Value dvq = MatmulOp::create(b, loc, a.transposeLast2(p), g);
  Value dp = MatmulOp::create(b, loc, g, a.transposeLast2(vq));
  Value ds = a.mul(p, a.sub(dp, a.sum(a.mul(dp, p), {3}, true)));
  Value dsScaled = a.mul(ds, a.scalar(element, scale));
  AttentionGradients grads;
  grads.query = MatmulOp::create(b, loc, dsScaled, kq);
  grads.key =
      perKvHead(MatmulOp::create(b, loc, a.transposeLast2(dsScaled), q), d);
  grads.value = perKvHead(dvq, dv);
  grads.scores = ds;
  return grads;
}

LogicalResult AttentionOp::buildAdjoints(OpBuilder &b,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &grads) {
  Value mask = getMask();
  grads.assign(getNumOperands(), Value());
  // Marked only where the mask needs no gradient (weft-derive-train-step).
  if ((*this)->hasAttr(WeftDialect::kFusedBackwardAttrName)) {
    auto fused = AttentionGradOp::create(
        b, getLoc(), getQuery(), getKey(), getValue(), getResult(),
        resultGrads[0], mask, /*log_sum_exp=*/Value(), getCausal(),
        getScaleAttr());
    grads[0] = fused.getQueryGrad();
    grads[1] = fused.getKeyGrad();
    grads[2] = fused.getValueGrad();
    return success();
  }
  AttentionGradients adjoints =
      buildAttentionGradients(b, *this, getQuery(), getKey(), getValue(), mask,
                              resultGrads[0], getCausal(), getEffectiveScale());
  grads[0] = adjoints.query;
  grads[1] = adjoints.key;
  grads[2] = adjoints.value;
  if (mask && !tensorTypeOf(mask).getElementType().isInteger(1)) {
    SmallVector<Value> unused;
    grads[3] = Adjoints(b, *this, unused)
                   .unbroadcast(adjoints.scores, tensorTypeOf(mask));
  }
  return success();
}

LogicalResult
SoftmaxCrossEntropyOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  RankedTensorType logits = getLogits().getType();
  if (resultGrads[0])
    grads[0] = SoftmaxCrossEntropyGradOp::create(
        b, a.loc, logits, getLogits(), getLabels(), getLogSumExp(),
        resultGrads[0], getIgnoreIndexAttr());
  // The log-sum-exp's own adjoint (the training step never reads it):
  // d lse / d logits is the softmax.
  if (resultGrads[1]) {
    int64_t last = logits.getRank() - 1;
    SmallVector<int64_t> kept(logits.getShape());
    kept.back() = 1;
    // An f32 log-sum-exp of narrow logits spreads in the logits' type.
    Value lseGrad = resultGrads[1];
    auto lseGradType = cast<RankedTensorType>(lseGrad.getType());
    if (lseGradType.getElementType() != logits.getElementType())
      lseGrad = CastOp::create(
          b, a.loc, lseGradType.clone(logits.getElementType()), lseGrad);
    Value spread = a.mul(
        SoftmaxOp::create(b, a.loc, getLogits(), b.getI64IntegerAttr(last)),
        a.reshape(lseGrad, kept));
    grads[0] = grads[0] ? a.add(grads[0], spread) : spread;
  }
  return success();
}

LogicalResult NormGradOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                        SmallVectorImpl<Value> &) {
  return emitError("autodiff: weft.norm_grad has no gradient rule (no second "
                   "derivative of a norm)");
}

LogicalResult
SoftmaxCrossEntropyGradOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                         SmallVectorImpl<Value> &) {
  return emitError("autodiff: weft.softmax_cross_entropy_grad has no gradient "
                   "rule (no second derivative of the cross-entropy)");
}

LogicalResult GeluGradOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                        SmallVectorImpl<Value> &) {
  return emitError("autodiff: weft.gelu_grad has no gradient rule (no second "
                   "derivative of GELU)");
}

LogicalResult AttentionGradOp::buildAdjoints(OpBuilder &, ArrayRef<Value>,
                                             SmallVectorImpl<Value> &) {
  return emitError("autodiff: weft.attention_grad has no gradient rule (no "
                   "second derivative of attention)");
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// The table's adjoint adds each output row into the row it was read from:
/// a scatter-add of the adjoint at the indices. On axis k the dims before
/// the axis are a batch of tables, stacked into one: table i's row r is row
/// i * rows + r.
LogicalResult GatherOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Location loc = a.loc;
  RankedTensorType table = tensorTypeOf(getData());
  int64_t axis = getAxis();
  int64_t rows = table.getDimSize(axis);
  int64_t batch = 1;
  for (int64_t dim : table.getShape().take_front(axis))
    batch *= dim;
  int64_t width = table.getNumElements() / (batch * rows);
  int64_t lookups = tensorTypeOf(getIndices()).getNumElements();
  Type indexType = tensorTypeOf(getIndices()).getElementType();
  Value ids = a.reshape(getIndices(), {lookups});
  // Negative indices count from the end, as in the forward gather.
  ids = a.where(LessOp::create(b, loc, ids, a.scalar(indexType, 0)),
                a.add(ids, a.scalar(indexType, rows)), ids);
  if (batch != 1) {
    Value firstRows = a.reshape(
        RangeOp::create(b, loc, RankedTensorType::get({batch}, indexType),
                        b.getIntegerAttr(indexType, 0),
                        b.getIntegerAttr(indexType, rows)),
        {batch, 1});
    ids = a.reshape(a.add(a.reshape(ids, {1, lookups}), firstRows),
                    {batch * lookups});
  }
  Value updates = a.reshape(resultGrads[0], {batch * lookups, width});
  Value summed = ScatterAddOp::create(
      b, loc,
      RankedTensorType::get({batch * rows, width}, table.getElementType()),
      updates, ids);
  grads[0] = a.reshape(summed, table.getShape());
  return success();
}

/// The updates' adjoint reads the result's adjoint back at the indices
/// (zero for an index outside the rows, which added nothing).
LogicalResult ScatterAddOp::buildAdjoints(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  Location loc = a.loc;
  Value ids = getIndices();
  Type indexType = tensorTypeOf(ids).getElementType();
  int64_t rows = getType().getDimSize(0);
  Value atLeastZero =
      GreaterEqualOp::create(b, loc, ids, a.scalar(indexType, 0));
  Value belowRows = LessOp::create(b, loc, ids, a.scalar(indexType, rows));
  Value inRange = AndOp::create(b, loc, atLeastZero, belowRows);
  Value safe = a.where(inRange, ids, a.scalar(indexType, 0));
  Value picked =
      GatherOp::create(b, loc, resultGrads[0], safe, b.getI64IntegerAttr(0));
  SmallVector<int64_t> maskShape(tensorTypeOf(ids).getShape());
  maskShape.append(getType().getRank() - 1, 1);
  grads[0] =
      a.where(a.reshape(inRange, maskShape), picked, a.scalarLike(picked, 0));
  return success();
}

LogicalResult ReshapeOp::buildAdjoints(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &grads) {
  return reshapeRule(b, *this, resultGrads[0], grads);
}
LogicalResult SqueezeOp::buildAdjoints(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &grads) {
  return reshapeRule(b, *this, resultGrads[0], grads);
}
LogicalResult UnsqueezeOp::buildAdjoints(OpBuilder &b,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &grads) {
  return reshapeRule(b, *this, resultGrads[0], grads);
}
LogicalResult ExpandOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  a.set(0, resultGrads[0]);
  return success();
}

LogicalResult TransposeOp::buildAdjoints(OpBuilder &b,
                                         ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  SmallVector<int64_t> inverse(getPermutation().size());
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    inverse[p] = i;
  grads[0] = a.transpose(resultGrads[0], inverse);
  return success();
}

LogicalResult SplitOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  SmallVector<Value> parts;
  for (auto [i, result] : llvm::enumerate(getResults()))
    parts.push_back(resultGrads[i] ? resultGrads[i]
                                   : a.zerosLike(tensorTypeOf(result)));
  grads[0] = ConcatOp::create(b, a.loc, parts, getAxisAttr());
  return success();
}

LogicalResult ConcatOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  int64_t axis = static_cast<int64_t>(getAxis());
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    RankedTensorType type = tensorTypeOf(input);
    SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
    offsets[axis] = offset;
    offset += type.getDimSize(axis);
    if (isFloatTensor(input))
      grads[i] = SliceOp::create(b, a.loc, resultGrads[0], offsets,
                                 type.getShape(), strides);
  }
  return success();
}

/// Zeros around the slice, dim by dim. A stride s > 1 (GPT-J's x[..., ::2])
/// first spreads the adjoint: s - 1 zeros after each element; a negative
/// one reverses it first.
LogicalResult SliceOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  RankedTensorType in = tensorTypeOf(getInput());
  Type element = in.getElementType();
  Value grad = resultGrads[0];
  auto zeros = [&](ArrayRef<int64_t> shape) {
    return a.zerosLike(RankedTensorType::get(shape, element));
  };
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t stride = getStrides()[d];
    SmallVector<int64_t> shape(tensorTypeOf(grad).getShape());
    int64_t count = shape[d];
    int64_t covered = count;
    int64_t before = getOffsets()[d];
    if (stride < 0 && count > 0) {
      // Walking backwards: the reversed adjoint, read forwards from the
      // last element taken.
      SmallVector<int64_t> offsets(shape.size(), 0), steps(shape.size(), 1);
      offsets[d] = count - 1;
      steps[d] = -1;
      grad = SliceOp::create(b, a.loc, grad, offsets, shape, steps);
      stride = -stride;
      before -= (count - 1) * stride;
    }
    if (stride > 1 && count > 0) {
      // [..., c, ...] -> [..., c, 1, ...] + zeros [..., c, s - 1, ...]
      // -> [..., c * s, ...], cut where the input ends.
      SmallVector<int64_t> split(shape);
      split.insert(split.begin() + d + 1, 1);
      SmallVector<int64_t> padding(split);
      padding[d + 1] = stride - 1;
      Value spread = ConcatOp::create(
          b, a.loc, ValueRange{a.reshape(grad, split), zeros(padding)},
          b.getI64IntegerAttr(d + 1));
      shape[d] = count * stride;
      grad = a.reshape(spread, shape);
      covered = std::min(count * stride, in.getDimSize(d) - before);
      if (covered < shape[d]) {
        SmallVector<int64_t> offsets(shape.size(), 0), ones(shape.size(), 1);
        shape[d] = covered;
        grad = SliceOp::create(b, a.loc, grad, offsets, shape, ones);
      }
    }
    int64_t after = in.getDimSize(d) - before - covered;
    SmallVector<Value> pieces;
    if (before) {
      shape[d] = before;
      pieces.push_back(zeros(shape));
    }
    pieces.push_back(grad);
    if (after) {
      shape[d] = after;
      pieces.push_back(zeros(shape));
    }
    if (pieces.size() > 1)
      grad = ConcatOp::create(b, a.loc, pieces, b.getI64IntegerAttr(d));
  }
  grads[0] = grad;
  return success();
}

/// The kept triangle of the adjoint.
LogicalResult TriluOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &grads) {
  Adjoints a(b, *this, grads);
  grads[0] = TriluOp::create(b, a.loc, resultGrads[0].getType(), resultGrads[0],
                             getDiagonalAttr(), getUpperAttr());
  return success();
}
