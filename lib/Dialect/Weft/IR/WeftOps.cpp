//===- WeftOps.cpp - Weft op shape rules, verifiers and folders -----------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Dialect/Weft/IR/HostTensor.h"
#include "weft/Dialect/Weft/IR/WeftBuilders.h"
#include "weft/runtime/Contract.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace mlir;
using namespace weft;

//===----------------------------------------------------------------------===//
// Shared shape helpers
//===----------------------------------------------------------------------===//

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += ", ";
    s += ShapedType::isDynamic(d) ? "?" : std::to_string(d);
  }
  return s + "]";
}

FailureOr<SmallVector<int64_t>> weft::broadcastShapes(ArrayRef<int64_t> lhs,
                                                      ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t b = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    int64_t r;
    if (a == 1)
      r = b;
    else if (b == 1)
      r = a;
    else if (ShapedType::isDynamic(a))
      r = b;
    else if (ShapedType::isDynamic(b) || a == b)
      r = a;
    else
      return failure();
    result[rank - 1 - i] = r;
  }
  return result;
}

LogicalResult weft::inferBroadcastResult(std::optional<Location> loc,
                                         StringRef opName, ValueRange operands,
                                         Type elementType,
                                         SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  for (auto [i, operand] : llvm::enumerate(operands)) {
    auto type = llvm::dyn_cast<RankedTensorType>(operand.getType());
    if (!type)
      return emitOptionalError(loc, "'", opName, "' operand #", i,
                               " must be a ranked tensor");
    auto merged = broadcastShapes(shape, type.getShape());
    if (failed(merged))
      return emitOptionalError(loc, "'", opName, "' operand #", i, " shape ",
                               shapeStr(type.getShape()),
                               " does not broadcast with ", shapeStr(shape),
                               " (numpy rules)");
    shape = *merged;
  }
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

/// Checks that `axes` are in [0, rank) and strictly increasing.
static LogicalResult verifyAxes(std::optional<Location> loc, StringRef opName,
                                StringRef what, ArrayRef<int64_t> axes,
                                int64_t rank) {
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (axis < 0 || axis >= rank)
      return emitOptionalError(loc, "'", opName, "' ", what, " ", axis,
                               " is out of range [0, ", rank, ")");
    if (i > 0 && axes[i - 1] >= axis)
      return emitOptionalError(loc, "'", opName, "' ", what,
                               " must be strictly increasing");
  }
  return success();
}

LogicalResult weft::inferReductionResult(std::optional<Location> loc,
                                         StringRef opName, Type input,
                                         ArrayRef<int64_t> axes, bool keepdims,
                                         SmallVectorImpl<Type> &inferred) {
  auto type = llvm::cast<RankedTensorType>(input);
  if (axes.empty())
    return emitOptionalError(loc, "'", opName, "' needs at least one axis");
  if (failed(verifyAxes(loc, opName, "axis", axes, type.getRank())))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(type.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

static RankedTensorType rankedType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

/// True if two static dims differ (dynamic dims agree with anything).
static bool clash(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

//===----------------------------------------------------------------------===//
// Constant folding helpers
//===----------------------------------------------------------------------===//

/// Folds an elementwise op whose operands are all constants.
static OpFoldResult
foldElementwise(ArrayRef<Attribute> operands, Type resultType,
                const std::function<double(ArrayRef<double>)> &floatFn,
                const std::function<int64_t(ArrayRef<int64_t>)> &intFn) {
  auto type = llvm::dyn_cast<RankedTensorType>(resultType);
  if (!type || !type.hasStaticShape() ||
      type.getNumElements() > kMaxFoldedElements)
    return {};
  SmallVector<HostTensor> hosts;
  for (Attribute attr : operands) {
    auto host = HostTensor::fromAttr(attr);
    if (!host)
      return {};
    hosts.push_back(std::move(*host));
  }
  SmallVector<const HostTensor *> ptrs;
  for (const HostTensor &h : hosts)
    ptrs.push_back(&h);
  return mapBroadcast(ptrs, type.getShape(), type.getElementType(), floatFn,
                      intFn)
      .toAttr();
}

/// True if `attr` is a splat constant equal to `value`.
static bool isSplatOf(Attribute attr, double value) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  if (llvm::isa<FloatType>(dense.getElementType()))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  return static_cast<double>(dense.getSplatValue<APInt>().getSExtValue()) ==
         value;
}

//===----------------------------------------------------------------------===//
// ConstantOp, RangeOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOp::verify() {
  auto type = llvm::dyn_cast<RankedTensorType>(getValue().getType());
  if (!type || !type.hasStaticShape())
    return emitOpError("value must have a static ranked tensor type");
  return success();
}

LogicalResult RangeOp::verify() {
  Type elementType = getType().getElementType();
  if (getStart().getType() != elementType || getStep().getType() != elementType)
    return emitOpError("start and step must have the result element type ")
           << elementType;
  if (getType().getRank() != 1)
    return emitOpError("result must be 1-D");
  return success();
}

OpFoldResult RangeOp::fold(FoldAdaptor) {
  RankedTensorType type = getType();
  if (!type.hasStaticShape() || type.getNumElements() > 65536)
    return {};
  HostTensor t = HostTensor::zeros(type.getShape(), type.getElementType());
  auto scalar = [](Attribute a) {
    if (auto f = llvm::dyn_cast<FloatAttr>(a))
      return f.getValueAsDouble();
    return static_cast<double>(llvm::cast<IntegerAttr>(a).getInt());
  };
  for (int64_t i = 0; i < t.size(); ++i) {
    if (t.isFloat())
      t.floats[i] = scalar(getStart()) + i * scalar(getStep());
    else
      t.ints[i] = llvm::cast<IntegerAttr>(getStart()).getInt() +
                  i * llvm::cast<IntegerAttr>(getStep()).getInt();
  }
  return t.toAttr();
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

/// GELU's forms: PyTorch's `approximate` names.
static LogicalResult verifyGeluForm(Operation *op, StringRef approximate) {
  if (approximate != "none" && approximate != "tanh")
    return op->emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << approximate << "\"";
  return success();
}

LogicalResult GeluOp::verify() {
  return verifyGeluForm(*this, getApproximate());
}
LogicalResult GeluGradOp::verify() {
  return verifyGeluForm(*this, getApproximate());
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<double> x) { return -x[0]; },
      [](ArrayRef<int64_t> x) { return -x[0]; });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto host = HostTensor::fromAttr(adaptor.getInput());
  if (!host)
    return {};
  for (int64_t i = 0; i < host->size(); ++i)
    if (host->isFloat() && !std::isfinite(host->floats[i]) &&
        !llvm::isa<FloatType>(getType().getElementType()))
      return {};
  return castTo(*host, getType().getElementType()).toAttr();
}

