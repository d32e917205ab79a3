//===- Semantics.cpp - Each weft op's reference semantics -----------------===//
//
// The EvaluableOpInterface of every weft op: straight loops over
// HostTensors, written for clarity and not speed. This is the definition
// the compiled code is checked against; Reference/Evaluator.cpp runs a
// function through it.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/runtime/Gelu.h"

#include <cmath>

using namespace mlir;
using namespace weft;

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
      r.floats[base + j * stride] =
          logarithm ? v - std::log(sum) : std::exp(v) / sum;
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
          int64_t pos = index[2 + d] * op.getStrides()[d] - op.getPads()[d] +
                        kIndex[d] * op.getDilations()[d];
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

/// One attention's sizes and masking: scores row by row.
struct AttentionRows {
  int64_t batch, hq, s, d, hkv, t, dv;
  double scale;
  bool causal;
  /// The mask broadcast to [B, Hq, S, T].
  std::optional<HostTensor> mask;

  AttentionRows(const HostTensor &q, const HostTensor &k, const HostTensor &v,
                const HostTensor *maskOperand, bool causal, double scale)
      : batch(q.shape[0]), hq(q.shape[1]), s(q.shape[2]), d(q.shape[3]),
        hkv(k.shape[1]), t(k.shape[2]), dv(v.shape[3]), scale(scale),
        causal(causal) {
    if (maskOperand)
      mask = mapBroadcast(
          {maskOperand}, {batch, hq, s, t}, maskOperand->elementType,
          [](ArrayRef<double> x) { return x[0]; },
          [](ArrayRef<int64_t> x) { return x[0]; });
  }
  int64_t kvHead(int64_t h) const { return h / (hq / hkv); }
  int64_t qIndex(int64_t b, int64_t h, int64_t i, int64_t e) const {
    return ((b * hq + h) * s + i) * d + e;
  }
  int64_t kIndex(int64_t b, int64_t h, int64_t j, int64_t e) const {
    return ((b * hkv + kvHead(h)) * t + j) * d + e;
  }
  int64_t vIndex(int64_t b, int64_t h, int64_t j, int64_t e) const {
    return ((b * hkv + kvHead(h)) * t + j) * dv + e;
  }
  int64_t outIndex(int64_t b, int64_t h, int64_t i, int64_t e) const {
    return ((b * hq + h) * s + i) * dv + e;
  }
  /// Query i's probabilities over the keys into `p`; returns the log of
  /// the sum of its scores' exponentials. When every key is hidden both
  /// are NaN, as PyTorch's scaled_dot_product_attention gives (the fused
  /// kernels' contract says 0 and -inf instead: docs/cuda-backend.md).
  double probabilities(const HostTensor &q, const HostTensor &k, int64_t b,
                       int64_t h, int64_t i, std::vector<double> &p) const {
    double max = -INFINITY;
    for (int64_t j = 0; j < t; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < d; ++e)
        dot += q.floats[qIndex(b, h, i, e)] * k.floats[kIndex(b, h, j, e)];
      double score = dot * scale;
      int64_t m = ((b * hq + h) * s + i) * t + j;
      if (mask) {
        if (mask->isFloat())
          score += mask->floats[m];
        else if (mask->ints[m] == 0)
          score = -INFINITY;
      }
      if (causal && j > i + t - s)
        score = -INFINITY;
      p[j] = score;
      max = std::max(max, score);
    }
    double sum = 0;
    for (int64_t j = 0; j < t; ++j)
      sum += p[j] = std::exp(p[j] - max);
    for (int64_t j = 0; j < t; ++j)
      p[j] /= sum;
    return max + std::log(sum);
  }
};

void attention(AttentionOp op, const HostTensor &q, const HostTensor &k,
               const HostTensor &v, const HostTensor *mask,
               SmallVectorImpl<HostTensor> &results) {
  AttentionRows rows(q, k, v, mask, op.getCausal(), op.getEffectiveScale());
  HostTensor out =
      HostTensor::zeros(op.getResult().getType().getShape(), q.elementType);
  HostTensor lse = HostTensor::zeros({rows.batch, rows.hq, rows.s},
                                     Float32Type::get(op.getContext()));
  std::vector<double> p(rows.t);
  for (int64_t b = 0; b < rows.batch; ++b)
    for (int64_t h = 0; h < rows.hq; ++h)
      for (int64_t i = 0; i < rows.s; ++i) {
        lse.floats[(b * rows.hq + h) * rows.s + i] =
            rows.probabilities(q, k, b, h, i, p);
        for (int64_t e = 0; e < rows.dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < rows.t; ++j)
            acc += p[j] * v.floats[rows.vIndex(b, h, j, e)];
          out.floats[rows.outIndex(b, h, i, e)] = acc;
        }
      }
  results.push_back(std::move(out));
  if (op.getSaveLogSumExp())
    results.push_back(std::move(lse));
}

