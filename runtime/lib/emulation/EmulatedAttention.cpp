//===- EmulatedAttention.cpp - Test tool: the emulated fused attention ----===//
//
// Under weftc --target=cuda-emulation an attention the CUDA target hands to
// cuDNN's fused kernels (weft-attention-to-library) runs here, on the CPU,
// with the contract of weft/runtime/Contract.h: after the checks a GPU
// would fail without (each operand inside its device allocation), the
// forward and backward of FlashAttention, query row by query row. Like the
// fused kernels it keeps no [S, T] matrix: the backward recomputes each
// row's probabilities from the forward's log-sum-exp.
//
//===----------------------------------------------------------------------===//

#include "core/Bf16.h"
#include "core/StridedView.h"
#include "emulation/DeviceAllocations.h"

#include "weft/runtime/Contract.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using weft::runtime::View;

/// A strided 4-D (or 3-D) tensor of f32 or bf16 elements.
struct Tensor {
  View view;
  int64_t rank;
  bool bf16;

  Tensor(int64_t rank, void *descriptor, bool bf16)
      : view(weft::runtime::viewOf(rank, descriptor)), rank(rank), bf16(bf16) {}
  int64_t size(int64_t d) const { return view.sizes[d]; }
  int64_t at(int64_t i0, int64_t i1, int64_t i2, int64_t i3 = 0) const {
    int64_t index = view.offset + i0 * view.strides[0] + i1 * view.strides[1] +
                    i2 * view.strides[2];
    return rank == 4 ? index + i3 * view.strides[3] : index;
  }
  float load(int64_t index) const {
    if (!bf16)
      return view.aligned[index];
    return weft::runtime::bf16ToFloat(
        reinterpret_cast<const uint16_t *>(view.aligned)[index]);
  }
  void store(int64_t index, float value) const {
    if (!bf16)
      view.aligned[index] = value;
    else
      reinterpret_cast<uint16_t *>(view.aligned)[index] =
          weft::runtime::floatToBf16(value);
  }
  /// Ends the run unless every element lies inside the device allocation
  /// holding the tensor's data, as on a GPU. Checked row by row (a row
  /// being the last dim), each distinct row once: the emulation's byte
  /// counts are the distinct bytes read and written.
  void check(const char *name, bool isWrite, bool anyStrides = false) const {
    int64_t bytes = bf16 ? 2 : 4;
    auto base = reinterpret_cast<uintptr_t>(view.aligned);
    int64_t last = rank - 1;
    // The contract cuDNN's kernels need (weft/runtime/Contract.h).
    bool negative = false;
    for (int64_t d = 0; d < rank; ++d)
      negative |= view.strides[d] < 0;
    if (negative || (!anyStrides && view.strides[last] != 1)) {
      fprintf(stderr,
              "error: emulated fused attention operand %s has strides the "
              "kernels cannot read (%s)\n",
              name, negative ? "a negative one" : "a last stride other than 1");
      fflush(nullptr);
      std::_Exit(1);
    }
    // A row: its elements one by one unless they are adjacent.
    int64_t rowElements = view.strides[last] == 0 ? 1 : view.sizes[last];
    bool contiguous = view.strides[last] <= 1;
    weft::runtime::forEachRow(rank, view, last, [&](int64_t start) {
      if (contiguous)
        weft::runtime::emulation::checkAccess(base, base + start * bytes,
                                              rowElements * bytes, isWrite,
                                              "fused attention operand", name);
      else
        for (int64_t e = 0; e < rowElements; ++e)
          weft::runtime::emulation::checkAccess(
              base, base + (start + e * view.strides[last]) * bytes, bytes,
              isWrite, "fused attention operand", name);
    });
  }
};

/// One attention's sizes and the scores of its query rows.
struct Attention {
  Tensor q, k, v, bias;
  int64_t batch, hq, s, d, hkv, t, dv;
  bool causal, biased;
  float scale;