// Integer folds wrap around, as ONNX's (and NumPy's) integer arithmetic
// does, where C++'s signed overflow would be undefined.
static int64_t wrappingAdd(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) + uint64_t(b));
}
static int64_t wrappingSub(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) - uint64_t(b));
}
static int64_t wrappingMul(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) * uint64_t(b));
}

static int64_t intDivTowardZero(int64_t a, int64_t b) {
  if (b == -1)
    return wrappingSub(0, a);
  return b == 0 ? 0 : a / b;
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0) && getLhs().getType() == getType())
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 0) && getRhs().getType() == getType())
    return getRhs();
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<double> x) { return x[0] + x[1]; },
      [](ArrayRef<int64_t> x) { return wrappingAdd(x[0], x[1]); });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0) && getLhs().getType() == getType())
    return getLhs();
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<double> x) { return x[0] - x[1]; },
      [](ArrayRef<int64_t> x) { return wrappingSub(x[0], x[1]); });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1) && getLhs().getType() == getType())
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 1) && getRhs().getType() == getType())
    return getRhs();
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<double> x) { return x[0] * x[1]; },
      [](ArrayRef<int64_t> x) { return wrappingMul(x[0], x[1]); });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1) && getLhs().getType() == getType())
    return getLhs();
  // Integer division by zero is undefined: leave it to run time.
  if (auto rhs = HostTensor::fromAttr(adaptor.getRhs()))
    if (!rhs->isFloat() && llvm::is_contained(rhs->ints, 0))
      return {};
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<double> x) { return x[0] / x[1]; },
      [](ArrayRef<int64_t> x) { return intDivTowardZero(x[0], x[1]); });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  // The selected values lead: mapBroadcast computes in the first operand's
  // domain, and the condition is an integer.
  return foldElementwise(
      {adaptor.getOnTrue(), adaptor.getOnFalse(), adaptor.getCondition()},
      getType(), [](ArrayRef<double> x) { return x[2] != 0 ? x[0] : x[1]; },
      [](ArrayRef<int64_t> x) { return x[2] != 0 ? x[0] : x[1]; });
}

#define WEFT_FOLD_FLOAT_UNARY(OP, EXPR)                                        \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldElementwise(                                                    \
        adaptor.getOperands(), getType(),                                      \
        [](ArrayRef<double> v) {                                               \
          double x = v[0];                                                     \
          return EXPR;                                                         \
        },                                                                     \
        [](ArrayRef<int64_t> v) { return v[0]; });                             \
  }
WEFT_FOLD_FLOAT_UNARY(SqrtOp, std::sqrt(x))
WEFT_FOLD_FLOAT_UNARY(RsqrtOp, 1.0 / std::sqrt(x))
WEFT_FOLD_FLOAT_UNARY(ExpOp, std::exp(x))
WEFT_FOLD_FLOAT_UNARY(LogOp, std::log(x))
WEFT_FOLD_FLOAT_UNARY(TanhOp, std::tanh(x))
WEFT_FOLD_FLOAT_UNARY(ErfOp, std::erf(x))
WEFT_FOLD_FLOAT_UNARY(SigmoidOp, 1.0 / (1.0 + std::exp(-x)))
WEFT_FOLD_FLOAT_UNARY(SiluOp, x / (1.0 + std::exp(-x)))
WEFT_FOLD_FLOAT_UNARY(ReciprocalOp, 1.0 / x)
WEFT_FOLD_FLOAT_UNARY(SinOp, std::sin(x))
WEFT_FOLD_FLOAT_UNARY(CosOp, std::cos(x))
#undef WEFT_FOLD_FLOAT_UNARY

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(), [](ArrayRef<double> x) { return 0.0; },
      [](ArrayRef<int64_t> x) -> int64_t { return x[0] == 0; });
}

/// Folds a binary op computed the same way on floats and integers.
#define WEFT_FOLD_BINARY(OP, EXPR)                                             \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldElementwise(                                                    \
        adaptor.getOperands(), getType(),                                      \
        [](ArrayRef<double> v) -> double {                                     \
          auto a = v[0], b = v[1];                                             \
          return EXPR;                                                         \
        },                                                                     \
        [](ArrayRef<int64_t> v) -> int64_t {                                   \
          auto a = v[0], b = v[1];                                             \
          return EXPR;                                                         \
        });                                                                    \
  }
WEFT_FOLD_BINARY(MaxOp, std::max(a, b))
WEFT_FOLD_BINARY(MinOp, std::min(a, b))
WEFT_FOLD_BINARY(AndOp, (a != 0) && (b != 0))
WEFT_FOLD_BINARY(OrOp, (a != 0) || (b != 0))
WEFT_FOLD_BINARY(XorOp, (a != 0) != (b != 0))
WEFT_FOLD_BINARY(EqualOp, a == b)
WEFT_FOLD_BINARY(LessOp, a < b)
WEFT_FOLD_BINARY(LessEqualOp, a <= b)
WEFT_FOLD_BINARY(GreaterOp, a > b)
WEFT_FOLD_BINARY(GreaterEqualOp, a >= b)
#undef WEFT_FOLD_BINARY

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<double> x) { return std::pow(x[0], x[1]); },
      [](ArrayRef<int64_t> x) { return x[0]; });
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Folds a reduction of a constant.
static OpFoldResult foldReduction(Attribute input, ArrayRef<int64_t> axes,
                                  bool keepdims, ReduceKind kind) {
  std::optional<HostTensor> host = HostTensor::fromAttr(input);
  if (!host)
    return {};
  return reduce(*host, axes, keepdims, kind).toAttr();
}