/// dQ, dK, dV of an attention, row by row: P = softmax(scale q k^T + mask)
/// (causal-masked), dV += P^T dO, dS = P (dO v^T - rowsum(dO o)), dQ = scale
/// dS k, dK += scale dS^T q.
void attentionGrad(AttentionGradOp op, const HostTensor &q, const HostTensor &k,
                   const HostTensor &v, const HostTensor &o,
                   const HostTensor &dO, const HostTensor *mask,
                   SmallVectorImpl<HostTensor> &results) {
  AttentionRows rows(q, k, v, mask, op.getCausal(), op.getEffectiveScale());
  HostTensor dq = HostTensor::zeros(q.shape, q.elementType);
  HostTensor dk = HostTensor::zeros(k.shape, k.elementType);
  HostTensor dvt = HostTensor::zeros(v.shape, v.elementType);
  std::vector<double> p(rows.t);
  for (int64_t b = 0; b < rows.batch; ++b)
    for (int64_t h = 0; h < rows.hq; ++h)
      for (int64_t i = 0; i < rows.s; ++i) {
        rows.probabilities(q, k, b, h, i, p);
        double rowDot = 0;
        for (int64_t e = 0; e < rows.dv; ++e)
          rowDot += dO.floats[rows.outIndex(b, h, i, e)] *
                    o.floats[rows.outIndex(b, h, i, e)];
        for (int64_t j = 0; j < rows.t; ++j) {
          double dp = 0;
          for (int64_t e = 0; e < rows.dv; ++e) {
            double g = dO.floats[rows.outIndex(b, h, i, e)];
            dp += g * v.floats[rows.vIndex(b, h, j, e)];
            dvt.floats[rows.vIndex(b, h, j, e)] += p[j] * g;
          }
          double ds = p[j] * (dp - rowDot) * rows.scale;
          for (int64_t e = 0; e < rows.d; ++e) {
            dq.floats[rows.qIndex(b, h, i, e)] +=
                ds * k.floats[rows.kIndex(b, h, j, e)];
            dk.floats[rows.kIndex(b, h, j, e)] +=
                ds * q.floats[rows.qIndex(b, h, i, e)];
          }
        }
      }
  results.push_back(std::move(dq));
  results.push_back(std::move(dk));
  results.push_back(std::move(dvt));
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

using Results = SmallVectorImpl<HostTensor>;

/// Sets the only result.
LogicalResult one(Results &results, HostTensor value) {
  results.assign(1, std::move(value));
  return success();
}

LogicalResult unary(ArrayRef<const HostTensor *> in, Results &results,
                    FloatFn fn) {
  return one(results, mapFloat(*in[0], fn));
}

/// Applies `floatFn` or `intFn` elementwise to the broadcast operands of a
/// binary op.
LogicalResult binary(Operation *op, ArrayRef<const HostTensor *> in,
                     Results &results, double (*floatFn)(double, double),
                     int64_t (*intFn)(int64_t, int64_t)) {
  RankedTensorType type = typeOf(op->getResult(0));
  return one(results,
             mapBroadcast(
                 {in[0], in[1]}, type.getShape(), type.getElementType(),
                 [floatFn](ArrayRef<double> x) { return floatFn(x[0], x[1]); },
                 [intFn](ArrayRef<int64_t> x) { return intFn(x[0], x[1]); }));
}

/// The same elements in the result's shape.
LogicalResult reshaped(Operation *op, ArrayRef<const HostTensor *> in,
                       Results &results) {
  return one(results, withShape(*in[0], typeOf(op->getResult(0)).getShape()));
}

template <typename ReduceOp>
LogicalResult reduced(ReduceOp op, ArrayRef<const HostTensor *> in,
                      Results &results, ReduceKind kind) {
  return one(results, reduce(*in[0], op.getAxes(), op.getKeepdims(), kind));
}

} // namespace

