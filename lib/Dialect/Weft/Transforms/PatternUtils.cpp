//===- PatternUtils.cpp - Matching helpers for Weft rewrites --------------===//

#include "PatternUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include <cmath>

using namespace mlir;

namespace weft {

std::optional<double> getSplatConstant(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  if (llvm::isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (attr.getElementType().isInteger(1))
    return static_cast<double>(attr.getSplatValue<APInt>().getZExtValue());
  return static_cast<double>(attr.getSplatValue<APInt>().getSExtValue());
}

bool isSplatConstant(Value v, double expected, double tolerance) {
  std::optional<double> value = getSplatConstant(v);
  return value && std::abs(*value - expected) <= tolerance * std::abs(expected);
}

Value matchScaledBy(Value v, double &factor) {
  if (auto mul = v.getDefiningOp<MulOp>()) {
    if (auto c = getSplatConstant(mul.getRhs())) {
      factor = *c;
      return mul.getLhs();
    }
    if (auto c = getSplatConstant(mul.getLhs())) {
      factor = *c;
      return mul.getRhs();
    }
  }
  if (auto div = v.getDefiningOp<DivOp>())
    if (auto c = getSplatConstant(div.getRhs()); c && *c != 0) {
      factor = 1.0 / *c;
      return div.getLhs();
    }
  return nullptr;
}

std::optional<int64_t> trailingMeanAxis(ReduceMeanOp reduce) {
  if (!reduce || !reduce.getKeepdims())
    return std::nullopt;
  int64_t rank = reduce.getInput().getType().getRank();
  ArrayRef<int64_t> axes = reduce.getAxes();
  if (axes.back() != rank - 1 ||
      axes.front() != rank - static_cast<int64_t>(axes.size()))
    return std::nullopt;
  return axes.front();
}

bool isSquareOf(Value v, Value x) {
  if (auto mul = v.getDefiningOp<MulOp>())
    return mul.getLhs() == x && mul.getRhs() == x;
  if (auto pow = v.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isSplatConstant(pow.getRhs(), 2.0, 0);
  return false;
}

Value matchRsqrt(Value v) {
  if (auto rsqrt = v.getDefiningOp<RsqrtOp>())
    return rsqrt.getInput();
  if (auto reciprocal = v.getDefiningOp<ReciprocalOp>())
    if (auto sqrt = reciprocal.getInput().getDefiningOp<SqrtOp>())
      return sqrt.getInput();
  if (auto div = v.getDefiningOp<DivOp>())
    if (isSplatConstant(div.getLhs(), 1.0, 0))
      if (auto sqrt = div.getRhs().getDefiningOp<SqrtOp>())
        return sqrt.getInput();
  return nullptr;
}

/// Returns `param` shaped as `normalized` (reshaping away leading unit dims),
/// or null if it does not hold exactly one value per normalized position.
Value asNormalizedParam(OpBuilder &rewriter, Location loc, Value param,
                        ArrayRef<int64_t> normalized) {
  auto type = llvm::cast<RankedTensorType>(param.getType());
  ArrayRef<int64_t> shape = type.getShape();
  while (!shape.empty() && shape.front() == 1 &&
         shape.size() > normalized.size())
    shape = shape.drop_front();
  if (shape != normalized)
    return nullptr;
  if (type.getShape() == normalized)
    return param;
  return ReshapeOp::create(
      rewriter, loc, RankedTensorType::get(normalized, type.getElementType()),
      param);
}

} // namespace weft