OpFoldResult ReduceSumOp::fold(FoldAdaptor adaptor) {
  return foldReduction(adaptor.getInput(), getAxes(), getKeepdims(),
                       ReduceKind::Sum);
}
OpFoldResult ReduceMeanOp::fold(FoldAdaptor adaptor) {
  return foldReduction(adaptor.getInput(), getAxes(), getKeepdims(),
                       ReduceKind::Mean);
}
OpFoldResult ReduceMaxOp::fold(FoldAdaptor adaptor) {
  return foldReduction(adaptor.getInput(), getAxes(), getKeepdims(),
                       ReduceKind::Max);
}
OpFoldResult ReduceMinOp::fold(FoldAdaptor adaptor) {
  return foldReduction(adaptor.getInput(), getAxes(), getKeepdims(),
                       ReduceKind::Min);
}
OpFoldResult ReduceProdOp::fold(FoldAdaptor adaptor) {
  return foldReduction(adaptor.getInput(), getAxes(), getKeepdims(),
                       ReduceKind::Prod);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = rankedType(adaptor.getLhs());
  auto rhs = rankedType(adaptor.getRhs());
  if (lhs.getRank() == 0 || rhs.getRank() == 0)
    return emitOptionalError(loc, "'weft.matmul' operands must have rank >= 1");
  SmallVector<int64_t> l(lhs.getShape()), r(rhs.getShape());
  bool lhsVector = l.size() == 1, rhsVector = r.size() == 1;
  if (lhsVector)
    l.insert(l.begin(), 1);
  if (rhsVector)
    r.push_back(1);
  int64_t k1 = l.back(), k2 = r[r.size() - 2];
  if (clash(k1, k2))
    return emitOptionalError(
        loc, "'weft.matmul' contraction dims differ: lhs ", shapeStr(l),
        " has K = ", k1, " but rhs ", shapeStr(r), " has K = ", k2);
  auto batch = broadcastShapes(ArrayRef<int64_t>(l).drop_back(2),
                               ArrayRef<int64_t>(r).drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "'weft.matmul' batch dims of ", shapeStr(l),
                             " and ", shapeStr(r), " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  if (!lhsVector)
    shape.push_back(l[l.size() - 2]);
  if (!rhsVector)
    shape.push_back(r.back());
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

namespace {
/// True for a weight: a function argument or a constant, possibly cast.
bool isWeight(Value value) {
  if (auto cast = value.getDefiningOp<CastOp>())
    value = cast.getInput();
  return llvm::isa<BlockArgument>(value) || value.getDefiningOp<ConstantOp>();
}

/// matmul(x, w) by a 2-D weight w -> linear(x, w), and matmul(x,
/// transpose(w)) -> linear(x, w) {transpose_weight}: a projection is a
/// linear whether or not it has a bias (exporters emit bias-free ones as
/// MatMul by a folded, transposed initializer), and the transposed weight
/// (a tied LM head) is never materialized. Products of activations (the
/// adjoints autodiff builds) stay matmuls.
struct MatmulByWeightIsLinear : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (rankedType(op.getRhs()).getRank() != 2 ||
        rankedType(op.getLhs()).getRank() < 2 ||
        !llvm::isa<FloatType>(op.getType().getElementType()))
      return failure();
    Value weight = op.getRhs();
    auto transpose = weight.getDefiningOp<TransposeOp>();
    if (transpose)
      weight = transpose.getInput();
    else if (!isWeight(weight))
      return failure();
    rewriter.replaceOpWithNewOp<LinearOp>(
        op, op.getType(), op.getLhs(), weight, Value(),
        transpose ? rewriter.getUnitAttr() : UnitAttr());
    return success();
  }
};
} // namespace