//===----------------------------------------------------------------------===//
// Constants and generators
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::evaluate(ArrayRef<const HostTensor *>,
                                   Results &results) {
  std::optional<HostTensor> t = HostTensor::fromAttr(getValue(), INT64_MAX);
  if (!t)
    return emitError("constant is not a dense tensor");
  return one(results, std::move(*t));
}

LogicalResult RangeOp::evaluate(ArrayRef<const HostTensor *>,
                                Results &results) {
  HostTensor t =
      HostTensor::zeros(getType().getShape(), getType().getElementType());
  auto scalar = [](Attribute a) {
    if (auto f = llvm::dyn_cast<FloatAttr>(a))
      return f.getValueAsDouble();
    return static_cast<double>(llvm::cast<IntegerAttr>(a).getInt());
  };
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = scalar(getStart()) + i * scalar(getStep());
    if (t.isFloat())
      t.floats[i] = v;
    else
      t.ints[i] = static_cast<int64_t>(v);
  }
  return one(results, std::move(t));
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult SqrtOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  return unary(in, results, [](double x) { return std::sqrt(x); });
}
LogicalResult RsqrtOp::evaluate(ArrayRef<const HostTensor *> in,
                                Results &results) {
  return unary(in, results, [](double x) { return 1.0 / std::sqrt(x); });
}
LogicalResult ExpOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return unary(in, results, [](double x) { return std::exp(x); });
}
LogicalResult LogOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return unary(in, results, [](double x) { return std::log(x); });
}
LogicalResult TanhOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  return unary(in, results, [](double x) { return std::tanh(x); });
}
LogicalResult ErfOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return unary(in, results, [](double x) { return std::erf(x); });
}
LogicalResult SigmoidOp::evaluate(ArrayRef<const HostTensor *> in,
                                  Results &results) {
  return unary(in, results,
               [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}
LogicalResult SiluOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  return unary(in, results, [](double x) { return x / (1.0 + std::exp(-x)); });
}
LogicalResult ReciprocalOp::evaluate(ArrayRef<const HostTensor *> in,
                                     Results &results) {
  return unary(in, results, [](double x) { return 1.0 / x; });
}
LogicalResult SinOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return unary(in, results, [](double x) { return std::sin(x); });
}
LogicalResult CosOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return unary(in, results, [](double x) { return std::cos(x); });
}
LogicalResult GeluOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  return unary(in, results,
               getApproximate() == "tanh" ? runtime::geluTanh<double>
                                          : runtime::geluErf<double>);
}
LogicalResult GeluGradOp::evaluate(ArrayRef<const HostTensor *> in,
                                   Results &results) {
  FloatFn derivative = getApproximate() == "tanh"
                           ? runtime::geluTanhDerivative<double>
                           : runtime::geluErfDerivative<double>;
  HostTensor r = *in[0];
  for (auto [g, x] : llvm::zip_equal(r.floats, in[1]->floats))
    g *= derivative(x);
  return one(results, std::move(r));
}

LogicalResult NegOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  HostTensor r = *in[0];
  for (double &v : r.floats)
    v = -v;
  for (int64_t &v : r.ints)
    v = -v;
  return one(results, std::move(r));
}
LogicalResult AbsOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  HostTensor r = *in[0];
  for (double &v : r.floats)
    v = std::abs(v);
  for (int64_t &v : r.ints)
    v = std::abs(v);
  return one(results, std::move(r));
}
LogicalResult ReluOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  HostTensor r = *in[0];
  for (double &v : r.floats)
    v = std::max(v, 0.0);
  for (int64_t &v : r.ints)
    v = std::max<int64_t>(v, 0);
  return one(results, std::move(r));
}
LogicalResult NotOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  HostTensor r = *in[0];
  for (int64_t &v : r.ints)
    v = v == 0;
  return one(results, std::move(r));
}

LogicalResult CastOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  return one(results, castTo(*in[0], getType().getElementType()));
}