  Attention(Tensor q, Tensor k, Tensor v, Tensor bias, int64_t flags,
            double scale, bool backward)
      : q(q), k(k), v(v), bias(bias), batch(q.size(0)), hq(q.size(1)),
        s(q.size(2)), d(q.size(3)), hkv(k.size(1)), t(k.size(2)), dv(v.size(3)),
        causal(flags & weft::runtime::kAttentionCausal),
        biased(flags & weft::runtime::kAttentionBias), scale(float(scale)) {
    q.check("q", false);
    k.check("k", false);
    v.check("v", false);
    if (biased)
      bias.check("bias", false, /*anyStrides=*/true);
    // What cuDNN refuses on a GPU fails here too, with the same words.
    if (const char *why = weft::runtime::fusedAttentionRefusal(
            hq, hkv, s, t, d, dv, flags, backward)) {
      fprintf(stderr,
              "error: emulated fused attention %s [%lld,%lld,%lld,%lld,%lld] "
              "with Hkv=%lld, Dv=%lld: the fused kernels refuse it: %s\n",
              backward ? "backward" : "forward", (long long)batch,
              (long long)hq, (long long)s, (long long)t, (long long)d,
              (long long)hkv, (long long)dv, why);
      fflush(nullptr);
      std::_Exit(1);
    }
  }
  int64_t kvHead(int64_t h) const { return h / (hq / hkv); }
  /// Query i's scores over the keys (-inf where hidden) into `scores`.
  void scoreRow(int64_t b, int64_t h, int64_t i,
                std::vector<float> &scores) const {
    int64_t g = kvHead(h);
    for (int64_t j = 0; j < t; ++j) {
      if (causal && j > i + t - s) {
        scores[j] = -INFINITY;
        continue;
      }
      float dot = 0;
      for (int64_t e = 0; e < d; ++e)
        dot += q.load(q.at(b, h, i, e)) * k.load(k.at(b, g, j, e));
      scores[j] = dot * scale + (biased ? bias.load(bias.at(b, h, i, j)) : 0);
    }
  }
};

void forward(Attention a, Tensor out, Tensor lse) {
  out.check("out", true);
  lse.check("log_sum_exp", true);
  std::vector<float> scores(a.t), row(a.dv);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.hq; ++h)
      for (int64_t i = 0; i < a.s; ++i) {
        a.scoreRow(b, h, i, scores);
        float max = -INFINITY;
        for (float score : scores)
          max = std::max(max, score);
        std::fill(row.begin(), row.end(), 0.0f);
        float logSumExp = -INFINITY;
        if (max != -INFINITY) {
          float sum = 0;
          for (float score : scores)
            sum += std::exp(score - max);
          logSumExp = max + std::log(sum);
          int64_t g = a.kvHead(h);
          for (int64_t j = 0; j < a.t; ++j) {
            float p = std::exp(scores[j] - logSumExp);
            if (p == 0)
              continue;
            for (int64_t e = 0; e < a.dv; ++e)
              row[e] += p * a.v.load(a.v.at(b, g, j, e));
          }
        }
        for (int64_t e = 0; e < a.dv; ++e)
          out.store(out.at(b, h, i, e), row[e]);
        lse.store(lse.at(b, h, i), logSumExp);
      }
}