namespace {
/// matmul(x, w) + b, or linear(x, w) + b, with a 2-D w and a bias of one
/// value per output feature -> linear(x, w, b): the bias initializes the
/// GEMM's output instead of costing a pass of its own.
struct AddBiasToLinear : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (auto [product, bias] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
      if (!product.hasOneUse() || product.getType() != add.getType() ||
          add.getType().getRank() == 0)
        continue;
      auto biasType = rankedType(bias);
      int64_t n = add.getType().getShape().back();
      // One value per feature: [N], or [1, ..., 1, N].
      if (biasType.getRank() == 0 || biasType.getShape().back() != n ||
          llvm::any_of(biasType.getShape().drop_back(),
                       [](int64_t d) { return d != 1; }))
        continue;
      Value input, weight;
      bool transposed = false;
      if (auto matmul = product.getDefiningOp<MatmulOp>()) {
        if (rankedType(matmul.getRhs()).getRank() != 2 ||
            rankedType(matmul.getLhs()).getRank() < 2)
          continue;
        input = matmul.getLhs();
        weight = matmul.getRhs();
      } else if (auto linear = product.getDefiningOp<LinearOp>()) {
        if (linear.getBias())
          continue;
        input = linear.getInput();
        weight = linear.getWeight();
        transposed = linear.getTransposeWeight();
      } else {
        continue;
      }
      if (!llvm::isa<FloatType>(add.getType().getElementType()))
        continue;
      Value vector = bias;
      if (biasType.getRank() != 1)
        vector = ReshapeOp::create(rewriter, add.getLoc(),
                                   RankedTensorType::get({n}, biasType.getElementType()),
                                   bias);
      rewriter.replaceOpWithNewOp<LinearOp>(
          add, add.getType(), input, weight, vector,
          transposed ? rewriter.getUnitAttr() : UnitAttr());
      return success();
    }
    return failure();
  }
};
} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<AddBiasToLinear>(context);
}

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<MatmulByWeightIsLinear>(context);
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = rankedType(adaptor.getInput());
  auto weight = rankedType(adaptor.getWeight());
  if (input.getRank() < 1)
    return emitOptionalError(loc, "'weft.linear' input must have rank >= 1");
  if (weight.getRank() != 2)
    return emitOptionalError(loc, "'weft.linear' weight must be 2-D, got ",
                             shapeStr(weight.getShape()));
  bool transposed = adaptor.getTransposeWeight();
  int64_t k = weight.getDimSize(transposed ? 1 : 0);
  int64_t n = weight.getDimSize(transposed ? 0 : 1);
  if (clash(input.getShape().back(), k))
    return emitOptionalError(loc, "'weft.linear' input's last dim ",
                             input.getShape().back(), " != weight's K ", k);
  if (Value bias = adaptor.getBias()) {
    auto biasType = rankedType(bias);
    if (biasType.getRank() != 1 || clash(biasType.getDimSize(0), n))
      return emitOptionalError(loc, "'weft.linear' bias must be [", n,
                               "], got ", shapeStr(biasType.getShape()));
  }
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = n;
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto input = rankedType(adaptor.getInput());
  auto weight = rankedType(adaptor.getWeight());
  int64_t spatial = input.getRank() - 2;
  if (spatial < 1 || weight.getRank() != input.getRank())
    return emitOptionalError(loc, "'weft.conv' needs input [N, C, D...] and "
                                  "weight [M, C/group, K...] of equal rank");
  if (static_cast<int64_t>(adaptor.getStrides().size()) != spatial ||
      static_cast<int64_t>(adaptor.getDilations().size()) != spatial ||
      static_cast<int64_t>(adaptor.getPads().size()) != 2 * spatial)
    return emitOptionalError(loc, "'weft.conv' needs ", spatial,
                             " strides and dilations and ", 2 * spatial,
                             " pads");
  // The parser infers types before it fills in default-valued properties.
  int64_t group = adaptor.getGroupAttr() ? adaptor.getGroupAttr().getInt() : 1;
  int64_t channels = ShapedType::kDynamic;
  if (group < 1 || (!ShapedType::isDynamic(weight.getDimSize(1)) &&
                    llvm::MulOverflow(weight.getDimSize(1), group, channels)))
    return emitOptionalError(loc, "'weft.conv' weight channels ",
                             weight.getDimSize(1), " x group ", group,
                             " is not a channel count");
  if (clash(input.getDimSize(1), channels))
    return emitOptionalError(loc, "'weft.conv' input channels ",
                             input.getDimSize(1), " != weight channels ",
                             weight.getDimSize(1), " x group ", group);
  if (weight.getDimSize(0) % group != 0)
    return emitOptionalError(loc, "'weft.conv' output channels ",
                             weight.getDimSize(0), " not divisible by group ",
                             group);
  if (Value bias = adaptor.getBias()) {
    auto biasType = rankedType(bias);
    if (biasType.getRank() != 1 ||
        clash(biasType.getDimSize(0), weight.getDimSize(0)))
      return emitOptionalError(loc, "'weft.conv' bias must have ",
                               weight.getDimSize(0), " elements");
  }
  SmallVector<int64_t> shape{input.getDimSize(0), weight.getDimSize(0)};
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t in = input.getDimSize(2 + i);
    if (ShapedType::isDynamic(in)) {
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    int64_t stride = adaptor.getStrides()[i];
    int64_t dilation = adaptor.getDilations()[i];
    if (stride < 1 || dilation < 1)
      return emitOptionalError(loc, "'weft.conv' strides and dilations must "
                                    "be positive");
    int64_t kernelSize = weight.getDimSize(2 + i), kernel, padded;
    if (ShapedType::isDynamic(kernelSize) || kernelSize < 1 ||
        llvm::MulOverflow(kernelSize - 1, dilation, kernel) ||
        llvm::AddOverflow(kernel, int64_t(1), kernel) ||
        llvm::AddOverflow(in, adaptor.getPads()[i], padded) ||
        llvm::AddOverflow(padded, adaptor.getPads()[spatial + i], padded))
      return emitOptionalError(loc, "'weft.conv' spatial dim ", i,
                               " has no static size: its kernel, dilation "
                               "and pads do not fit an int64");
    if (padded < kernel)
      return emitOptionalError(loc, "'weft.conv' kernel larger than the "
                                    "padded input in spatial dim ",
                               i);
    shape.push_back((padded - kernel) / stride + 1);
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

template <typename OpTy>
static LogicalResult verifySoftmaxLike(OpTy op) {
  int64_t rank = op.getType().getRank();
  // I64Attr reads back unsigned: view it as the signed value it holds.
  auto axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0 || axis >= rank)
    return op.emitOpError("axis ")
           << axis << " is out of range [0, " << rank << ")";
  return success();
}
LogicalResult SoftmaxOp::verify() { return verifySoftmaxLike(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxLike(*this); }

/// Checks that `param` (named `what`) has the shape of input dims axis.. end.
static LogicalResult verifyNormParam(Operation *op, RankedTensorType input,
                                     int64_t axis, Value param,
                                     StringRef what) {
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  auto type = rankedType(param);
  if (type.getRank() != static_cast<int64_t>(normalized.size()) ||
      llvm::any_of(llvm::zip(type.getShape(), normalized),
                   [](auto p) { return clash(std::get<0>(p), std::get<1>(p)); }))
    return op->emitOpError()
           << what << " must have the normalized shape "
           << shapeStr(normalized) << ", got " << shapeStr(type.getShape());
  return success();
}

/// A norm's result type after `->`, printed only where it is not the
/// input's (a narrower float).
static ParseResult parseNarrowResult(OpAsmParser &parser, Type input,
                                     Type &result) {
  result = input;
  if (failed(parser.parseOptionalArrow()))
    return success();
  return parser.parseType(result);
}

static void printNarrowResult(OpAsmPrinter &printer, Operation *, Type input,
                              Type result) {
  if (result != input)
    printer << " -> " << result;
}

/// `, type` after the input's type where an operand's type is not the
/// input's (a narrower gradient).
static ParseResult parseNarrowOperand(OpAsmParser &parser, Type input,
                                      Type &operand) {
  operand = input;
  if (failed(parser.parseOptionalComma()))
    return success();
  return parser.parseType(operand);
}

static void printNarrowOperand(OpAsmPrinter &printer, Operation *, Type input,
                               Type operand) {
  if (operand != input)
    printer << ", " << operand;
}

template <typename OpTy>
static LogicalResult verifyNormCommon(OpTy op) {
  auto input = rankedType(op.getInput());
  auto axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0 || axis >= input.getRank())
    return op.emitOpError("axis ")
           << axis << " is out of range [0, " << input.getRank() << ")";
  if (!(op.getEpsilon().convertToDouble() >= 0))
    return op.emitOpError("epsilon must be non-negative");
  return verifyNormParam(op, input, axis, op.getScale(), "scale");
}