LogicalResult AddOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(
      *this, in, results, [](double a, double b) { return a + b; },
      [](int64_t a, int64_t b) { return a + b; });
}
LogicalResult SubOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(
      *this, in, results, [](double a, double b) { return a - b; },
      [](int64_t a, int64_t b) { return a - b; });
}
LogicalResult MulOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(
      *this, in, results, [](double a, double b) { return a * b; },
      [](int64_t a, int64_t b) { return a * b; });
}
LogicalResult DivOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  if (!in[1]->isFloat() && llvm::is_contained(in[1]->ints, 0))
    return emitError("integer division by zero");
  return binary(
      *this, in, results, [](double a, double b) { return a / b; },
      [](int64_t a, int64_t b) { return a / b; });
}
LogicalResult PowOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(
      *this, in, results, [](double a, double b) { return std::pow(a, b); },
      [](int64_t a, int64_t) { return a; });
}
LogicalResult MaxOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(
      *this, in, results, [](double a, double b) { return std::max(a, b); },
      [](int64_t a, int64_t b) { return std::max(a, b); });
}
LogicalResult MinOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(
      *this, in, results, [](double a, double b) { return std::min(a, b); },
      [](int64_t a, int64_t b) { return std::min(a, b); });
}
LogicalResult AndOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(*this, in, results, nullptr,
                [](int64_t a, int64_t b) -> int64_t { return a && b; });
}
LogicalResult OrOp::evaluate(ArrayRef<const HostTensor *> in,
                             Results &results) {
  return binary(*this, in, results, nullptr,
                [](int64_t a, int64_t b) -> int64_t { return a || b; });
}
LogicalResult XorOp::evaluate(ArrayRef<const HostTensor *> in,
                              Results &results) {
  return binary(
      *this, in, results, nullptr,
      [](int64_t a, int64_t b) -> int64_t { return (a != 0) != (b != 0); });
}
LogicalResult EqualOp::evaluate(ArrayRef<const HostTensor *> in,
                                Results &results) {
  return binary(
      *this, in, results, [](double a, double b) -> double { return a == b; },
      [](int64_t a, int64_t b) -> int64_t { return a == b; });
}
LogicalResult LessOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  return binary(
      *this, in, results, [](double a, double b) -> double { return a < b; },
      [](int64_t a, int64_t b) -> int64_t { return a < b; });
}
LogicalResult LessEqualOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  return binary(
      *this, in, results, [](double a, double b) -> double { return a <= b; },
      [](int64_t a, int64_t b) -> int64_t { return a <= b; });
}
LogicalResult GreaterOp::evaluate(ArrayRef<const HostTensor *> in,
                                  Results &results) {
  return binary(
      *this, in, results, [](double a, double b) -> double { return a > b; },
      [](int64_t a, int64_t b) -> int64_t { return a > b; });
}
LogicalResult GreaterEqualOp::evaluate(ArrayRef<const HostTensor *> in,
                                       Results &results) {
  return binary(
      *this, in, results, [](double a, double b) -> double { return a >= b; },
      [](int64_t a, int64_t b) -> int64_t { return a >= b; });
}
LogicalResult WhereOp::evaluate(ArrayRef<const HostTensor *> in,
                                Results &results) {
  return one(results,
             mapBroadcast(
                 {in[1], in[2], in[0]}, getType().getShape(),
                 getType().getElementType(),
                 [](ArrayRef<double> x) { return x[2] != 0 ? x[0] : x[1]; },
                 [](ArrayRef<int64_t> x) { return x[2] != 0 ? x[0] : x[1]; }));
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::evaluate(ArrayRef<const HostTensor *> in,
                                 Results &results) {
  return one(results, matmul(*in[0], *in[1], getType()));
}
LogicalResult LinearOp::evaluate(ArrayRef<const HostTensor *> in,
                                 Results &results) {
  return one(results, linear(*in[0], *in[1], getBias() ? in[2] : nullptr,
                             getTransposeWeight(), getType()));
}
LogicalResult ConvOp::evaluate(ArrayRef<const HostTensor *> in,
                               Results &results) {
  return one(results, conv(*this, *in[0], *in[1], getBias() ? in[2] : nullptr));
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  return reduced(*this, in, results, ReduceKind::Sum);
}
LogicalResult ReduceMeanOp::evaluate(ArrayRef<const HostTensor *> in,
                                     Results &results) {
  return reduced(*this, in, results, ReduceKind::Mean);
}
LogicalResult ReduceMaxOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  return reduced(*this, in, results, ReduceKind::Max);
}
LogicalResult ReduceMinOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  return reduced(*this, in, results, ReduceKind::Min);
}
LogicalResult ReduceProdOp::evaluate(ArrayRef<const HostTensor *> in,
                                     Results &results) {
  return reduced(*this, in, results, ReduceKind::Prod);
}

LogicalResult SoftmaxOp::evaluate(ArrayRef<const HostTensor *> in,
                                  Results &results) {
  return one(results, softmax(*in[0], static_cast<int64_t>(getAxis()), false));
}
LogicalResult LogSoftmaxOp::evaluate(ArrayRef<const HostTensor *> in,
                                     Results &results) {
  return one(results, softmax(*in[0], static_cast<int64_t>(getAxis()), true));
}

