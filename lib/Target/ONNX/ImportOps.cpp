//===- ImportOps.cpp - Per-op ONNX to weft translation --------------------===//
//
// One handler per ONNX op type (or family), selecting the opset-dependent
// form (attributes before opset 13, inputs after) and normalizing to weft
// ops: negative axes resolved, defaults made explicit.
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>

namespace weft::onnx_import {

namespace {

int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

RankedTensorType typeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult Importer::importElementwiseBinary(const onnx::NodeProto &n) {
  FailureOr<Value> lhs = requiredInput(0), rhs = requiredInput(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  Type lhsElement = typeOf(*lhs).getElementType();
  Type rhsElement = typeOf(*rhs).getElementType();
  StringRef op = n.op_type();
  if (op == "Pow" && lhsElement != rhsElement) {
    // ONNX Pow allows an exponent of another numeric type.
    FailureOr<Value> cast = castTo(*rhs, lhsElement);
    if (failed(cast))
      return failure();
    rhs = cast;
    rhsElement = lhsElement;
  }
  if (lhsElement != rhsElement)
    return nodeError() << "input '" << n.input(1) << "' has element type "
                       << rhsElement << " but input '" << n.input(0)
                       << "' has " << lhsElement;
  SmallVector<Value> operands{*lhs, *rhs};
  FailureOr<Value> result;
  if (op == "Add")
    result = create<AddOp>(operands);
  else if (op == "Sub")
    result = create<SubOp>(operands);
  else if (op == "Mul")
    result = create<MulOp>(operands);
  else if (op == "Div")
    result = create<DivOp>(operands);
  else if (op == "Pow")
    result = create<PowOp>(operands);
  else if (op == "And")
    result = create<AndOp>(operands);
  else if (op == "Or")
    result = create<OrOp>(operands);
  else if (op == "Xor")
    result = create<XorOp>(operands);
  else if (op == "Equal")
    result = create<EqualOp>(operands);
  else if (op == "Less")
    result = create<LessOp>(operands);
  else if (op == "LessOrEqual")
    result = create<LessEqualOp>(operands);
  else if (op == "Greater")
    result = create<GreaterOp>(operands);
  else // GreaterOrEqual
    result = create<GreaterEqualOp>(operands);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importVariadic(const onnx::NodeProto &n) {
  if (n.input_size() == 0)
    return nodeError() << "needs at least one input";
  FailureOr<Value> acc = requiredInput(0);
  if (failed(acc))
    return failure();
  StringRef op = n.op_type();
  for (int i = 1; i < n.input_size(); ++i) {
    FailureOr<Value> next = requiredInput(i);
    if (failed(next))
      return failure();
    if (typeOf(*next).getElementType() != typeOf(*acc).getElementType())
      return nodeError() << "input '" << n.input(i)
                         << "' has a different element type than input '"
                         << n.input(0) << "'";
    SmallVector<Value> operands{*acc, *next};
    if (op == "Max")
      acc = create<MaxOp>(operands);
    else if (op == "Min")
      acc = create<MinOp>(operands);
    else
      acc = create<AddOp>(operands);
    if (failed(acc))
      return failure();
  }
  if (op == "Mean" && n.input_size() > 1) {
    Type element = typeOf(*acc).getElementType();
    if (!llvm::isa<FloatType>(element))
      return nodeError() << "Mean needs float inputs";
    acc = create<DivOp>(
        ValueRange{*acc, scalarConstant(element, n.input_size())});
    if (failed(acc))
      return failure();
  }
  return setOutput(0, *acc);
}

LogicalResult Importer::importUnary(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  Type type = x->getType();
  StringRef op = n.op_type();
  FailureOr<Value> result;
#define WEFT_UNARY(ONNX_NAME, OP)                                              \
  if (op == ONNX_NAME)                                                         \
    result = createTyped<OP>(type, {*x});
  WEFT_UNARY("Neg", NegOp)
  WEFT_UNARY("Abs", AbsOp)
  WEFT_UNARY("Sqrt", SqrtOp)
  WEFT_UNARY("Reciprocal", ReciprocalOp)
  WEFT_UNARY("Exp", ExpOp)
  WEFT_UNARY("Log", LogOp)
  WEFT_UNARY("Tanh", TanhOp)
  WEFT_UNARY("Erf", ErfOp)
  WEFT_UNARY("Relu", ReluOp)
  WEFT_UNARY("Sigmoid", SigmoidOp)
  WEFT_UNARY("Sin", SinOp)
  WEFT_UNARY("Cos", CosOp)
  WEFT_UNARY("Not", NotOp)
#undef WEFT_UNARY
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importGelu(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  std::string approximate = stringAttr("approximate", "none");
  FailureOr<Value> result = createTyped<GeluOp>(
      x->getType(), {*x},
      {named("approximate", StringAttr::get(ctx, approximate))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importClip(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  Type element = typeOf(*x).getElementType();
  Value lo, hi;
  if (opset < 11) {
    lo = scalarConstant(element, floatAttr("min", -INFINITY));
    hi = scalarConstant(element, floatAttr("max", INFINITY));
  } else {
    lo = input(1);
    hi = input(2);
  }
  Value result = *x;
  if (lo) {
    FailureOr<Value> clipped = create<MaxOp>(ValueRange{result, lo});
    if (failed(clipped))
      return failure();
    result = *clipped;
  }
  if (hi) {
    FailureOr<Value> clipped = create<MinOp>(ValueRange{result, hi});
    if (failed(clipped))
      return failure();
    result = *clipped;
  }
  return setOutput(0, result);
}

LogicalResult Importer::importLeakyRelu(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  Type element = typeOf(*x).getElementType();
  Value zero = scalarConstant(element, 0);
  Value alpha = scalarConstant(element, floatAttr("alpha", 0.01f));
  FailureOr<Value> negative = create<LessOp>(ValueRange{*x, zero});
  FailureOr<Value> scaled = create<MulOp>(ValueRange{*x, alpha});
  if (failed(negative) || failed(scaled))
    return failure();
  FailureOr<Value> result = create<WhereOp>(ValueRange{*negative, *scaled, *x});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importWhere(const onnx::NodeProto &n) {
  FailureOr<Value> cond = requiredInput(0), a = requiredInput(1),
                   b = requiredInput(2);
  if (failed(cond) || failed(a) || failed(b))
    return failure();
  if (typeOf(*a).getElementType() != typeOf(*b).getElementType())
    return nodeError() << "inputs '" << n.input(1) << "' and '" << n.input(2)
                       << "' have different element types";
  FailureOr<Value> result = create<WhereOp>(ValueRange{*cond, *a, *b});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importCast(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  Type target;
  if (n.op_type() == "CastLike") {
    FailureOr<Value> like = requiredInput(1);
    if (failed(like))
      return failure();
    target = typeOf(*like).getElementType();
  } else {
    int64_t to = intAttr("to", 0);
    target = elementTypeFor(ctx, to);
    if (!target)
      return nodeError() << "cast to unsupported element type "
                         << dataTypeName(to);
  }
  FailureOr<Value> result = castTo(*x, target);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importIdentity(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  return setOutput(0, *x);
}

LogicalResult Importer::importDropout(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  if (Value training = input(2)) {
    DenseElementsAttr attr;
    if (!matchPattern(training, m_Constant(&attr)) || !attr.isSplat() ||
        attr.getSplatValue<APInt>().getBoolValue())
      return nodeError() << "dropout in training mode is not supported by the "
                            "importer (the training step adds its own)";
  }
  // Inference: the identity, and an all-true mask.
  if (outputUsed(1))
    setOutput(1, constant(HostTensor{
                     SmallVector<int64_t>(typeOf(*x).getShape()),
                     IntegerType::get(ctx, 1),
                     {},
                     std::vector<int64_t>(typeOf(*x).getNumElements(), 1)}));
  return setOutput(0, *x);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult Importer::importMatMul(const onnx::NodeProto &n) {
  FailureOr<Value> a = requiredInput(0), b = requiredInput(1);
  if (failed(a) || failed(b))
    return failure();
  if (typeOf(*a).getElementType() != typeOf(*b).getElementType())
    return nodeError() << "inputs have different element types";
  FailureOr<Value> result = create<MatmulOp>(ValueRange{*a, *b});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

/// Einsum of one or two operands as transposes, sums and one batched
/// matmul: the letters shared by both operands and the output are the
/// batch, the shared ones missing from the output are contracted, and each
/// operand's own letters are its free dims (a letter in one operand alone,
/// not in the output, is summed first). Diagonals (a letter repeated in one
/// operand) are not supported.
LogicalResult Importer::importEinsum(const onnx::NodeProto &n) {
  std::string equation;
  for (char c : stringAttr("equation", ""))
    if (c != ' ')
      equation += c;
  SmallVector<Value> operands;
  for (int i = 0; i < n.input_size(); ++i) {
    FailureOr<Value> v = requiredInput(i);
    if (failed(v))
      return failure();
    if (!llvm::isa<FloatType>(typeOf(*v).getElementType()))
      return nodeError() << "only float operands are supported";
    operands.push_back(*v);
  }
  if (operands.empty() || operands.size() > 2)
    return nodeError() << "einsum of " << operands.size()
                       << " operands is not supported (1 or 2)";
  StringRef text(equation);
  auto [lhsText, outText] = text.split("->");
  bool explicitOutput = text.contains("->");
  SmallVector<StringRef> terms;
  lhsText.split(terms, ',');
  if (terms.size() != operands.size())
    return nodeError() << "equation '" << equation << "' has " << terms.size()
                       << " operand terms for " << operands.size() << " inputs";
  // "..." stands for the leading dims not named: letters of their own,
  // aligned from the right across operands.
  int64_t ellipsisRank = 0;
  for (auto [term, value] : llvm::zip(terms, operands))
    if (term.contains("..."))
      ellipsisRank = std::max<int64_t>(
          ellipsisRank, typeOf(value).getRank() - (int64_t(term.size()) - 3));
  auto expand = [&](StringRef term, int64_t rank) {
    size_t dots = term.find("...");
    if (dots == StringRef::npos)
      return term.str();
    int64_t own = rank - (int64_t(term.size()) - 3);
    std::string letters;
    for (int64_t i = ellipsisRank - own; i < ellipsisRank; ++i)
      letters += char('0' + i);
    return (term.substr(0, dots) + letters + term.substr(dots + 3)).str();
  };
  SmallVector<std::string> inputs;
  std::map<char, int64_t> sizes;
  for (auto [term, value] : llvm::zip(terms, operands)) {
    RankedTensorType type = typeOf(value);
    std::string letters = expand(term, type.getRank());
    if (int64_t(letters.size()) != type.getRank() ||
        llvm::any_of(letters, [](char c) { return c == '.'; }))
      return nodeError() << "term '" << term.str() << "' does not match an "
                         << "operand of rank " << type.getRank();
    for (auto [i, c] : llvm::enumerate(letters)) {
      if (letters.find(c) != i)
        return nodeError() << "repeated index '" << c
                           << "' (a diagonal) is not supported";
      auto [it, inserted] = sizes.try_emplace(c, type.getDimSize(i));
      if (!inserted && it->second != type.getDimSize(i))
        return nodeError() << "index '" << c << "' has sizes " << it->second
                           << " and " << type.getDimSize(i);
    }
    inputs.push_back(letters);
  }
  std::string output;
  if (explicitOutput) {
    output = expand(outText, ellipsisRank + int64_t(outText.size()) -
                                 (outText.contains("...") ? 3 : 0));
  } else {
    // Implicit form: the ellipsis, then the letters used once, in order.
    for (int64_t i = 0; i < ellipsisRank; ++i)
      output += char('0' + i);
    std::string all = inputs[0] + (inputs.size() > 1 ? inputs[1] : "");
    for (auto [c, size] : sizes)
      if (std::isalpha(c) && llvm::count(all, c) == 1)
        output += c;
  }
  for (char c : output)
    if (!sizes.count(c))
      return nodeError() << "output index '" << c << "' is not in any operand";
  auto inOutput = [&](char c) { return output.find(c) != std::string::npos; };

  // Sums away the letters of `term` that `keep` rejects, then transposes
  // the rest to `order`; `term` becomes `order`.
  auto arrange = [&](Value value, std::string &term,
                     function_ref<bool(char)> keep,
                     const std::string &order) -> FailureOr<Value> {
    SmallVector<int64_t> summed;
    std::string kept;
    for (auto [i, c] : llvm::enumerate(term)) {
      if (keep(c))
        kept += c;
      else
        summed.push_back(i);
    }
    if (!summed.empty()) {
      FailureOr<Value> sum = create<ReduceSumOp>(
          ValueRange{value},
          {named("axes", builder.getDenseI64ArrayAttr(summed))});
      if (failed(sum))
        return failure();
      value = *sum;
    }
    term = kept;
    SmallVector<int64_t> perm;
    for (char c : order)
      perm.push_back(term.find(c));
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()))) {
      FailureOr<Value> t = create<TransposeOp>(
          ValueRange{value},
          {named("permutation", builder.getDenseI64ArrayAttr(perm))});
      if (failed(t))
        return failure();
      value = *t;
    }
    term = order;
    return value;
  };
  auto extent = [&](StringRef letters) {
    int64_t p = 1;
    for (char c : letters)
      p *= sizes[c];
    return p;
  };

  FailureOr<Value> result;
  if (operands.size() == 1) {
    result = arrange(operands[0], inputs[0], inOutput, output);
  } else {
    auto inOther = [&](int self, char c) {
      return inputs[1 - self].find(c) != std::string::npos;
    };
    std::string batch, contracted, free[2];
    for (char c : inputs[0])
      if (inOther(0, c))
        (inOutput(c) ? batch : contracted) += c;
    for (int side = 0; side < 2; ++side)
      for (char c : inputs[side])
        if (!inOther(side, c) && inOutput(c))
          free[side] += c;
    FailureOr<Value> lhs = arrange(
        operands[0], inputs[0],
        [&](char c) { return inOutput(c) || inOther(0, c); },
        batch + free[0] + contracted);
    FailureOr<Value> rhs = arrange(
        operands[1], inputs[1],
        [&](char c) { return inOutput(c) || inOther(1, c); },
        batch + contracted + free[1]);
    if (failed(lhs) || failed(rhs))
      return failure();
    int64_t b = extent(batch), m = extent(free[0]), k = extent(contracted),
            nn = extent(free[1]);
    FailureOr<Value> l = reshape(*lhs, {b, m, k});
    FailureOr<Value> r = reshape(*rhs, {b, k, nn});
    if (failed(l) || failed(r))
      return failure();
    result = create<MatmulOp>(ValueRange{*l, *r});
    if (failed(result))
      return failure();
    std::string letters = batch + free[0] + free[1];
    SmallVector<int64_t> shape;
    for (char c : letters)
      shape.push_back(sizes[c]);
    result = reshape(*result, shape);
    if (failed(result))
      return failure();
    result = arrange(*result, letters, inOutput, output);
  }
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importGemm(const onnx::NodeProto &n) {
  FailureOr<Value> a = requiredInput(0), b = requiredInput(1);
  if (failed(a) || failed(b))
    return failure();
  Value c = input(2);
  float alpha = floatAttr("alpha", 1.0f), beta = floatAttr("beta", 1.0f);
  bool transA = intAttr("transA", 0), transB = intAttr("transB", 0);
  if (typeOf(*a).getRank() != 2 || typeOf(*b).getRank() != 2)
    return nodeError() << "A and B must be 2-D";
  Type element = typeOf(*a).getElementType();
  Value lhs = *a;
  if (transA) {
    FailureOr<Value> t = create<TransposeOp>(
        ValueRange{lhs},
        {named("permutation", builder.getDenseI64ArrayAttr({1, 0}))});
    if (failed(t))
      return failure();
    lhs = *t;
  }
  // The common case, y = x W^T + b with a 1-D bias, is a linear layer.
  int64_t outFeatures = typeOf(*b).getDimSize(transB ? 0 : 1);
  bool biasIsVector = c && typeOf(c).getShape() == ArrayRef<int64_t>{outFeatures};
  SmallVector<Value> operands{lhs, *b};
  if (alpha == 1.0f && beta == 1.0f && (!c || biasIsVector))
    if (c)
      operands.push_back(c);
  FailureOr<Value> result;
  if (operands.size() == 3 || (!c && alpha == 1.0f)) {
    SmallVector<NamedAttribute> attrs;
    if (transB)
      attrs.push_back(named("transpose_weight", builder.getUnitAttr()));
    result = create<LinearOp>(operands, attrs);
    if (failed(result))
      return failure();
    return setOutput(0, *result);
  }
  Value rhs = *b;
  if (transB) {
    FailureOr<Value> t = create<TransposeOp>(
        ValueRange{rhs},
        {named("permutation", builder.getDenseI64ArrayAttr({1, 0}))});
    if (failed(t))
      return failure();
    rhs = *t;
  }
  result = create<MatmulOp>(ValueRange{lhs, rhs});
  if (succeeded(result) && alpha != 1.0f)
    result = create<MulOp>(ValueRange{*result, scalarConstant(element, alpha)});
  if (succeeded(result) && c) {
    Value bias = c;
    if (beta != 1.0f) {
      FailureOr<Value> scaled =
          create<MulOp>(ValueRange{c, scalarConstant(element, beta)});
      if (failed(scaled))
        return failure();
      bias = *scaled;
    }
    result = create<AddOp>(ValueRange{*result, bias});
  }
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importConv(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0), w = requiredInput(1);
  if (failed(x) || failed(w))
    return failure();
  RankedTensorType xType = typeOf(*x), wType = typeOf(*w);
  int64_t spatial = xType.getRank() - 2;
  if (spatial < 1 || wType.getRank() != xType.getRank())
    return nodeError() << "input and weight must be [N, C, D...] and "
                          "[M, C/group, K...]";
  SmallVector<int64_t> strides =
      intsAttr("strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> dilations =
      intsAttr("dilations").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      intsAttr("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(dilations.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return nodeError() << "strides, dilations and pads must have " << spatial
                       << ", " << spatial << " and " << 2 * spatial
                       << " entries";
  constexpr int64_t largest = int64_t(1) << 31;
  for (int64_t i = 0; i < spatial; ++i)
    if (strides[i] < 1 || strides[i] > largest || dilations[i] < 1 ||
        dilations[i] > largest || pads[i] < 0 || pads[i] > largest ||
        pads[spatial + i] < 0 || pads[spatial + i] > largest)
      return nodeError() << "strides and dilations must be from 1 to 2^31 "
                            "and pads from 0 to 2^31";
  std::string autoPad = stringAttr("auto_pad", "NOTSET");
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t in = xType.getDimSize(2 + i);
      int64_t out = (in + strides[i] - 1) / strides[i];
      int64_t kernel, reach;
      if (llvm::MulOverflow(wType.getDimSize(2 + i) - 1, dilations[i],
                            kernel) ||
          llvm::MulOverflow(out - 1, strides[i], reach))
        return nodeError() << "the kernel or the output of spatial dim " << i
                           << " does not fit an int64";
      kernel += 1;
      int64_t total = std::max<int64_t>(0, reach + kernel - in);
      int64_t small = total / 2, large = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : large;
      pads[spatial + i] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (autoPad != "NOTSET") {
    return nodeError() << "unknown auto_pad '" << autoPad << "'";
  }
  SmallVector<Value> operands{*x, *w};
  if (Value bias = input(2))
    operands.push_back(bias);
  FailureOr<Value> result = create<ConvOp>(
      operands, {named("strides", builder.getDenseI64ArrayAttr(strides)),
                 named("pads", builder.getDenseI64ArrayAttr(pads)),
                 named("dilations", builder.getDenseI64ArrayAttr(dilations)),
                 named("group", builder.getI64IntegerAttr(intAttr("group", 1)))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult Importer::importReduce(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  StringRef op = n.op_type();
  bool axesAsInput = (op == "ReduceSum" && opset >= 13) || opset >= 18;
  std::optional<SmallVector<int64_t>> axes;
  if (axesAsInput) {
    if (input(1)) {
      FailureOr<HostTensor> t = constantInput(1, "axes");
      if (failed(t))
        return failure();
      axes = SmallVector<int64_t>(t->ints.begin(), t->ints.end());
    }
  } else {
    axes = intsAttr("axes");
  }
  bool keepdims = intAttr("keepdims", 1);
  if (!axes || axes->empty()) {
    if (intAttr("noop_with_empty_axes", 0))
      return setOutput(0, *x);
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  SmallVector<int64_t> normalized;
  for (int64_t axis : *axes) {
    FailureOr<int64_t> a = normalizeAxis(axis, rank);
    if (failed(a))
      return failure();
    if (llvm::is_contained(normalized, *a))
      return nodeError() << "axis " << axis << " is repeated";
    normalized.push_back(*a);
  }
  llvm::sort(normalized);
  if (rank == 0)
    return setOutput(0, *x);
  SmallVector<NamedAttribute> attrs{
      named("axes", builder.getDenseI64ArrayAttr(normalized))};
  if (keepdims)
    attrs.push_back(named("keepdims", builder.getUnitAttr()));
  FailureOr<Value> result;
  if (op == "ReduceSum")
    result = create<ReduceSumOp>(ValueRange{*x}, attrs);
  else if (op == "ReduceMean")
    result = create<ReduceMeanOp>(ValueRange{*x}, attrs);
  else if (op == "ReduceMax")
    result = create<ReduceMaxOp>(ValueRange{*x}, attrs);
  else if (op == "ReduceMin")
    result = create<ReduceMinOp>(ValueRange{*x}, attrs);
  else
    result = create<ReduceProdOp>(ValueRange{*x}, attrs);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importSoftmax(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank();
  if (rank == 0)
    return nodeError() << "input must have rank >= 1";
  bool legacy = opset < 13;
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", legacy ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  bool isLog = n.op_type() == "LogSoftmax";
  auto build = [&](Value v, int64_t a) -> FailureOr<Value> {
    NamedAttribute axisAttr = named("axis", builder.getI64IntegerAttr(a));
    if (isLog)
      return createTyped<LogSoftmaxOp>(v.getType(), {v}, {axisAttr});
    return createTyped<SoftmaxOp>(v.getType(), {v}, {axisAttr});
  };
  // Before opset 13 the input is flattened to 2-D at `axis` and normalized
  // over the whole second dimension.
  if (legacy && *axis != rank - 1) {
    ArrayRef<int64_t> shape = type.getShape();
    FailureOr<Value> flat = reshape(
        *x, {product(shape.take_front(*axis)), product(shape.drop_front(*axis))});
    if (failed(flat))
      return failure();
    FailureOr<Value> normalized = build(*flat, 1);
    if (failed(normalized))
      return failure();
    FailureOr<Value> result = reshape(*normalized, shape);
    if (failed(result))
      return failure();
    return setOutput(0, *result);
  }
  FailureOr<Value> result = build(*x, *axis);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importLayerNorm(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0), scale = requiredInput(1);
  if (failed(x) || failed(scale))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  float epsilon = floatAttr("epsilon", 1e-5f);
  // The training outputs: mean and 1/sqrt(var + eps) with kept dims.
  if (outputUsed(1) || outputUsed(2)) {
    SmallVector<NamedAttribute> attrs{
        named("axes", builder.getDenseI64ArrayAttr(llvm::to_vector(
                          llvm::seq<int64_t>(*axis, type.getRank())))),
        named("keepdims", builder.getUnitAttr())};
    FailureOr<Value> mean = create<ReduceMeanOp>(ValueRange{*x}, attrs);
    if (failed(mean))
      return failure();
    FailureOr<Value> centered = create<SubOp>(ValueRange{*x, *mean});
    if (failed(centered))
      return failure();
    FailureOr<Value> square = create<MulOp>(ValueRange{*centered, *centered});
    if (failed(square))
      return failure();
    FailureOr<Value> variance = create<ReduceMeanOp>(ValueRange{*square}, attrs);
    if (failed(variance))
      return failure();
    FailureOr<Value> shifted = create<AddOp>(ValueRange{
        *variance, scalarConstant(type.getElementType(), epsilon)});
    if (failed(shifted))
      return failure();
    FailureOr<Value> invStdDev =
        createTyped<RsqrtOp>(shifted->getType(), {*shifted});
    if (failed(invStdDev))
      return failure();
    setOutput(1, *mean);
    setOutput(2, *invStdDev);
  }
  ArrayRef<int64_t> normalized = type.getShape().drop_front(*axis);
  auto asNormalized = [&](Value p) -> FailureOr<Value> {
    RankedTensorType pType = typeOf(p);
    if (pType.getShape() == normalized)
      return p;
    FailureOr<SmallVector<int64_t>> merged =
        broadcastShapes(pType.getShape(), normalized);
    if (failed(merged) || ArrayRef<int64_t>(*merged) != normalized)
      return nodeError() << "scale/bias shape does not broadcast to the "
                            "normalized shape";
    return createTyped<ExpandOp>(pType.clone(normalized), {p});
  };
  FailureOr<Value> s = asNormalized(*scale);
  if (failed(s))
    return failure();
  SmallVector<Value> operands{*x, *s};
  if (Value bias = input(2)) {
    FailureOr<Value> b = asNormalized(bias);
    if (failed(b))
      return failure();
    operands.push_back(*b);
  }
  FailureOr<Value> result = createTyped<LayerNormOp>(
      type, operands,
      {named("axis", builder.getI64IntegerAttr(*axis)),
       named("epsilon", builder.getF64FloatAttr(epsilon))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult Importer::importGather(const onnx::NodeProto &n) {
  FailureOr<Value> data = requiredInput(0), indices = requiredInput(1);
  if (failed(data) || failed(indices))
    return failure();
  FailureOr<int64_t> axis =
      normalizeAxis(intAttr("axis", 0), typeOf(*data).getRank());
  if (failed(axis))
    return failure();
  // Constant indices are checked here: out of range is a model error.
  DenseElementsAttr idx;
  if (matchPattern(*indices, m_Constant(&idx))) {
    int64_t dim = typeOf(*data).getDimSize(*axis);
    for (const APInt &i : idx.getValues<APInt>())
      if (i.getSExtValue() < -dim || i.getSExtValue() >= dim)
        return nodeError() << "index " << i.getSExtValue()
                           << " is out of range for dim " << *axis
                           << " of size " << dim;
  }
  FailureOr<Value> result =
      create<GatherOp>(ValueRange{*data, *indices},
                       {named("axis", builder.getI64IntegerAttr(*axis))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importReshape(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  SmallVector<int64_t> shape;
  if (opset < 5) {
    shape = intsAttr("shape").value_or(SmallVector<int64_t>{});
  } else {
    FailureOr<HostTensor> t = constantInput(1, "shape");
    if (failed(t))
      return failure();
    shape.assign(t->ints.begin(), t->ints.end());
  }
  bool allowZero = intAttr("allowzero", 0);
  int64_t inferIndex = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= type.getRank())
        return nodeError() << "shape entry #" << i
                           << " is 0 (copy) but the input has rank "
                           << type.getRank();
      d = type.getDimSize(i);
    }
    if (d == -1) {
      if (inferIndex >= 0)
        return nodeError() << "shape has more than one -1";
      inferIndex = i;
      continue;
    }
    if (d < 0)
      return nodeError() << "shape entry #" << i << " is " << d;
    if (llvm::MulOverflow(known, d, known))
      return nodeError() << "shape has more elements than an int64 counts";
  }
  int64_t total = type.getNumElements();
  if (inferIndex >= 0) {
    if (known == 0 || total % known != 0)
      return nodeError() << "cannot infer the -1 dim: " << total
                         << " elements are not a multiple of " << known;
    shape[inferIndex] = total / known;
  }
  FailureOr<Value> result = reshape(*x, shape);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importFlatten(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> shape = typeOf(*x).getShape();
  int64_t rank = shape.size();
  int64_t axis = intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return nodeError() << "axis " << axis << " is out of range for rank "
                       << rank;
  if (axis < 0)
    axis += rank;
  FailureOr<Value> result = reshape(
      *x, {product(shape.take_front(axis)), product(shape.drop_front(axis))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importTranspose(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  SmallVector<int64_t> perm = intsAttr("perm").value_or(
      llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, rank))));
  FailureOr<Value> result = create<TransposeOp>(
      ValueRange{*x}, {named("permutation", builder.getDenseI64ArrayAttr(perm))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importConcat(const onnx::NodeProto &n) {
  SmallVector<Value> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    FailureOr<Value> v = requiredInput(i);
    if (failed(v))
      return failure();
    if (!inputs.empty() &&
        typeOf(*v).getElementType() != typeOf(inputs[0]).getElementType())
      return nodeError() << "input '" << n.input(i)
                         << "' has a different element type";
    inputs.push_back(*v);
  }
  if (inputs.empty())
    return nodeError() << "needs at least one input";
  FailureOr<int64_t> axis =
      normalizeAxis(intAttr("axis", 0), typeOf(inputs[0]).getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> result = create<ConcatOp>(
      inputs, {named("axis", builder.getI64IntegerAttr(*axis))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importSplit(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  int64_t dim = type.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  if (opset >= 13 && input(1)) {
    FailureOr<HostTensor> t = constantInput(1, "split");
    if (failed(t))
      return failure();
    sizes.assign(t->ints.begin(), t->ints.end());
  } else if (auto attrSizes = intsAttr("split"); attrSizes && opset < 13) {
    sizes = *attrSizes;
  } else {
    int64_t parts = opset >= 18 ? intAttr("num_outputs", n.output_size())
                                : n.output_size();
    if (parts <= 0)
      return nodeError() << "cannot split into " << parts << " parts";
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - p * chunk)));
  }
  if (static_cast<int>(sizes.size()) != n.output_size())
    return nodeError() << sizes.size() << " split sizes for "
                       << n.output_size() << " outputs";
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (total != dim)
    return nodeError() << "split sizes sum to " << total << " but dim "
                       << *axis << " is " << dim;
  SmallVector<Type> resultTypes;
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = s;
    resultTypes.push_back(type.clone(shape));
  }
  auto split = SplitOp::create(builder, loc, resultTypes, *x,
                               builder.getI64IntegerAttr(*axis),
                               builder.getDenseI64ArrayAttr(sizes));
  if (failed(mlir::verify(split)))
    return failure();
  // Pieces of a constant are constants (shape arithmetic must stay
  // constant for the ops that read it).
  SmallVector<OpFoldResult> folded;
  if (succeeded(split->fold(folded))) {
    for (auto [i, piece] : llvm::enumerate(folded))
      setOutput(i, ConstantOp::create(builder, loc,
                                      llvm::cast<DenseElementsAttr>(
                                          llvm::cast<Attribute>(piece))));
    split->erase();
    return success();
  }
  for (int i = 0; i < n.output_size(); ++i)
    setOutput(i, split.getResult(i));
  return success();
}

LogicalResult Importer::importSlice(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (opset < 10) {
    starts = intsAttr("starts").value_or(SmallVector<int64_t>{});
    ends = intsAttr("ends").value_or(SmallVector<int64_t>{});
    axes = intsAttr("axes").value_or(SmallVector<int64_t>{});
  } else {
    auto read = [&](int index, StringRef role,
                    SmallVector<int64_t> &out) -> LogicalResult {
      if (!input(index))
        return success();
      FailureOr<HostTensor> t = constantInput(index, role);
      if (failed(t))
        return failure();
      out.assign(t->ints.begin(), t->ints.end());
      return success();
    };
    if (failed(read(1, "starts", starts)) || failed(read(2, "ends", ends)) ||
        failed(read(3, "axes", axes)) || failed(read(4, "steps", steps)))
      return failure();
  }
  if (axes.empty())
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts.size()));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || starts.size() != axes.size() ||
      starts.size() != steps.size())
    return nodeError() << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape()),
      strides(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    FailureOr<int64_t> axis = normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return nodeError() << "axis " << axes[i] << " is repeated";
    seen[*axis] = true;
    int64_t dim = type.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return nodeError() << "step 0 on axis " << axes[i];
    // Clamp as ONNX specifies: to [0, dim] for positive steps and
    // [-1, dim - 1] for negative ones.
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return step > 0 ? std::clamp<int64_t>(v, 0, dim)
                      : std::clamp<int64_t>(v, -1, dim - 1);
    };
    int64_t start = clampIndex(starts[i]), end = clampIndex(ends[i]);
    int64_t count = step > 0 ? (end - start + step - 1) / step
                             : (start - end + (-step) - 1) / (-step);
    count = std::max<int64_t>(count, 0);
    offsets[*axis] = count ? start : 0;
    sizes[*axis] = count;
    strides[*axis] = step;
  }
  FailureOr<Value> result =
      create<SliceOp>(ValueRange{*x},
                      {named("offsets", builder.getDenseI64ArrayAttr(offsets)),
                       named("sizes", builder.getDenseI64ArrayAttr(sizes)),
                       named("strides", builder.getDenseI64ArrayAttr(strides))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importExpand(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  FailureOr<HostTensor> t = constantInput(1, "shape");
  if (failed(t))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(type.getShape(), t->ints);
  if (failed(shape))
    return nodeError() << "input shape does not broadcast with the target";
  FailureOr<Value> result = createTyped<ExpandOp>(type.clone(*shape), {*x});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importSqueeze(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  std::optional<SmallVector<int64_t>> axes;
  if (opset >= 13) {
    if (input(1)) {
      FailureOr<HostTensor> t = constantInput(1, "axes");
      if (failed(t))
        return failure();
      axes = SmallVector<int64_t>(t->ints.begin(), t->ints.end());
    }
  } else {
    axes = intsAttr("axes");
  }
  SmallVector<int64_t> normalized;
  if (!axes) {
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.getDimSize(d) == 1)
        normalized.push_back(d);
  } else {
    for (int64_t a : *axes) {
      FailureOr<int64_t> axis = normalizeAxis(a, type.getRank());
      if (failed(axis))
        return failure();
      normalized.push_back(*axis);
    }
  }
  llvm::sort(normalized);
  FailureOr<Value> result = create<SqueezeOp>(
      ValueRange{*x}, {named("axes", builder.getDenseI64ArrayAttr(normalized))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importUnsqueeze(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  SmallVector<int64_t> axes;
  if (opset >= 13) {
    FailureOr<HostTensor> t = constantInput(1, "axes");
    if (failed(t))
      return failure();
    axes.assign(t->ints.begin(), t->ints.end());
  } else {
    axes = intsAttr("axes").value_or(SmallVector<int64_t>{});
  }
  int64_t outRank = type.getRank() + axes.size();
  SmallVector<int64_t> normalized;
  for (int64_t a : axes) {
    FailureOr<int64_t> axis = normalizeAxis(a, outRank);
    if (failed(axis))
      return failure();
    if (llvm::is_contained(normalized, *axis))
      return nodeError() << "axis " << a << " is repeated";
    normalized.push_back(*axis);
  }
  llvm::sort(normalized);
  FailureOr<Value> result = create<UnsqueezeOp>(
      ValueRange{*x}, {named("axes", builder.getDenseI64ArrayAttr(normalized))});
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

LogicalResult Importer::importConstant(const onnx::NodeProto &n) {
  for (const onnx::AttributeProto &a : n.attribute()) {
    StringRef name = a.name();
    if (name == "value") {
      FailureOr<DenseElementsAttr> attr = readTensor(a.t());
      if (failed(attr))
        return nodeError() << "cannot read the value tensor";
      return setOutput(0, ConstantOp::create(builder, loc, *attr));
    }
    HostTensor t;
    if (name == "value_float" || name == "value_floats") {
      t = HostTensor::zeros(name == "value_float"
                                ? SmallVector<int64_t>{}
                                : SmallVector<int64_t>{a.floats_size()},
                            Float32Type::get(ctx));
      if (name == "value_float")
        t.floats[0] = a.f();
      else
        for (int i = 0; i < a.floats_size(); ++i)
          t.floats[i] = a.floats(i);
    } else if (name == "value_int" || name == "value_ints") {
      t = HostTensor::zeros(name == "value_int"
                                ? SmallVector<int64_t>{}
                                : SmallVector<int64_t>{a.ints_size()},
                            IntegerType::get(ctx, 64));
      if (name == "value_int")
        t.ints[0] = a.i();
      else
        for (int i = 0; i < a.ints_size(); ++i)
          t.ints[i] = a.ints(i);
    } else {
      return nodeError() << "constant attribute '" << name
                         << "' is not supported";
    }
    return setOutput(0, constant(t));
  }
  return nodeError() << "has no value attribute";
}

LogicalResult Importer::importConstantOfShape(const onnx::NodeProto &n) {
  FailureOr<HostTensor> shape = constantInput(0, "shape");
  if (failed(shape))
    return failure();
  for (int64_t d : shape->ints)
    if (d < 0)
      return nodeError() << "negative dim " << d << " in shape";
  if (const onnx::AttributeProto *value = attr("value")) {
    FailureOr<DenseElementsAttr> attr = readTensor(value->t());
    if (failed(attr) || attr->getNumElements() != 1)
      return nodeError() << "value must be a one-element tensor";
    auto type = RankedTensorType::get(shape->ints, attr->getElementType());
    return setOutput(0, ConstantOp::create(builder, loc,
                                           attr->resizeSplat(type)));
  }
  HostTensor zeros = HostTensor::zeros(shape->ints, Float32Type::get(ctx));
  return setOutput(0, constant(zeros));
}

LogicalResult Importer::importRange(const onnx::NodeProto &n) {
  FailureOr<HostTensor> start = constantInput(0, "start"),
                        limit = constantInput(1, "limit"),
                        delta = constantInput(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  double s = start->asDouble(0), l = limit->asDouble(0), d = delta->asDouble(0);
  if (d == 0)
    return nodeError() << "delta is 0";
  int64_t count = std::max<int64_t>(0, std::ceil((l - s) / d));
  HostTensor t = HostTensor::zeros({count}, start->elementType);
  for (int64_t i = 0; i < count; ++i) {
    if (t.isFloat())
      t.floats[i] = s + i * d;
    else
      t.ints[i] = start->ints[0] + i * delta->ints[0];
  }
  return setOutput(0, constant(t));
}

LogicalResult Importer::importShape(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> shape = typeOf(*x).getShape();
  int64_t rank = shape.size();
  int64_t start = intAttr("start", 0), end = intAttr("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  HostTensor t = HostTensor::zeros({std::max<int64_t>(0, end - start)},
                                   IntegerType::get(ctx, 64));
  for (int64_t i = start; i < end; ++i)
    t.ints[i - start] = shape[i];
  return setOutput(0, constant(t));
}

LogicalResult Importer::importSize(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  return setOutput(0, scalarConstant(IntegerType::get(ctx, 64),
                                     typeOf(*x).getNumElements()));
}

/// A running sum along `axis` is a product by a constant triangular matrix
/// (with the axis moved last): y[j] sums x[i] for i <= j (i < j with
/// `exclusive`; i >= j, i > j with `reverse`). A matmul partitions and
/// differentiates like any other; the sums are short (token positions).
LogicalResult Importer::importCumSum(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  FailureOr<HostTensor> axisTensor = constantInput(1, "axis");
  if (failed(x) || failed(axisTensor))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t rank = type.getRank(), axis = axisTensor->ints[0];
  if (axis < -rank || axis >= rank || rank == 0)
    return nodeError() << "axis " << axis << " is out of range for rank "
                       << rank;
  if (axis < 0)
    axis += rank;
  int64_t size = type.getDimSize(axis);
  // The product holds size² elements: token positions, not whole tensors.
  constexpr int64_t kLongestAxis = 4096;
  if (size < 0 || size > kLongestAxis)
    return nodeError() << "the running sum runs along " << size
                       << " elements of axis " << axis
                       << ", as a product by a triangular matrix of size² "
                          "elements: at most "
                       << kLongestAxis << " (a static size) are supported";
  bool exclusive = intAttr("exclusive", 0), reverse = intAttr("reverse", 0);
  HostTensor sums = HostTensor::zeros({size, size}, type.getElementType());
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < size; ++j) {
      bool taken =
          reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      if (sums.isFloat())
        sums.floats[i * size + j] = taken;
      else
        sums.ints[i * size + j] = taken;
    }
  SmallVector<int64_t> permutation =
      llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(permutation[axis], permutation[rank - 1]);
  auto moveAxis = [&](Value value) -> FailureOr<Value> {
    if (axis == rank - 1)
      return value;
    return create<TransposeOp>(
        ValueRange{value},
        {named("permutation", builder.getDenseI64ArrayAttr(permutation))});
  };
  FailureOr<Value> moved = moveAxis(*x);
  if (failed(moved))
    return failure();
  FailureOr<Value> summed =
      create<MatmulOp>(ValueRange{*moved, constant(sums)});
  if (failed(summed))
    return failure();
  FailureOr<Value> result = moveAxis(*summed);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

/// Each dim d is repeated whole: [1, d] broadcast to [r, d], then one dim
/// of r·d, so that the copies follow one another as numpy's tile lays them.
LogicalResult Importer::importTile(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  FailureOr<HostTensor> repeats = constantInput(1, "repeats");
  if (failed(x) || failed(repeats))
    return failure();
  RankedTensorType type = typeOf(*x);
  if (repeats->size() != type.getRank())
    return nodeError() << "repeats has " << repeats->size()
                       << " entries for an input of rank " << type.getRank();
  SmallVector<int64_t> spread, expanded, tiled;
  for (auto [dim, times] : llvm::zip(type.getShape(), repeats->ints)) {
    if (times < 1)
      return nodeError() << "repeats must be at least 1, not " << times;
    if (times > 1) {
      spread.push_back(1);
      expanded.push_back(times);
    }
    spread.push_back(dim);
    expanded.push_back(dim);
    tiled.push_back(dim * times);
  }
  FailureOr<Value> result = reshape(*x, spread);
  if (succeeded(result))
    result = createTyped<ExpandOp>(type.clone(expanded), {*result});
  if (succeeded(result))
    result = reshape(*result, tiled);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

/// out[.., i, ..] = data[.., indices[.., i, ..], ..] along `axis`: the axis
/// moved last, every index compared with every position of it, and the one
/// match kept by a sum over a select. A select, not a one-hot product, so
/// that an infinite element elsewhere in the row gives no NaN; its gradient
/// is the select's.
LogicalResult Importer::importGatherElements(const onnx::NodeProto &n) {
  FailureOr<Value> data = requiredInput(0), indices = requiredInput(1);
  if (failed(data) || failed(indices))
    return failure();
  RankedTensorType dataType = typeOf(*data), indexType = typeOf(*indices);
  int64_t rank = dataType.getRank();
  if (rank == 0 || indexType.getRank() != rank)
    return nodeError() << "indices have rank " << indexType.getRank()
                       << " and data rank " << rank
                       << ": both need the same rank, at least 1";
  FailureOr<int64_t> axis = normalizeAxis(intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  int64_t positions = dataType.getDimSize(*axis);
  SmallVector<int64_t> reached = llvm::to_vector(indexType.getShape());
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && reached[d] > dataType.getDimSize(d))
      return nodeError() << "indices dim " << d << " (" << reached[d]
                         << ") is longer than data's ("
                         << dataType.getDimSize(d) << ")";
  DenseElementsAttr constantIndices;
  if (matchPattern(*indices, m_Constant(&constantIndices)))
    for (const APInt &i : constantIndices.getValues<APInt>())
      if (i.getSExtValue() < -positions || i.getSExtValue() >= positions)
        return nodeError() << "index " << i.getSExtValue()
                           << " is out of range for dim " << *axis
                           << " of size " << positions;
  reached[*axis] = positions;

  Type element = dataType.getElementType();
  Type summed = element.isInteger(1) ? builder.getI32Type() : element;
  FailureOr<Value> table = castTo(*data, summed);
  if (succeeded(table) && !llvm::equal(reached, dataType.getShape()))
    table = compose<SliceOp>(
        {table},
        {named("offsets",
               builder.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 0))),
         named("sizes", builder.getDenseI64ArrayAttr(reached)),
         named("strides",
               builder.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 1)))});
  SmallVector<int64_t> permutation =
      llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(permutation[*axis], permutation[rank - 1]);
  auto moveAxis = [&](FailureOr<Value> value) -> FailureOr<Value> {
    if (*axis == rank - 1)
      return value;
    return compose<TransposeOp>(
        {value},
        {named("permutation", builder.getDenseI64ArrayAttr(permutation))});
  };
  auto unsqueeze = [&](FailureOr<Value> value, int64_t at) {
    return compose<UnsqueezeOp>(
        {value}, {named("axes", builder.getDenseI64ArrayAttr({at}))});
  };
  Type indexElement = indexType.getElementType();
  HostTensor iota = HostTensor::zeros({positions}, indexElement);
  std::iota(iota.ints.begin(), iota.ints.end(), 0);
  // [.., t, 1] indices against [positions]; [.., 1, positions] rows.
  FailureOr<Value> ids = unsqueeze(moveAxis(*indices), rank);
  ids = compose<WhereOp>(
      {compose<LessOp>({ids, scalarConstant(indexElement, 0)}),
       compose<AddOp>({ids, scalarConstant(indexElement, positions)}), ids});
  FailureOr<Value> picked = compose<WhereOp>(
      {compose<EqualOp>({ids, constant(iota)}),
       unsqueeze(moveAxis(table), rank - 1), scalarConstant(summed, 0)});
  FailureOr<Value> result = moveAxis(compose<ReduceSumOp>(
      {picked}, {named("axes", builder.getDenseI64ArrayAttr({rank}))}));
  if (succeeded(result))
    result = castTo(*result, element);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

/// data[indices[n]] = updates[n] (or combined by `reduction`), as rows of
/// data seen as [R, W]: each update's row number compared with every row.
/// Without a reduction each row takes the last update that names it (as
/// ONNX's reference loop does) by a gather; a reduction combines the
/// updates of each row first, then with the row.
LogicalResult Importer::importScatterND(const onnx::NodeProto &n) {
  FailureOr<Value> data = requiredInput(0), indices = requiredInput(1),
                   updates = requiredInput(2);
  if (failed(data) || failed(indices) || failed(updates))
    return failure();
  std::string reduction = stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min")
    return nodeError() << "unknown reduction '" << reduction << "'";
  RankedTensorType dataType = typeOf(*data), indexType = typeOf(*indices);
  ArrayRef<int64_t> dataShape = dataType.getShape();
  int64_t depth = indexType.getRank() ? indexType.getShape().back() : 0;
  if (depth < 1 || depth > dataType.getRank())
    return nodeError() << "the last dim of indices (" << depth
                       << ") must be between 1 and the rank of data ("
                       << dataType.getRank() << ")";
  SmallVector<int64_t> updateShape(indexType.getShape().drop_back());
  llvm::append_range(updateShape, dataShape.drop_front(depth));
  if (!llvm::equal(updateShape, typeOf(*updates).getShape()))
    return nodeError() << "updates have the wrong shape: indices and data "
                          "ask for "
                       << updateShape.size() << " dims ending "
                       << (updateShape.empty() ? 0 : updateShape.back());
  if (reduction != "none" && dataType.getElementType().isInteger(1))
    return nodeError() << "reduction '" << reduction
                       << "' on boolean data is not supported";
  int64_t rows = product(dataShape.take_front(depth));
  int64_t width = product(dataShape.drop_front(depth));
  int64_t count = product(indexType.getShape().drop_back());
  Type indexElement = indexType.getElementType();
  auto constantOf = [&](ArrayRef<int64_t> shape, ArrayRef<int64_t> values) {
    HostTensor t = HostTensor::zeros(shape, indexElement);
    t.ints.assign(values.begin(), values.end());
    return constant(t);
  };
  SmallVector<int64_t> order(std::max(rows, count));
  std::iota(order.begin(), order.end(), 0);

  FailureOr<Value> table = reshape(*data, {rows, width});
  FailureOr<Value> sources = reshape(*updates, {count, width});
  // Row numbers [count, 1], negative indices counted from the end.
  FailureOr<Value> ids = reshape(*indices, {count, depth});
  ids = compose<WhereOp>(
      {compose<LessOp>({ids, scalarConstant(indexElement, 0)}),
       compose<AddOp>(
           {ids, constantOf({1, depth}, dataShape.take_front(depth))}),
       ids});
  SmallVector<int64_t> strides = stridesOf(dataShape.take_front(depth));
  FailureOr<Value> row = compose<ReduceSumOp>(
      {compose<MulOp>({ids, constantOf({1, depth}, strides)})},
      {named("axes", builder.getDenseI64ArrayAttr({1})),
       named("keepdims", builder.getUnitAttr())});
  FailureOr<Value> hits = compose<EqualOp>(
      {row, constantOf({1, rows}, ArrayRef(order).take_front(rows))});

  FailureOr<Value> result;
  if (reduction == "none") {
    // The last update of each row, numbered from 1 (0: none).
    SmallVector<int64_t> numbers(count);
    std::iota(numbers.begin(), numbers.end(), 1);
    FailureOr<Value> last = compose<ReduceMaxOp>(
        {compose<WhereOp>({hits, constantOf({count, 1}, numbers),
                           scalarConstant(indexElement, 0)})},
        {named("axes", builder.getDenseI64ArrayAttr({0}))});
    FailureOr<Value> written =
        compose<GreaterOp>({last, scalarConstant(indexElement, 0)});
    FailureOr<Value> source =
        compose<MaxOp>({compose<SubOp>({last, scalarConstant(indexElement, 1)}),
                        scalarConstant(indexElement, 0)});
    if (succeeded(written))
      written = reshape(*written, {rows, 1});
    result = compose<WhereOp>(
        {written,
         compose<GatherOp>({sources, source},
                           {named("axis", builder.getI64IntegerAttr(0))}),
         table});
  } else {
    // [count, rows, width]: each update where it lands, else the
    // reduction's identity (for max and min: the row itself).
    if (succeeded(hits))
      hits = reshape(*hits, {count, rows, 1});
    if (succeeded(sources))
      sources = reshape(*sources, {count, 1, width});
    Type element = dataType.getElementType();
    FailureOr<Value> otherwise = table;
    if (reduction == "add")
      otherwise = scalarConstant(element, 0);
    else if (reduction == "mul")
      otherwise = scalarConstant(element, 1);
    else if (succeeded(table))
      otherwise = reshape(*table, {1, rows, width});
    FailureOr<Value> spread = compose<WhereOp>({hits, sources, otherwise});
    auto axes = named("axes", builder.getDenseI64ArrayAttr({0}));
    if (reduction == "add")
      result = compose<AddOp>({table, compose<ReduceSumOp>({spread}, axes)});
    else if (reduction == "mul")
      result = compose<MulOp>({table, compose<ReduceProdOp>({spread}, axes)});
    else if (reduction == "max")
      result = compose<ReduceMaxOp>({spread}, axes);
    else
      result = compose<ReduceMinOp>({spread}, axes);
  }
  if (succeeded(result))
    result = reshape(*result, dataShape);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

LogicalResult Importer::importTrilu(const onnx::NodeProto &n) {
  FailureOr<Value> x = requiredInput(0);
  if (failed(x))
    return failure();
  int64_t k = 0;
  if (input(1)) {
    FailureOr<HostTensor> t = constantInput(1, "k");
    if (failed(t))
      return failure();
    k = t->ints[0];
  }
  SmallVector<NamedAttribute> attrs{
      named("diagonal", builder.getI64IntegerAttr(k))};
  if (intAttr("upper", 1))
    attrs.push_back(named("upper", builder.getUnitAttr()));
  FailureOr<Value> result = createTyped<TriluOp>(x->getType(), {*x}, attrs);
  if (failed(result))
    return failure();
  return setOutput(0, *result);
}

const llvm::StringMap<NodeHandler> &handlers() {
  static const llvm::StringMap<NodeHandler> table = [] {
    llvm::StringMap<NodeHandler> t;
    for (StringRef op : {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor",
                         "Equal", "Less", "LessOrEqual", "Greater",
                         "GreaterOrEqual"})
      t[op] = &Importer::importElementwiseBinary;
    for (StringRef op : {"Max", "Min", "Sum", "Mean"})
      t[op] = &Importer::importVariadic;
    for (StringRef op : {"Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log",
                         "Tanh", "Erf", "Relu", "Sigmoid", "Sin", "Cos", "Not"})
      t[op] = &Importer::importUnary;
    for (StringRef op :
         {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
      t[op] = &Importer::importReduce;
    t["Softmax"] = t["LogSoftmax"] = &Importer::importSoftmax;
    t["Cast"] = t["CastLike"] = &Importer::importCast;
    t["Gelu"] = &Importer::importGelu;
    t["Clip"] = &Importer::importClip;
    t["LeakyRelu"] = &Importer::importLeakyRelu;
    t["Where"] = &Importer::importWhere;
    t["Identity"] = &Importer::importIdentity;
    t["Dropout"] = &Importer::importDropout;
    t["MatMul"] = &Importer::importMatMul;
    t["Gemm"] = &Importer::importGemm;
    t["Einsum"] = &Importer::importEinsum;
    t["Conv"] = &Importer::importConv;
    t["LayerNormalization"] = &Importer::importLayerNorm;
    t["Gather"] = &Importer::importGather;
    t["Reshape"] = &Importer::importReshape;
    t["Flatten"] = &Importer::importFlatten;
    t["Transpose"] = &Importer::importTranspose;
    t["Concat"] = &Importer::importConcat;
    t["Split"] = &Importer::importSplit;
    t["Slice"] = &Importer::importSlice;
    t["Expand"] = &Importer::importExpand;
    t["Squeeze"] = &Importer::importSqueeze;
    t["Unsqueeze"] = &Importer::importUnsqueeze;
    t["Constant"] = &Importer::importConstant;
    t["ConstantOfShape"] = &Importer::importConstantOfShape;
    t["Range"] = &Importer::importRange;
    t["Shape"] = &Importer::importShape;
    t["Size"] = &Importer::importSize;
    t["Trilu"] = &Importer::importTrilu;
    t["CumSum"] = &Importer::importCumSum;
    t["Tile"] = &Importer::importTile;
    t["GatherElements"] = &Importer::importGatherElements;
    t["ScatterND"] = &Importer::importScatterND;
    return t;
  }();
  return table;
}

} // namespace weft::onnx_import
