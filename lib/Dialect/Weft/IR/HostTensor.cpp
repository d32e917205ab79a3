//===- HostTensor.cpp - Small tensors evaluated at compile time -----------===//

#include "weft/Dialect/Weft/IR/HostTensor.h"

#include "llvm/ADT/APFloat.h"
#include <cmath>

using namespace mlir;

namespace weft {

int64_t HostTensor::size() const {
  return isFloat() ? static_cast<int64_t>(floats.size())
                   : static_cast<int64_t>(ints.size());
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

static int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

HostTensor HostTensor::zeros(ArrayRef<int64_t> shape, Type elementType) {
  HostTensor t;
  t.shape.assign(shape.begin(), shape.end());
  t.elementType = elementType;
  if (t.isFloat())
    t.floats.assign(numElements(shape), 0.0);
  else
    t.ints.assign(numElements(shape), 0);
  return t;
}

std::optional<HostTensor> HostTensor::fromAttr(Attribute attr) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = llvm::cast<RankedTensorType>(dense.getType());
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldedElements)
    return std::nullopt;
  HostTensor t = zeros(type.getShape(), type.getElementType());
  if (t.isFloat()) {
    if (dense.isSplat()) {
      double v = dense.getSplatValue<APFloat>().convertToDouble();
      std::fill(t.floats.begin(), t.floats.end(), v);
    } else {
      int64_t i = 0;
      for (const APFloat &v : dense.getValues<APFloat>())
        t.floats[i++] = v.convertToDouble();
    }
    return t;
  }
  auto intType = llvm::dyn_cast<IntegerType>(type.getElementType());
  if (!intType)
    return std::nullopt;
  bool isBool = intType.getWidth() == 1;
  auto read = [&](const APInt &v) {
    return isBool ? static_cast<int64_t>(v.getZExtValue()) : v.getSExtValue();
  };
  if (dense.isSplat()) {
    std::fill(t.ints.begin(), t.ints.end(), read(dense.getSplatValue<APInt>()));
  } else {
    int64_t i = 0;
    for (const APInt &v : dense.getValues<APInt>())
      t.ints[i++] = read(v);
  }
  return t;
}

RankedTensorType HostTensor::type() const {
  return RankedTensorType::get(shape, elementType);
}

DenseElementsAttr HostTensor::toAttr() const {
  if (auto floatType = llvm::dyn_cast<FloatType>(elementType)) {
    SmallVector<APFloat> values;
    values.reserve(floats.size());
    for (double v : floats) {
      APFloat f(v);
      bool losesInfo;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type(), values);
  }
  unsigned width = elementType.getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  values.reserve(ints.size());
  for (int64_t v : ints)
    values.push_back(width == 1 ? APInt(1, v != 0)
                                : APInt(width, v, /*isSigned=*/true,
                                        /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type(), values);
}

HostTensor mapBroadcast(ArrayRef<const HostTensor *> inputs,
                        ArrayRef<int64_t> resultShape, Type resultElementType,
                        const std::function<double(ArrayRef<double>)> &floatFn,
                        const std::function<int64_t(ArrayRef<int64_t>)> &intFn) {
  HostTensor result = HostTensor::zeros(resultShape, resultElementType);
  int64_t rank = resultShape.size();
  // Strides of each input in the result's index space; 0 where broadcast.
  SmallVector<SmallVector<int64_t>> inputStrides;
  for (const HostTensor *in : inputs) {
    SmallVector<int64_t> own = stridesOf(in->shape);
    SmallVector<int64_t> strides(rank, 0);
    int64_t offset = rank - in->shape.size();
    for (size_t d = 0; d < in->shape.size(); ++d)
      strides[offset + d] = in->shape[d] == 1 ? 0 : own[d];
    inputStrides.push_back(strides);
  }
  bool computeInFloat = inputs.front()->isFloat();
  SmallVector<int64_t> index(rank, 0);
  SmallVector<double> floatArgs(inputs.size());
  SmallVector<int64_t> intArgs(inputs.size());
  int64_t total = numElements(resultShape);
  for (int64_t linear = 0; linear < total; ++linear) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      int64_t pos = 0;
      for (int64_t d = 0; d < rank; ++d)
        pos += index[d] * inputStrides[k][d];
      if (computeInFloat)
        floatArgs[k] = inputs[k]->asDouble(pos);
      else
        intArgs[k] = inputs[k]->asInt(pos);
    }
    if (computeInFloat) {
      double v = floatFn(floatArgs);
      if (result.isFloat())
        result.floats[linear] = v;
      else
        result.ints[linear] = static_cast<int64_t>(v);
    } else {
      int64_t v = intFn(intArgs);
      if (result.isFloat())
        result.floats[linear] = static_cast<double>(v);
      else
        result.ints[linear] = v;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < resultShape[d])
        break;
      index[d] = 0;
    }
  }
  return result;
}

HostTensor
gatherElements(const HostTensor &input, ArrayRef<int64_t> resultShape,
               const std::function<int64_t(ArrayRef<int64_t>)> &sourceIndex) {
  HostTensor result = HostTensor::zeros(resultShape, input.elementType);
  int64_t rank = resultShape.size();
  SmallVector<int64_t> index(rank, 0);
  int64_t total = numElements(resultShape);
  for (int64_t linear = 0; linear < total; ++linear) {
    int64_t src = sourceIndex(index);
    if (result.isFloat())
      result.floats[linear] = input.floats[src];
    else
      result.ints[linear] = input.ints[src];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < resultShape[d])
        break;
      index[d] = 0;
    }
  }
  return result;
}

HostTensor castTo(const HostTensor &input, Type elementType) {
  HostTensor result = HostTensor::zeros(input.shape, elementType);
  bool toBool = elementType.isInteger(1);
  for (int64_t i = 0, e = input.size(); i < e; ++i) {
    if (result.isFloat())
      result.floats[i] = input.asDouble(i);
    else if (toBool)
      result.ints[i] = input.asDouble(i) != 0.0;
    else if (input.isFloat())
      result.ints[i] = static_cast<int64_t>(std::trunc(input.floats[i]));
    else
      result.ints[i] = input.ints[i];
  }
  // Narrow integer types wrap like a C cast.
  if (!result.isFloat() && !toBool && elementType.getIntOrFloatBitWidth() == 32)
    for (int64_t &v : result.ints)
      v = static_cast<int32_t>(v);
  return result;
}

} // namespace weft