/// The label of each position, checked against the class count (-1: the
/// ignored label).
static FailureOr<SmallVector<int64_t>>
crossEntropyLabels(Operation *op, const HostTensor &x, const HostTensor &labels,
                   int64_t ignore) {
  int64_t classes = x.shape.back();
  SmallVector<int64_t> picked;
  for (int64_t label : labels.ints) {
    if (label == ignore) {
      picked.push_back(-1);
      continue;
    }
    if (label < 0 || label >= classes)
      return op->emitError("label ")
             << label << " is out of range for " << classes << " classes";
    picked.push_back(label);
  }
  return picked;
}

LogicalResult SoftmaxCrossEntropyOp::evaluate(ArrayRef<const HostTensor *> in,
                                              Results &results) {
  const HostTensor &x = *in[0];
  FailureOr<SmallVector<int64_t>> labels =
      crossEntropyLabels(*this, x, *in[1], getIgnoreIndex());
  if (failed(labels))
    return failure();
  HostTensor lse = softmax(x, x.shape.size() - 1, true);
  int64_t classes = x.shape.back();
  HostTensor loss =
      HostTensor::zeros(in[1]->shape, getLoss().getType().getElementType());
  HostTensor logSumExp = loss;
  for (auto [row, label] : llvm::enumerate(*labels)) {
    // log_softmax = x - lse, so lse = x - log_softmax at any class.
    logSumExp.floats[row] = x.floats[row * classes] - lse.floats[row * classes];
    if (label >= 0)
      loss.floats[row] = -lse.floats[row * classes + label];
  }
  results.assign({std::move(loss), std::move(logSumExp)});
  return success();
}

LogicalResult
SoftmaxCrossEntropyGradOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  const HostTensor &x = *in[0];
  FailureOr<SmallVector<int64_t>> labels =
      crossEntropyLabels(*this, x, *in[1], getIgnoreIndex());
  if (failed(labels))
    return failure();
  int64_t classes = x.shape.back();
  HostTensor grad = HostTensor::zeros(x.shape, x.elementType);
  for (auto [row, label] : llvm::enumerate(*labels)) {
    if (label < 0)
      continue;
    double lse = in[2]->floats[row], scale = in[3]->floats[row];
    for (int64_t v = 0; v < classes; ++v)
      grad.floats[row * classes + v] =
          (std::exp(x.floats[row * classes + v] - lse) - (v == label)) * scale;
  }
  return one(results, std::move(grad));
}

LogicalResult LayerNormOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  return one(results,
             castTo(normalize(*in[0], *in[1], getBias() ? in[2] : nullptr,
                              static_cast<int64_t>(getAxis()),
                              getEpsilon().convertToDouble(),
                              /*centered=*/true),
                    getType().getElementType()));
}
LogicalResult NormGradOp::evaluate(ArrayRef<const HostTensor *> in,
                                   Results &results) {
  const HostTensor &x = *in[0], &scale = *in[1], &g = *in[2];
  const HostTensor *addend = getAddend() ? in[3] : nullptr;
  int64_t axis = getAxis(), inner = 1;
  for (size_t d = axis; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  SmallVector<int64_t> rowShape(x.shape);
  for (size_t d = axis; d < rowShape.size(); ++d)
    rowShape[d] = 1;
  HostTensor dx = HostTensor::zeros(x.shape, x.elementType);
  HostTensor means = HostTensor::zeros(rowShape, x.elementType);
  HostTensor invStds = means;
  double epsilon = getEpsilon().convertToDouble();
  for (int64_t row = 0; inner && row < x.size() / inner; ++row) {
    const double *in = &x.floats[row * inner], *dy = &g.floats[row * inner];
    double mean = 0;
    if (getCentered()) {
      for (int64_t j = 0; j < inner; ++j)
        mean += in[j];
      mean /= inner;
    }
    double variance = 0;
    for (int64_t j = 0; j < inner; ++j)
      variance += (in[j] - mean) * (in[j] - mean);
    double inv = 1.0 / std::sqrt(variance / inner + epsilon);
    double gMean = 0, gxMean = 0;
    for (int64_t j = 0; j < inner; ++j) {
      double gHat = dy[j] * scale.floats[j];
      gMean += gHat;
      gxMean += gHat * (in[j] - mean) * inv;
    }
    gMean = getCentered() ? gMean / inner : 0.0;
    gxMean /= inner;
    for (int64_t j = 0; j < inner; ++j)
      dx.floats[row * inner + j] =
          inv * (dy[j] * scale.floats[j] - gMean -
                 (in[j] - mean) * inv * gxMean) +
          (addend ? addend->floats[row * inner + j] : 0.0);
    means.floats[row] = mean;
    invStds.floats[row] = inv;
  }
  results.assign({std::move(dx), std::move(means), std::move(invStds)});
  return success();
}

LogicalResult RmsNormOp::evaluate(ArrayRef<const HostTensor *> in,
                                  Results &results) {
  return one(results, castTo(normalize(*in[0], *in[1], nullptr,
                                       static_cast<int64_t>(getAxis()),
                                       getEpsilon().convertToDouble(),
                                       /*centered=*/false),
                             getType().getElementType()));
}

LogicalResult AttentionOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  attention(*this, *in[0], *in[1], *in[2], getMask() ? in[3] : nullptr,
            results);
  return success();
}

