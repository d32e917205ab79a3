//===- HostTensor.cpp - Small tensors evaluated at compile time -----------===//

#include "weft/Dialect/Weft/IR/HostTensor.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
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

std::optional<HostTensor> HostTensor::fromAttr(Attribute attr,
                                               int64_t maxElements) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = llvm::cast<RankedTensorType>(dense.getType());
  if (!type.hasStaticShape() || type.getNumElements() > maxElements)
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

HostTensor reduce(const HostTensor &input, ArrayRef<int64_t> axes,
                  bool keepdims, ReduceKind kind) {
  int64_t rank = input.shape.size();
  SmallVector<int64_t> keptShape, resultShape;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(axes, d);
    keptShape.push_back(reduced ? 1 : input.shape[d]);
    if (!reduced || keepdims)
      resultShape.push_back(reduced ? 1 : input.shape[d]);
  }
  double init = kind == ReduceKind::Max   ? -INFINITY
                : kind == ReduceKind::Min ? INFINITY
                : kind == ReduceKind::Prod ? 1.0
                                           : 0.0;
  std::vector<double> acc(numElements(keptShape), init);
  SmallVector<int64_t> keptStrides = stridesOf(keptShape);
  SmallVector<int64_t> index(rank, 0);
  int64_t reducedCount = 1;
  for (int64_t a : axes)
    reducedCount *= input.shape[a];
  for (int64_t linear = 0, e = input.size(); linear < e; ++linear) {
    int64_t out = 0;
    for (int64_t d = 0; d < rank; ++d)
      out += (keptShape[d] == 1 ? 0 : index[d]) * keptStrides[d];
    double v = input.asDouble(linear);
    double &a = acc[out];
    switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      a += v;
      break;
    case ReduceKind::Max:
      a = std::max(a, v);
      break;
    case ReduceKind::Min:
      a = std::min(a, v);
      break;
    case ReduceKind::Prod:
      a *= v;
      break;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < input.shape[d])
        break;
      index[d] = 0;
    }
  }
  HostTensor result = HostTensor::zeros(resultShape, input.elementType);
  for (size_t i = 0; i < acc.size(); ++i) {
    double v = kind == ReduceKind::Mean ? acc[i] / reducedCount : acc[i];
    if (result.isFloat())
      result.floats[i] = v;
    else
      result.ints[i] = static_cast<int64_t>(v);
  }
  return result;
}

HostTensor transpose(const HostTensor &input, ArrayRef<int64_t> permutation) {
  SmallVector<int64_t> strides = stridesOf(input.shape);
  SmallVector<int64_t> shape;
  for (int64_t p : permutation)
    shape.push_back(input.shape[p]);
  return gatherElements(input, shape, [&](ArrayRef<int64_t> idx) {
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      src += idx[d] * strides[permutation[d]];
    return src;
  });
}

HostTensor slice(const HostTensor &input, ArrayRef<int64_t> offsets,
                 ArrayRef<int64_t> sizes, ArrayRef<int64_t> steps) {
  SmallVector<int64_t> strides = stridesOf(input.shape);
  return gatherElements(input, sizes, [&](ArrayRef<int64_t> idx) {
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      src += (offsets[d] + idx[d] * steps[d]) * strides[d];
    return src;
  });
}

HostTensor concat(ArrayRef<const HostTensor *> inputs, int64_t axis) {
  SmallVector<int64_t> shape = inputs.front()->shape;
  shape[axis] = 0;
  for (const HostTensor *in : inputs)
    shape[axis] += in->shape[axis];
  HostTensor result = HostTensor::zeros(shape, inputs.front()->elementType);
  // Each input contributes one contiguous block per index of the dims
  // before `axis`.
  int64_t outer = numElements(ArrayRef<int64_t>(shape).take_front(axis));
  int64_t pos = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor *in : inputs) {
      int64_t block = outer ? in->size() / outer : 0;
      for (int64_t j = 0; j < block; ++j, ++pos) {
        if (result.isFloat())
          result.floats[pos] = in->floats[o * block + j];
        else
          result.ints[pos] = in->ints[o * block + j];
      }
    }
  }
  return result;
}

HostTensor gather(const HostTensor &data, const HostTensor &indices,
                  int64_t axis) {
  int64_t dim = data.shape[axis];
  SmallVector<int64_t> strides = stridesOf(data.shape);
  SmallVector<int64_t> indexStrides = stridesOf(indices.shape);
  int64_t indexRank = indices.shape.size();
  SmallVector<int64_t> shape(data.shape.begin(), data.shape.begin() + axis);
  shape.append(indices.shape.begin(), indices.shape.end());
  shape.append(data.shape.begin() + axis + 1, data.shape.end());
  return gatherElements(data, shape, [&](ArrayRef<int64_t> pos) {
    int64_t src = 0;
    for (int64_t d = 0; d < axis; ++d)
      src += pos[d] * strides[d];
    int64_t flat = 0;
    for (int64_t d = 0; d < indexRank; ++d)
      flat += pos[axis + d] * indexStrides[d];
    int64_t i = indices.ints[flat];
    src += (i < 0 ? i + dim : i) * strides[axis];
    for (size_t d = axis + 1; d < data.shape.size(); ++d)
      src += pos[d - 1 + indexRank] * strides[d];
    return src;
  });
}

} // namespace weft