/// The result of a norm (or its gradient's `result_grad`): the input's
/// shape, and its element type or a narrower float.
static LogicalResult verifyNormResult(Operation *op, RankedTensorType input,
                                      RankedTensorType result,
                                      StringRef what = "result") {
  auto from = dyn_cast<FloatType>(input.getElementType());
  auto to = dyn_cast<FloatType>(result.getElementType());
  if (result.getShape() != input.getShape() || !from || !to ||
      to.getWidth() > from.getWidth())
    return op->emitOpError(what)
           << " " << result << " must have the input's shape " << input
           << " and its element type or a narrower float";
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyNormCommon(*this)) ||
      failed(verifyNormResult(*this, rankedType(getInput()),
                              rankedType(getResult()))))
    return failure();
  if (getBias())
    return verifyNormParam(*this, rankedType(getInput()), getAxis(), getBias(),
                           "bias");
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyNormCommon(*this)))
    return failure();
  return verifyNormResult(*this, rankedType(getInput()),
                          rankedType(getResult()));
}

LogicalResult NormGradOp::verify() {
  auto input = rankedType(getInput());
  if (failed(verifyNormCommon(*this)) ||
      failed(verifyNormResult(*this, input, rankedType(getResultGrad()),
                              "result_grad")))
    return failure();
  SmallVector<int64_t> rows(input.getShape());
  for (int64_t d = getAxis(); d < input.getRank(); ++d)
    rows[d] = 1;
  auto expected = input.clone(rows);
  if (getMean().getType() != expected)
    return emitOpError("mean and inv_std ")
           << getMean().getType() << " must be " << expected
           << ": the input with its normalized dims kept as 1";
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// An attention's `mask`: broadcast to the scores [B, Hq, S, T], i1 or of
/// the query's element type.
static LogicalResult verifyAttentionMask(std::optional<Location> loc,
                                         StringRef opName,
                                         RankedTensorType maskType,
                                         RankedTensorType q,
                                         RankedTensorType k) {
  SmallVector<int64_t> scores{q.getDimSize(0), q.getDimSize(1), q.getDimSize(2),
                              k.getDimSize(2)};
  auto merged = broadcastShapes(scores, maskType.getShape());
  if (maskType.getRank() > 4 || failed(merged) ||
      llvm::any_of(llvm::zip(*merged, scores), [](auto p) {
        return clash(std::get<0>(p), std::get<1>(p));
      }))
    return emitOptionalError(
        loc, "'", opName, "' mask ", shapeStr(maskType.getShape()),
        " does not broadcast to the scores ", shapeStr(scores));
  Type maskElement = maskType.getElementType();
  if (!maskElement.isInteger(1) && maskElement != q.getElementType())
    return emitOptionalError(loc, "'", opName,
                             "' mask must be i1 or have the query's element "
                             "type");
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto q = rankedType(adaptor.getQuery());
  auto k = rankedType(adaptor.getKey());
  auto v = rankedType(adaptor.getValue());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return emitOptionalError(loc, "'weft.attention' query, key and value must "
                                  "be 4-D [batch, heads, seq, head_dim]");
  if (clash(q.getDimSize(0), k.getDimSize(0)) ||
      clash(k.getDimSize(0), v.getDimSize(0)))
    return emitOptionalError(loc, "'weft.attention' batch sizes differ");
  if (clash(q.getDimSize(3), k.getDimSize(3)))
    return emitOptionalError(loc, "'weft.attention' query head_dim ",
                             q.getDimSize(3), " != key head_dim ",
                             k.getDimSize(3));
  if (clash(k.getDimSize(1), v.getDimSize(1)) ||
      clash(k.getDimSize(2), v.getDimSize(2)))
    return emitOptionalError(loc, "'weft.attention' key ",
                             shapeStr(k.getShape()), " and value ",
                             shapeStr(v.getShape()),
                             " differ in heads or length");
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOptionalError(loc, "'weft.attention' query heads ", hq,
                             " must be a multiple of key/value heads ", hkv);
  SmallVector<int64_t> shape{q.getDimSize(0), hq, q.getDimSize(2),
                             v.getDimSize(3)};
  if (Value mask = adaptor.getMask())
    if (failed(
            verifyAttentionMask(loc, "weft.attention", rankedType(mask), q, k)))
      return failure();
  if (adaptor.getScale() && !(adaptor.getScale()->convertToDouble() > 0))
    return emitOptionalError(loc, "'weft.attention' scale must be positive");
  inferred.push_back(RankedTensorType::get(shape, q.getElementType()));
  if (adaptor.getSaveLogSumExp())
    inferred.push_back(RankedTensorType::get(
        {q.getDimSize(0), hq, q.getDimSize(2)}, Float32Type::get(context)));
  return success();
}

bool AttentionOp::isCausalMask(Value mask, int64_t s, int64_t t) {
  DenseElementsAttr attr;
  if (!mask || !matchPattern(mask, m_Constant(&attr)) ||
      !attr.getElementType().isInteger(1))
    return false;
  std::optional<HostTensor> host = HostTensor::fromAttr(attr);
  if (!host || host->shape.size() < 2)
    return false;
  int64_t rows = host->shape[host->shape.size() - 2];
  int64_t cols = host->shape.back();
  if (rows != s || cols != t)
    return false;
  for (int64_t i = 0; i < host->size(); ++i) {
    int64_t col = i % cols, row = (i / cols) % rows;
    if ((host->ints[i] != 0) != (col <= row + t - s))
      return false;
  }
  return true;
}

namespace {
struct CausalMaskToAttribute : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto q = rankedType(op.getQuery()), k = rankedType(op.getKey());
    if (!AttentionOp::isCausalMask(op.getMask(), q.getDimSize(2),
                                   k.getDimSize(2)))
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.getMaskMutable().clear();
      op.setCausal(true);
    });
    return success();
  }
};
} // namespace

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<CausalMaskToAttribute>(context);
}