LogicalResult AttentionGradOp::evaluate(ArrayRef<const HostTensor *> in,
                                        Results &results) {
  attentionGrad(*this, *in[0], *in[1], *in[2], *in[3], *in[4],
                getMask() ? in[5] : nullptr, results);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::evaluate(ArrayRef<const HostTensor *> in,
                                 Results &results) {
  auto axis = static_cast<int64_t>(getAxis());
  int64_t dim = in[0]->shape[axis];
  for (int64_t i : in[1]->ints)
    if (i < -dim || i >= dim)
      return emitError("index ")
             << i << " is out of range for dim " << axis << " of size " << dim;
  return one(results, gather(*in[0], *in[1], axis));
}

LogicalResult ScatterAddOp::evaluate(ArrayRef<const HostTensor *> in,
                                     Results &results) {
  HostTensor table =
      HostTensor::zeros(getType().getShape(), getType().getElementType());
  int64_t rows = table.shape[0];
  int64_t width = rows ? table.size() / rows : 0;
  for (auto [j, row] : llvm::enumerate(in[1]->ints))
    if (row >= 0 && row < rows)
      for (int64_t k = 0; k < width; ++k)
        table.floats[row * width + k] += in[0]->floats[j * width + k];
  return one(results, std::move(table));
}

LogicalResult ReshapeOp::evaluate(ArrayRef<const HostTensor *> in,
                                  Results &results) {
  return reshaped(*this, in, results);
}
LogicalResult SqueezeOp::evaluate(ArrayRef<const HostTensor *> in,
                                  Results &results) {
  return reshaped(*this, in, results);
}
LogicalResult UnsqueezeOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  return reshaped(*this, in, results);
}
LogicalResult ExpandOp::evaluate(ArrayRef<const HostTensor *> in,
                                 Results &results) {
  return one(results,
             mapBroadcast(
                 {in[0]}, getType().getShape(), getType().getElementType(),
                 [](ArrayRef<double> x) { return x[0]; },
                 [](ArrayRef<int64_t> x) { return x[0]; }));
}
LogicalResult TransposeOp::evaluate(ArrayRef<const HostTensor *> in,
                                    Results &results) {
  return one(results, transpose(*in[0], getPermutation()));
}
LogicalResult SliceOp::evaluate(ArrayRef<const HostTensor *> in,
                                Results &results) {
  return one(results, slice(*in[0], getOffsets(), getSizes(), getStrides()));
}
LogicalResult ConcatOp::evaluate(ArrayRef<const HostTensor *> in,
                                 Results &results) {
  return one(results, concat(in, static_cast<int64_t>(getAxis())));
}
LogicalResult SplitOp::evaluate(ArrayRef<const HostTensor *> in,
                                Results &results) {
  auto axis = static_cast<int64_t>(getAxis());
  int64_t rank = in[0]->shape.size();
  int64_t offset = 0;
  results.clear();
  for (auto [result, size] : llvm::zip(getResults(), getSizes())) {
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
    offsets[axis] = offset;
    results.push_back(
        slice(*in[0], offsets, typeOf(result).getShape(), strides));
    offset += size;
  }
  return success();
}
LogicalResult TriluOp::evaluate(ArrayRef<const HostTensor *> in,
                                Results &results) {
  return one(results, trilu(*in[0], getDiagonal(), getUpper()));
}
