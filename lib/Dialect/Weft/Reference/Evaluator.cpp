//===- Evaluator.cpp - Reference semantics of the weft dialect ------------===//
//
// Straight loops over HostTensors, written for clarity and not speed: this
// is the definition the compiled code is checked against.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/Reference/Evaluator.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>

using namespace mlir;

namespace weft {
namespace {

RankedTensorType typeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

HostTensor withShape(HostTensor t, ArrayRef<int64_t> shape) {
  t.shape.assign(shape.begin(), shape.end());
  return t;
}

using FloatFn = double (*)(double);

/// Applies `fn` to every element of a float tensor.
HostTensor mapFloat(const HostTensor &x, FloatFn fn) {
  HostTensor r = x;
  for (double &v : r.floats)
    v = fn(v);
  return r;
}

double geluErf(double x) { return 0.5 * x * (1.0 + std::erf(x * M_SQRT1_2)); }
double geluTanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/// Calls `fn(base, stride)` for every 1-D line along `axis`.
template <typename Fn>
void forEachLine(ArrayRef<int64_t> shape, int64_t axis, Fn fn) {
  SmallVector<int64_t> strides = stridesOf(shape);
  int64_t outer = 1, inner = strides[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      fn(o * shape[axis] * inner + i, inner);
}

HostTensor softmax(const HostTensor &x, int64_t axis, bool logarithm) {
  HostTensor r = x;
  int64_t n = x.shape[axis];
  forEachLine(x.shape, axis, [&](int64_t base, int64_t stride) {
    double max = -INFINITY;
    for (int64_t j = 0; j < n; ++j)
      max = std::max(max, x.floats[base + j * stride]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += std::exp(x.floats[base + j * stride] - max);
    for (int64_t j = 0; j < n; ++j) {
      double v = x.floats[base + j * stride] - max;
      r.floats[base + j * stride] = logarithm ? v - std::log(sum)
                                              : std::exp(v) / sum;
    }
  });
  return r;
}

/// Layer norm (centered) or RMS norm over the trailing dims from `axis`.
HostTensor normalize(const HostTensor &x, const HostTensor &scale,
                     const HostTensor *bias, int64_t axis, double epsilon,
                     bool centered) {
  HostTensor r = x;
  int64_t inner = 1;
  for (size_t d = axis; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  for (int64_t row = 0; inner && row < x.size() / inner; ++row) {
    const double *in = &x.floats[row * inner];
    double mean = 0;
    if (centered) {
      for (int64_t j = 0; j < inner; ++j)
        mean += in[j];
      mean /= inner;
    }
    double meanSquare = 0;
    for (int64_t j = 0; j < inner; ++j)
      meanSquare += (in[j] - mean) * (in[j] - mean);
    meanSquare /= inner;
    double inv = 1.0 / std::sqrt(meanSquare + epsilon);
    for (int64_t j = 0; j < inner; ++j)
      r.floats[row * inner + j] = (in[j] - mean) * inv * scale.floats[j] +
                                  (bias ? bias->floats[j] : 0.0);
  }
  return r;
}

/// numpy matmul with batch broadcasting and 1-D promotion.
HostTensor matmul(const HostTensor &lhs, const HostTensor &rhs,
                  RankedTensorType resultType) {
  SmallVector<int64_t> l = lhs.shape, r = rhs.shape;
  if (l.size() == 1)
    l.insert(l.begin(), 1);
  if (r.size() == 1)
    r.push_back(1);
  int64_t m = l[l.size() - 2], k = l.back(), n = r.back();
  SmallVector<int64_t> batch = *broadcastShapes(
      ArrayRef<int64_t>(l).drop_back(2), ArrayRef<int64_t>(r).drop_back(2));
  // Offsets of each operand's matrix for a batch index, 0 where broadcast.
  auto batchStrides = [&](ArrayRef<int64_t> shape) {
    SmallVector<int64_t> strides(batch.size(), 0);
    ArrayRef<int64_t> own = shape.drop_back(2);
    int64_t step = shape[shape.size() - 2] * shape.back();
    for (int64_t d = own.size() - 1; d >= 0; --d) {
      int64_t bd = batch.size() - own.size() + d;
      strides[bd] = own[d] == 1 ? 0 : step;
      step *= own[d];
    }
    return strides;
  };
  SmallVector<int64_t> ls = batchStrides(l), rs = batchStrides(r);
  HostTensor out = HostTensor::zeros(resultType.getShape(), lhs.elementType);
  int64_t batches = 1;
  for (int64_t b : batch)
    batches *= b;
  SmallVector<int64_t> index(batch.size(), 0);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t lo = 0, ro = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      lo += index[d] * ls[d];
      ro += index[d] * rs[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += lhs.asDouble(lo + i * k + p) * rhs.asDouble(ro + p * n + j);
        int64_t dst = (b * m + i) * n + j;
        if (out.isFloat())
          out.floats[dst] = acc;
        else
          out.ints[dst] = static_cast<int64_t>(acc);
      }
    for (int64_t d = batch.size() - 1; d >= 0; --d) {
      if (++index[d] < batch[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

HostTensor linear(const HostTensor &x, const HostTensor &w,
                  const HostTensor *bias, bool transposed,
                  RankedTensorType resultType) {
  int64_t k = x.shape.back();
  int64_t n = transposed ? w.shape[0] : w.shape[1];
  HostTensor out = HostTensor::zeros(resultType.getShape(), x.elementType);
  for (int64_t row = 0; row < x.size() / std::max<int64_t>(k, 1); ++row)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? bias->floats[j] : 0.0;
      for (int64_t p = 0; p < k; ++p)
        acc += x.floats[row * k + p] *
               w.floats[transposed ? j * k + p : p * n + j];
      out.floats[row * n + j] = acc;
    }
  return out;
}

HostTensor conv(ConvOp op, const HostTensor &x, const HostTensor &w,
                const HostTensor *bias) {
  RankedTensorType resultType = op.getType();
  ArrayRef<int64_t> outShape = resultType.getShape();
  int64_t spatial = x.shape.size() - 2;
  int64_t group = op.getGroup();
  int64_t inPerGroup = w.shape[1], outPerGroup = w.shape[0] / group;
  HostTensor out = HostTensor::zeros(outShape, x.elementType);
  SmallVector<int64_t> xs = stridesOf(x.shape), ws = stridesOf(w.shape);
  ArrayRef<int64_t> kernel = ArrayRef<int64_t>(w.shape).drop_front(2);
  int64_t kernelSize = 1;
  for (int64_t kd : kernel)
    kernelSize *= kd;
  SmallVector<int64_t> index(outShape.size(), 0), kIndex(spatial);
  for (int64_t linearOut = 0; linearOut < out.size(); ++linearOut) {
    int64_t n = index[0], m = index[1], g = m / outPerGroup;
    double acc = bias ? bias->floats[m] : 0.0;
    for (int64_t c = 0; c < inPerGroup; ++c)
      for (int64_t kk = 0; kk < kernelSize; ++kk) {
        int64_t rem = kk, xOff = n * xs[0] + (g * inPerGroup + c) * xs[1],
                wOff = m * ws[0] + c * ws[1];
        bool inside = true;
        for (int64_t d = spatial - 1; d >= 0; --d) {
          kIndex[d] = rem % kernel[d];
          rem /= kernel[d];
        }
        for (int64_t d = 0; d < spatial && inside; ++d) {
          int64_t pos = index[2 + d] * op.getStrides()[d] -
                        op.getPads()[d] + kIndex[d] * op.getDilations()[d];
          inside = pos >= 0 && pos < x.shape[2 + d];
          xOff += pos * xs[2 + d];
          wOff += kIndex[d] * ws[2 + d];
        }
        if (inside)
          acc += x.floats[xOff] * w.floats[wOff];
      }
    out.floats[linearOut] = acc;
    for (int64_t d = outShape.size() - 1; d >= 0; --d) {
      if (++index[d] < outShape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

HostTensor attention(AttentionOp op, const HostTensor &q, const HostTensor &k,
                     const HostTensor &v, const HostTensor *mask) {
  int64_t batch = q.shape[0], hq = q.shape[1], s = q.shape[2], d = q.shape[3];
  int64_t hkv = k.shape[1], t = k.shape[2], dv = v.shape[3];
  double scale = op.getEffectiveScale();
  bool causal = op.getCausal();
  // The mask broadcast to [B, Hq, S, T].
  std::optional<HostTensor> fullMask;
  if (mask)
    fullMask = mapBroadcast(
        {mask}, {batch, hq, s, t}, mask->elementType,
        [](ArrayRef<double> x) { return x[0]; },
        [](ArrayRef<int64_t> x) { return x[0]; });
  HostTensor out = HostTensor::zeros(op.getType().getShape(), q.elementType);
  std::vector<double> scores(t);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      int64_t kvh = h / (hq / hkv);
      for (int64_t i = 0; i < s; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j < t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += q.floats[((b * hq + h) * s + i) * d + e] *
                   k.floats[((b * hkv + kvh) * t + j) * d + e];
          double score = dot * scale;
          int64_t m = ((b * hq + h) * s + i) * t + j;
          if (fullMask) {
            if (fullMask->isFloat())
              score += fullMask->floats[m];
            else if (fullMask->ints[m] == 0)
              score = -INFINITY;
          }
          if (causal && j > i + t - s)
            score = -INFINITY;
          scores[j] = score;
          max = std::max(max, score);
        }
        // A row with every key masked has no distribution: NaN, as in
        // PyTorch's scaled_dot_product_attention.
        double sum = 0;
        for (int64_t j = 0; j < t; ++j)
          sum += scores[j] = std::exp(scores[j] - max);
        for (int64_t e = 0; e < dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < t; ++j)
            acc += scores[j] / sum * v.floats[((b * hkv + kvh) * t + j) * dv + e];
          out.floats[((b * hq + h) * s + i) * dv + e] = acc;
        }
      }
    }
  return out;
}

HostTensor trilu(const HostTensor &x, int64_t diagonal, bool upper) {
  HostTensor r = x;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = upper ? col - row >= diagonal : col - row <= diagonal;
    if (keep)
      continue;
    if (r.isFloat())
      r.floats[i] = 0;
    else
      r.ints[i] = 0;
  }
  return r;
}

class Evaluator {
public:
  LogicalResult run(Operation *op);
  llvm::DenseMap<Value, HostTensor> values;
  SmallVector<HostTensor> results;

private:
  const HostTensor &get(Value v) { return values.find(v)->second; }
  HostTensor binary(Operation *op, double (*f)(double, double),
                    int64_t (*i)(int64_t, int64_t)) {
    return mapBroadcast(
        {&get(op->getOperand(0)), &get(op->getOperand(1))},
        typeOf(op->getResult(0)).getShape(),
        typeOf(op->getResult(0)).getElementType(),
        [f](ArrayRef<double> x) { return f(x[0], x[1]); },
        [i](ArrayRef<int64_t> x) { return i(x[0], x[1]); });
  }
};

LogicalResult Evaluator::run(Operation *op) {
  auto set = [&](HostTensor t) {
    values[op->getResult(0)] = std::move(t);
    return success();
  };
  auto in = [&](unsigned i) -> const HostTensor & {
    return get(op->getOperand(i));
  };
  auto unary = [&](FloatFn fn) { return set(mapFloat(in(0), fn)); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp c) -> LogicalResult {
        std::optional<HostTensor> t = HostTensor::fromAttr(c.getValue(), INT64_MAX);
        if (!t)
          return c.emitError("constant is not a dense tensor");
        return set(*t);
      })
      .Case([&](RangeOp r) {
        HostTensor t = HostTensor::zeros(r.getType().getShape(),
                                         r.getType().getElementType());
        auto scalar = [](Attribute a) {
          if (auto f = llvm::dyn_cast<FloatAttr>(a))
            return f.getValueAsDouble();
          return static_cast<double>(llvm::cast<IntegerAttr>(a).getInt());
        };
        for (int64_t i = 0; i < t.size(); ++i) {
          double v = scalar(r.getStart()) + i * scalar(r.getStep());
          if (t.isFloat())
            t.floats[i] = v;
          else
            t.ints[i] = static_cast<int64_t>(v);
        }
        return set(t);
      })
      .Case([&](SqrtOp) { return unary([](double x) { return std::sqrt(x); }); })
      .Case([&](RsqrtOp) {
        return unary([](double x) { return 1.0 / std::sqrt(x); });
      })
      .Case([&](ExpOp) { return unary([](double x) { return std::exp(x); }); })
      .Case([&](LogOp) { return unary([](double x) { return std::log(x); }); })
      .Case([&](TanhOp) { return unary([](double x) { return std::tanh(x); }); })
      .Case([&](ErfOp) { return unary([](double x) { return std::erf(x); }); })
      .Case([&](SigmoidOp) {
        return unary([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
      })
      .Case([&](SiluOp) {
        return unary([](double x) { return x / (1.0 + std::exp(-x)); });
      })
      .Case([&](ReciprocalOp) { return unary([](double x) { return 1.0 / x; }); })
      .Case([&](SinOp) { return unary([](double x) { return std::sin(x); }); })
      .Case([&](CosOp) { return unary([](double x) { return std::cos(x); }); })
      .Case([&](GeluOp g) {
        return unary(g.getApproximate() == "tanh" ? geluTanh : geluErf);
      })
      .Case<NegOp, AbsOp, ReluOp, NotOp>([&](Operation *) {
        HostTensor r = in(0);
        for (double &v : r.floats)
          v = isa<NegOp>(op) ? -v : isa<AbsOp>(op) ? std::abs(v) : std::max(v, 0.0);
        for (int64_t &v : r.ints)
          v = isa<NegOp>(op)   ? -v
              : isa<AbsOp>(op) ? std::abs(v)
              : isa<NotOp>(op) ? v == 0
                               : std::max<int64_t>(v, 0);
        return set(r);
      })
      .Case([&](CastOp c) {
        return set(castTo(in(0), c.getType().getElementType()));
      })
      .Case([&](AddOp) {
        return set(binary(op, [](double a, double b) { return a + b; },
                          [](int64_t a, int64_t b) { return a + b; }));
      })
      .Case([&](SubOp) {
        return set(binary(op, [](double a, double b) { return a - b; },
                          [](int64_t a, int64_t b) { return a - b; }));
      })
      .Case([&](MulOp) {
        return set(binary(op, [](double a, double b) { return a * b; },
                          [](int64_t a, int64_t b) { return a * b; }));
      })
      .Case([&](DivOp d) -> LogicalResult {
        if (!in(1).isFloat() && llvm::is_contained(in(1).ints, 0))
          return d.emitError("integer division by zero");
        return set(binary(op, [](double a, double b) { return a / b; },
                          [](int64_t a, int64_t b) { return a / b; }));
      })
      .Case([&](PowOp) {
        return set(binary(op, [](double a, double b) { return std::pow(a, b); },
                          [](int64_t a, int64_t) { return a; }));
      })
      .Case([&](MaxOp) {
        return set(binary(op, [](double a, double b) { return std::max(a, b); },
                          [](int64_t a, int64_t b) { return std::max(a, b); }));
      })
      .Case([&](MinOp) {
        return set(binary(op, [](double a, double b) { return std::min(a, b); },
                          [](int64_t a, int64_t b) { return std::min(a, b); }));
      })
      .Case([&](AndOp) {
        return set(binary(op, nullptr,
                          [](int64_t a, int64_t b) -> int64_t { return a && b; }));
      })
      .Case([&](OrOp) {
        return set(binary(op, nullptr,
                          [](int64_t a, int64_t b) -> int64_t { return a || b; }));
      })
      .Case([&](XorOp) {
        return set(binary(op, nullptr, [](int64_t a, int64_t b) -> int64_t {
          return (a != 0) != (b != 0);
        }));
      })
      .Case([&](EqualOp) {
        return set(binary(op, [](double a, double b) -> double { return a == b; },
                          [](int64_t a, int64_t b) -> int64_t { return a == b; }));
      })
      .Case([&](LessOp) {
        return set(binary(op, [](double a, double b) -> double { return a < b; },
                          [](int64_t a, int64_t b) -> int64_t { return a < b; }));
      })
      .Case([&](LessEqualOp) {
        return set(binary(op, [](double a, double b) -> double { return a <= b; },
                          [](int64_t a, int64_t b) -> int64_t { return a <= b; }));
      })
      .Case([&](GreaterOp) {
        return set(binary(op, [](double a, double b) -> double { return a > b; },
                          [](int64_t a, int64_t b) -> int64_t { return a > b; }));
      })
      .Case([&](GreaterEqualOp) {
        return set(binary(op, [](double a, double b) -> double { return a >= b; },
                          [](int64_t a, int64_t b) -> int64_t { return a >= b; }));
      })
      .Case([&](WhereOp w) {
        return set(mapBroadcast(
            {&in(1), &in(2), &in(0)}, w.getType().getShape(),
            w.getType().getElementType(),
            [](ArrayRef<double> x) { return x[2] != 0 ? x[0] : x[1]; },
            [](ArrayRef<int64_t> x) { return x[2] != 0 ? x[0] : x[1]; }));
      })
      .Case([&](MatmulOp m) { return set(matmul(in(0), in(1), m.getType())); })
      .Case([&](LinearOp l) {
        return set(linear(in(0), in(1), l.getBias() ? &in(2) : nullptr,
                          l.getTransposeWeight(), l.getType()));
      })
      .Case([&](ConvOp c) {
        return set(conv(c, in(0), in(1), c.getBias() ? &in(2) : nullptr));
      })
      .Case([&](ReduceSumOp r) {
        return set(reduce(in(0), r.getAxes(), r.getKeepdims(), ReduceKind::Sum));
      })
      .Case([&](ReduceMeanOp r) {
        return set(reduce(in(0), r.getAxes(), r.getKeepdims(), ReduceKind::Mean));
      })
      .Case([&](ReduceMaxOp r) {
        return set(reduce(in(0), r.getAxes(), r.getKeepdims(), ReduceKind::Max));
      })
      .Case([&](ReduceMinOp r) {
        return set(reduce(in(0), r.getAxes(), r.getKeepdims(), ReduceKind::Min));
      })
      .Case([&](ReduceProdOp r) {
        return set(reduce(in(0), r.getAxes(), r.getKeepdims(), ReduceKind::Prod));
      })
      .Case([&](SoftmaxOp s) {
        return set(softmax(in(0), static_cast<int64_t>(s.getAxis()), false));
      })
      .Case([&](LogSoftmaxOp s) {
        return set(softmax(in(0), static_cast<int64_t>(s.getAxis()), true));
      })
      .Case([&](LayerNormOp l) {
        return set(normalize(in(0), in(1), l.getBias() ? &in(2) : nullptr,
                             static_cast<int64_t>(l.getAxis()),
                             l.getEpsilon().convertToDouble(), true));
      })
      .Case([&](RmsNormOp l) {
        return set(normalize(in(0), in(1), nullptr,
                             static_cast<int64_t>(l.getAxis()),
                             l.getEpsilon().convertToDouble(), false));
      })
      .Case([&](AttentionOp a) {
        return set(attention(a, in(0), in(1), in(2),
                             a.getMask() ? &in(3) : nullptr));
      })
      .Case([&](GatherOp g) -> LogicalResult {
        auto axis = static_cast<int64_t>(g.getAxis());
        int64_t dim = in(0).shape[axis];
        for (int64_t i : in(1).ints)
          if (i < -dim || i >= dim)
            return g.emitError("index ")
                   << i << " is out of range for dim " << axis << " of size "
                   << dim;
        return set(gather(in(0), in(1), axis));
      })
      .Case<ReshapeOp, SqueezeOp, UnsqueezeOp>([&](Operation *) {
        return set(withShape(in(0), typeOf(op->getResult(0)).getShape()));
      })
      .Case([&](ExpandOp e) {
        return set(mapBroadcast(
            {&in(0)}, e.getType().getShape(), e.getType().getElementType(),
            [](ArrayRef<double> x) { return x[0]; },
            [](ArrayRef<int64_t> x) { return x[0]; }));
      })
      .Case([&](TransposeOp t) {
        return set(transpose(in(0), t.getPermutation()));
      })
      .Case([&](SliceOp s) {
        return set(slice(in(0), s.getOffsets(), s.getSizes(), s.getStrides()));
      })
      .Case([&](ConcatOp c) {
        SmallVector<const HostTensor *> inputs;
        for (Value v : c.getInputs())
          inputs.push_back(&get(v));
        return set(concat(inputs, static_cast<int64_t>(c.getAxis())));
      })
      .Case([&](SplitOp s) {
        auto axis = static_cast<int64_t>(s.getAxis());
        int64_t offset = 0;
        for (auto [result, size] : llvm::zip(s.getResults(), s.getSizes())) {
          SmallVector<int64_t> offsets(in(0).shape.size(), 0);
          SmallVector<int64_t> strides(in(0).shape.size(), 1);
          offsets[axis] = offset;
          values[result] = slice(in(0), offsets, typeOf(result).getShape(),
                                 strides);
          offset += size;
        }
        return success();
      })
      .Case([&](TriluOp t) {
        return set(trilu(in(0), t.getDiagonal(), t.getUpper()));
      })
      .Case([&](func::ReturnOp r) {
        for (Value v : r.getOperands())
          results.push_back(get(v));
        return success();
      })
      .Default([&](Operation *) {
        return op->emitError("the reference evaluator does not support '")
               << op->getName() << "'";
      });
}

} // namespace

FailureOr<SmallVector<HostTensor>>
evaluateFunction(func::FuncOp func, ArrayRef<HostTensor> arguments) {
  if (!func.getBody().hasOneBlock())
    return func.emitError("the reference evaluator needs a single-block body");
  if (arguments.size() != func.getNumArguments())
    return func.emitError("expected ")
           << func.getNumArguments() << " arguments, got "
           << arguments.size();
  Evaluator evaluator;
  for (auto [arg, value] : llvm::zip(func.getArguments(), arguments)) {
    if (typeOf(arg).getShape() != ArrayRef<int64_t>(value.shape))
      return func.emitError("argument #")
             << arg.getArgNumber() << " has the wrong shape";
    evaluator.values[arg] = value;
  }
  for (Operation &op : func.getBody().front())
    if (failed(evaluator.run(&op)))
      return failure();
  return evaluator.results;
}

} // namespace weft