double AttentionOp::getEffectiveScale() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(
                   rankedType(getQuery()).getDimSize(3)));
}

//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionGradOp::verify() {
  auto q = rankedType(getQuery()), k = rankedType(getKey()),
       v = rankedType(getValue());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return emitOpError("query, key and value must be 4-D [batch, heads, seq, "
                       "head_dim]");
  if (q.getDimSize(0) != k.getDimSize(0) ||
      k.getDimSize(0) != v.getDimSize(0) ||
      q.getDimSize(3) != k.getDimSize(3) ||
      k.getDimSize(1) != v.getDimSize(1) ||
      k.getDimSize(2) != v.getDimSize(2) || k.getDimSize(1) == 0 ||
      q.getDimSize(1) % k.getDimSize(1) != 0)
    return emitOpError("query ") << q << ", key " << k << " and value " << v
                                 << " are not the operands of one attention";
  auto expected = RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType());
  if (expected != getOut().getType())
    return emitOpError("out ") << getOut().getType()
                               << " is not the attention's result " << expected;
  if (getScale() && !(getScale()->convertToDouble() > 0))
    return emitOpError("scale must be positive");
  if (Value mask = getMask())
    if (failed(verifyAttentionMask(getLoc(), "weft.attention_grad",
                                   rankedType(mask), q, k)))
      return failure();
  if (Value lse = getLogSumExp()) {
    SmallVector<int64_t> rows{q.getDimSize(0), q.getDimSize(1),
                              q.getDimSize(2)};
    if (rankedType(lse).getShape() != ArrayRef<int64_t>(rows))
      return emitOpError("log_sum_exp ")
             << lse.getType() << " must be [batch, query heads, queries] "
             << shapeStr(rows);
  }
  return success();
}

/// Logits [..., V] against labels [...]: the per-position type `loss` must
/// have, in the logits' element type or in f32 (narrow logits: a log-sum-exp
/// rounded to bf16 would scale the softmax the gradient subtracts it from).
static LogicalResult verifyCrossEntropy(Operation *op, Value logits,
                                        Value labels, Type loss) {
  auto logitsType = rankedType(logits);
  if (logitsType.getRank() < 1)
    return op->emitOpError("logits must have a class dim");
  auto expected = RankedTensorType::get(logitsType.getShape().drop_back(),
                                        logitsType.getElementType());
  if (rankedType(labels).getShape() != expected.getShape())
    return op->emitOpError("labels ")
           << labels.getType() << " must be shaped as the logits "
           << logits.getType() << " without their class dim";
  if (loss != expected &&
      loss != expected.clone(Float32Type::get(op->getContext())))
    return op->emitOpError("per-position results ")
           << loss << " must be " << expected;
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  return verifyCrossEntropy(*this, getLogits(), getLabels(),
                            getLoss().getType());
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  return verifyCrossEntropy(*this, getLogits(), getLabels(),
                            getLogSumExp().getType());
}

double AttentionGradOp::getEffectiveScale() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 /
         std::sqrt(static_cast<double>(rankedType(getQuery()).getDimSize(3)));
}

void weft::readForwardLogSumExp(AttentionGradOp grad) {
  if (grad.getLogSumExp())
    return;
  auto forward = grad.getOut().getDefiningOp<AttentionOp>();
  bool same = forward && forward.getQuery() == grad.getQuery() &&
              forward.getKey() == grad.getKey() &&
              forward.getValue() == grad.getValue() &&
              forward.getMask() == grad.getMask() &&
              forward.getCausal() == grad.getCausal() &&
              forward.getEffectiveScale() == grad.getEffectiveScale();
  if (same && forward.getSaveLogSumExp()) {
    grad.getLogSumExpMutable().assign(forward.getLogSumExp());
    return;
  }
  OpBuilder builder(same ? forward.getOperation() : grad.getOperation());
  auto saving = AttentionOp::create(builder, grad.getLoc(), grad.getQuery(),
                                    grad.getKey(), grad.getValue(),
                                    grad.getMask(), grad.getCausalAttr(),
                                    grad.getScaleAttr(), builder.getUnitAttr());
  if (same) {
    saving->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
    forward.getResult().replaceAllUsesWith(saving.getResult());
    forward.erase();
  }
  grad.getLogSumExpMutable().assign(saving.getLogSumExp());
}

const char *weft::fusedAttentionRefusal(Operation *attention, bool backward) {
  auto dims = [&](unsigned operand) {
    return tensorTypeOf(attention->getOperand(operand)).getShape();
  };
  ArrayRef<int64_t> q = dims(0), k = dims(1), v = dims(2);
  bool causal = false, masked = false;
  if (auto forward = dyn_cast<AttentionOp>(attention)) {
    causal = forward.getCausal();
    masked = bool(forward.getMask());
  } else {
    auto grad = cast<AttentionGradOp>(attention);
    causal = grad.getCausal();
    masked = bool(grad.getMask());
    backward = true;
  }
  int64_t flags = (causal ? runtime::kAttentionCausal : 0) |
                  (masked ? runtime::kAttentionBias : 0);
  return runtime::fusedAttentionRefusal(q[1], k[1], q[2], k[2], q[3], v[3],
                                        flags, backward);
}

//===----------------------------------------------------------------------===//
// GatherOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < 0 || axis >= data.getRank())
    return emitOptionalError(loc, "'weft.gather' axis ", axis,
                             " is out of range [0, ", data.getRank(), ")");
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  inferred.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