void backward(Attention a, Tensor out, Tensor outGrad, Tensor lse, Tensor qGrad,
              Tensor kGrad, Tensor vGrad) {
  out.check("out", false);
  outGrad.check("out_grad", false);
  lse.check("log_sum_exp", false);
  qGrad.check("q_grad", true);
  kGrad.check("k_grad", true);
  vGrad.check("v_grad", true);
  // The key/value gradients sum over queries and grouped heads: in f32
  // here, rounded once at the end.
  std::vector<float> dk(a.batch * a.hkv * a.t * a.d, 0.0f),
      dv(a.batch * a.hkv * a.t * a.dv, 0.0f);
  auto kvIndex = [&](int64_t b, int64_t g, int64_t j, int64_t e,
                     int64_t width) {
    return ((b * a.hkv + g) * a.t + j) * width + e;
  };
  std::vector<float> scores(a.t), dq(a.d);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.hq; ++h)
      for (int64_t i = 0; i < a.s; ++i) {
        std::fill(dq.begin(), dq.end(), 0.0f);
        float logSumExp = lse.load(lse.at(b, h, i));
        if (logSumExp != -INFINITY) {
          a.scoreRow(b, h, i, scores);
          float rowDot = 0; // D_i = dO_i . O_i
          for (int64_t e = 0; e < a.dv; ++e)
            rowDot += outGrad.load(outGrad.at(b, h, i, e)) *
                      out.load(out.at(b, h, i, e));
          int64_t g = a.kvHead(h);
          for (int64_t j = 0; j < a.t; ++j) {
            float p = std::exp(scores[j] - logSumExp);
            if (p == 0)
              continue;
            float dp = 0;
            for (int64_t e = 0; e < a.dv; ++e) {
              float dO = outGrad.load(outGrad.at(b, h, i, e));
              dp += dO * a.v.load(a.v.at(b, g, j, e));
              dv[kvIndex(b, g, j, e, a.dv)] += p * dO;
            }
            float ds = p * (dp - rowDot) * a.scale;
            for (int64_t e = 0; e < a.d; ++e) {
              dq[e] += ds * a.k.load(a.k.at(b, g, j, e));
              dk[kvIndex(b, g, j, e, a.d)] += ds * a.q.load(a.q.at(b, h, i, e));
            }
          }
        }
        for (int64_t e = 0; e < a.d; ++e)
          qGrad.store(qGrad.at(b, h, i, e), dq[e]);
      }
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t g = 0; g < a.hkv; ++g)
      for (int64_t j = 0; j < a.t; ++j) {
        for (int64_t e = 0; e < a.d; ++e)
          kGrad.store(kGrad.at(b, g, j, e), dk[kvIndex(b, g, j, e, a.d)]);
        for (int64_t e = 0; e < a.dv; ++e)
          vGrad.store(vGrad.at(b, g, j, e), dv[kvIndex(b, g, j, e, a.dv)]);
      }
}

} // namespace

/// The emulation's fused attention (weft-attention-to-library): the CPU
/// reference above, after the checks a GPU would fail without.
extern "C" void weft_emulated_attention_forward_bf16(
    int64_t rq, void *q, int64_t rk, void *k, int64_t rv, void *v, int64_t rb,
    void *bias, int64_t ro, void *out, int64_t rl, void *lse, int64_t flags,
    double scale) {
  forward(Attention(Tensor(rq, q, true), Tensor(rk, k, true),
                    Tensor(rv, v, true), Tensor(rb, bias, true), flags, scale,
                    /*backward=*/false),
          Tensor(ro, out, true), Tensor(rl, lse, false));
}

extern "C" void weft_emulated_attention_backward_bf16(
    int64_t rq, void *q, int64_t rk, void *k, int64_t rv, void *v, int64_t rb,
    void *bias, int64_t ro, void *out, int64_t rdo, void *outGrad, int64_t rl,
    void *lse, int64_t rdq, void *qGrad, int64_t rdk, void *kGrad, int64_t rdv,
    void *vGrad, int64_t flags, double scale) {
  backward(Attention(Tensor(rq, q, true), Tensor(rk, k, true),
                     Tensor(rv, v, true), Tensor(rb, bias, true), flags, scale,
                     /*backward=*/true),
           Tensor(ro, out, true), Tensor(rdo, outGrad, true),
           Tensor(rl, lse, false), Tensor(rdq, qGrad, true),
           Tensor(rdk, kGrad, true), Tensor(rdv, vGrad, true));
}