LogicalResult ScatterAddOp::verify() {
  auto updates = rankedType(getUpdates()), indices = rankedType(getIndices());
  auto result = getType();
  if (result.getRank() < 1)
    return emitOpError("result must have a row dim");
  SmallVector<int64_t> expected(indices.getShape());
  llvm::append_range(expected, result.getShape().drop_front());
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("updates ")
           << getUpdates().getType() << " must be shaped as the indices "
           << getIndices().getType() << " followed by the result's row "
           << result << " without its first dim";
  return success();
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  std::optional<HostTensor> data = HostTensor::fromAttr(adaptor.getData());
  std::optional<HostTensor> indices = HostTensor::fromAttr(adaptor.getIndices());
  if (!data || !indices)
    return {};
  auto axis = static_cast<int64_t>(getAxis());
  int64_t dim = data->shape[axis];
  // Out-of-range indices are undefined: leave them to run time.
  for (int64_t i : indices->ints)
    if (i < -dim || i >= dim)
      return {};
  return gather(*data, *indices, axis).toAttr();
}

//===----------------------------------------------------------------------===//
// ReshapeOp, ExpandOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = rankedType(getInput());
  if (in.hasStaticShape() && getType().hasStaticShape() &&
      in.getNumElements() != getType().getNumElements())
    return emitOpError("input ")
           << shapeStr(in.getShape()) << " has " << in.getNumElements()
           << " elements but the result " << shapeStr(getType().getShape())
           << " has " << getType().getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    if (getType().hasStaticShape())
      return dense.reshape(getType());
  return {};
}

namespace {
/// reshape(reshape(x)) -> reshape(x); squeeze/unsqueeze are reshapes too.
struct CollapseReshapeChain : public OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    Operation *producer = op.getInput().getDefiningOp();
    if (!producer || !isa<ReshapeOp, SqueezeOp, UnsqueezeOp>(producer))
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(),
                                           producer->getOperand(0));
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<CollapseReshapeChain>(context);
}

LogicalResult ExpandOp::verify() {
  auto in = rankedType(getInput());
  auto merged = broadcastShapes(in.getShape(), getType().getShape());
  if (in.getRank() > getType().getRank() || failed(merged) ||
      llvm::any_of(llvm::zip(*merged, getType().getShape()), [](auto p) {
        return clash(std::get<0>(p), std::get<1>(p));
      }))
    return emitOpError("input ")
           << shapeStr(in.getShape()) << " does not broadcast to the result "
           << shapeStr(getType().getShape());
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (dense && dense.isSplat() && getType().hasStaticShape())
    return dense.resizeSplat(getType());
  return foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<double> x) { return x[0]; },
      [](ArrayRef<int64_t> x) { return x[0]; });
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto in = rankedType(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != in.getRank())
    return emitOptionalError(loc, "'weft.transpose' permutation has ",
                             perm.size(), " entries for rank ", in.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOptionalError(loc, "'weft.transpose' permutation is not a "
                                    "permutation of [0, ",
                               in.getRank(), ")");
    seen[p] = true;
    shape.push_back(in.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  // transpose(transpose(x, p), q) == transpose(x, p o q).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t q : perm)
      composed.push_back(inner.getPermutation()[q]);
    if (llvm::equal(composed, llvm::seq<int64_t>(0, composed.size())))
      return inner.getInput();
  }
  auto host = HostTensor::fromAttr(adaptor.getInput());
  if (!host)
    return {};
  return transpose(*host, perm).toAttr();
}

namespace {
/// transpose(transpose(x, p), q) -> transpose(x, p o q).
struct MergeTransposes : public OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> composed;
    for (int64_t q : op.getPermutation())
      composed.push_back(inner.getPermutation()[q]);
    rewriter.replaceOpWithNewOp<TransposeOp>(
        op, inner.getInput(), rewriter.getDenseI64ArrayAttr(composed));
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<MergeTransposes>(context);
}

//===----------------------------------------------------------------------===//
// ConcatOp, SplitOp, SliceOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "'weft.concat' needs at least one input");
  auto first = rankedType(adaptor.getInputs().front());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "'weft.concat' axis ", axis,
                             " is out of range [0, ", first.getRank(), ")");
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, input] : llvm::enumerate(adaptor.getInputs().drop_front())) {
    auto type = rankedType(input);
    if (type.getRank() != first.getRank())
      return emitOptionalError(loc, "'weft.concat' input #", i + 1,
                               " has rank ", type.getRank(), ", expected ",
                               first.getRank());
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (d == axis) {
        shape[d] = ShapedType::isDynamic(shape[d]) ||
                           type.isDynamicDim(d)
                       ? ShapedType::kDynamic
                       : shape[d] + type.getDimSize(d);
      } else if (clash(shape[d], type.getDimSize(d))) {
        return emitOptionalError(loc, "'weft.concat' input #", i + 1,
                                 " has dim ", d, " = ", type.getDimSize(d),
                                 ", expected ", shape[d]);
      }
    }
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  SmallVector<HostTensor> hosts;
  for (Attribute attr : adaptor.getInputs()) {
    auto host = HostTensor::fromAttr(attr);
    if (!host)
      return {};
    hosts.push_back(std::move(*host));
  }
  SmallVector<const HostTensor *> ptrs;
  for (const HostTensor &h : hosts)
    ptrs.push_back(&h);
  return concat(ptrs, static_cast<int64_t>(getAxis())).toAttr();
}

LogicalResult SplitOp::fold(FoldAdaptor adaptor,
                            SmallVectorImpl<OpFoldResult> &results) {
  std::optional<HostTensor> input = HostTensor::fromAttr(adaptor.getInput());
  if (!input)
    return failure();
  auto axis = static_cast<int64_t>(getAxis());
  int64_t rank = input->shape.size();
  int64_t offset = 0;
  for (auto [result, size] : llvm::zip(getResults(), getSizes())) {
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
    offsets[axis] = offset;
    results.push_back(
        slice(*input, offsets,
              llvm::cast<RankedTensorType>(result.getType()).getShape(),
              strides)
            .toAttr());
    offset += size;
  }
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto in = rankedType(adaptor.getInput());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (axis < 0 || axis >= in.getRank())
    return emitOptionalError(loc, "'weft.split' axis ", axis,
                             " is out of range [0, ", in.getRank(), ")");
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 0)
      return emitOptionalError(loc, "'weft.split' sizes must be >= 0");
    total += size;
  }
  if (clash(total, in.getDimSize(axis)))
    return emitOptionalError(loc, "'weft.split' sizes sum to ", total,
                             " but dim ", axis, " is ", in.getDimSize(axis));
  for (int64_t size : adaptor.getSizes()) {
    SmallVector<int64_t> shape(in.getShape());
    shape[axis] = size;
    inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  }
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto in = rankedType(adaptor.getInput());
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), sizes = adaptor.getSizes(),
                    strides = adaptor.getStrides();
  int64_t rank = in.getRank();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(sizes.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return emitOptionalError(loc, "'weft.slice' needs one offset, size and "
                                  "stride per dimension (rank ",
                             rank, ")");
  for (int64_t d = 0; d < rank; ++d) {
    if (strides[d] == 0 || sizes[d] < 0)
      return emitOptionalError(loc, "'weft.slice' dim ", d,
                               ": stride must be non-zero and size >= 0");
    if (sizes[d] == 0 || in.isDynamicDim(d))
      continue;
    int64_t last = offsets[d] + (sizes[d] - 1) * strides[d];
    if (offsets[d] < 0 || offsets[d] >= in.getDimSize(d) || last < 0 ||
        last >= in.getDimSize(d))
      return emitOptionalError(loc, "'weft.slice' dim ", d, ": elements ",
                               offsets[d], "..", last,
                               " are out of bounds of size ",
                               in.getDimSize(d));
  }
  inferred.push_back(RankedTensorType::get(sizes, in.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getOffsets(), [](int64_t o) { return o == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  auto host = HostTensor::fromAttr(adaptor.getInput());
  if (!host)
    return {};
  return slice(*host, getOffsets(), getSizes(), getStrides()).toAttr();
}

namespace {
/// The slices of a tensor that are its only users, unit-strided and cutting
/// one axis into consecutive pieces from start to end -> one split: the
/// partitioner then splits each piece alike (blocked sharding) instead of
/// gathering the whole tensor to cut it.
struct SlicesTilingAnAxisAreASplit : public OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    Value input = op.getInput();
    ArrayRef<int64_t> shape = rankedType(input).getShape();
    SmallVector<SliceOp> pieces;
    std::optional<int64_t> axis;
    for (Operation *user : input.getUsers()) {
      auto slice = dyn_cast<SliceOp>(user);
      if (!slice ||
          llvm::any_of(slice.getStrides(), [](int64_t s) { return s != 1; }))
        return failure();
      for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
        if (slice.getOffsets()[d] == 0 && slice.getSizes()[d] == shape[d])
          continue;
        if (axis && *axis != d)
          return failure();
        axis = d;
      }
      pieces.push_back(slice);
    }
    if (!axis || pieces.size() < 2)
      return failure();
    llvm::sort(pieces, [&](SliceOp a, SliceOp b) {
      return a.getOffsets()[*axis] < b.getOffsets()[*axis];
    });
    SmallVector<int64_t> sizes;
    SmallVector<Type> types;
    int64_t end = 0;
    for (SliceOp piece : pieces) {
      if (piece.getOffsets()[*axis] != end)
        return failure();
      end += piece.getSizes()[*axis];
      sizes.push_back(piece.getSizes()[*axis]);
      types.push_back(piece.getType());
    }
    if (end != shape[*axis])
      return failure();
    rewriter.setInsertionPointAfterValue(input);
    auto split = SplitOp::create(rewriter, pieces.front().getLoc(), types,
                                 input, rewriter.getI64IntegerAttr(*axis),
                                 rewriter.getDenseI64ArrayAttr(sizes));
    for (auto [piece, result] : llvm::zip(pieces, split.getResults()))
      rewriter.replaceOp(piece, result);
    return success();
  }
};
} // namespace

void SliceOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *context) {
  results.add<SlicesTilingAnAxisAreASplit>(context);
}

//===----------------------------------------------------------------------===//
// SqueezeOp, UnsqueezeOp
//===----------------------------------------------------------------------===//

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto in = rankedType(adaptor.getInput());
  if (failed(verifyAxes(loc, "weft.squeeze", "axis", adaptor.getAxes(),
                        in.getRank())))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (!llvm::is_contained(adaptor.getAxes(), d)) {
      shape.push_back(in.getDimSize(d));
      continue;
    }
    if (clash(in.getDimSize(d), 1))
      return emitOptionalError(loc, "'weft.squeeze' dim ", d, " has size ",
                               in.getDimSize(d), ", not 1");
  }
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto in = rankedType(adaptor.getInput());
  int64_t rank = in.getRank() + adaptor.getAxes().size();
  if (failed(verifyAxes(loc, "weft.unsqueeze", "axis", adaptor.getAxes(),
                        rank)))
    return failure();
  SmallVector<int64_t> shape;
  int64_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(llvm::is_contained(adaptor.getAxes(), d)
                        ? 1
                        : in.getDimSize(next++));
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

/// Squeeze and unsqueeze only relabel dims: constants fold by reshaping.
static OpFoldResult foldRelabel(Value input, Attribute constant,
                                RankedTensorType resultType) {
  if (input.getType() == resultType)
    return input;
  if (auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(constant))
    if (resultType.hasStaticShape())
      return dense.reshape(resultType);
  return {};
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldRelabel(getInput(), adaptor.getInput(), getType());
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldRelabel(getInput(), adaptor.getInput(), getType());
}

//===----------------------------------------------------------------------===//
// TriluOp
//===----------------------------------------------------------------------===//

LogicalResult TriluOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("input must have rank >= 2, got rank ")
           << getType().getRank();
  return success();
}

#define GET_OP_CLASSES
#include "weft/Dialect/Weft/IR/WeftOps.cpp.inc"
