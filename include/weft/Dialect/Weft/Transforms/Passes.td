//===- Passes.td - Weft transformation passes --------------*- tablegen -*-===//

#ifndef WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_TD
#define WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def WeftFuseLayerNorm : Pass<"weft-fuse-layer-norm"> {
  let summary = "Replace decomposed layer normalization by weft.layer_norm";
  let description = [{
    Recognizes the forms exporters emit for layer normalization over the last
    dimension and replaces each by one `weft.layer_norm`:
    - PyTorch: `d = x - mean(x)`, `d / sqrt(mean(d^2) + eps)`, then optional
      `* gamma` and `+ beta` (the square as `pow(d, 2)` or `d * d`; the
      division also as `d * rsqrt(...)` or `d * reciprocal(sqrt(...))`);
    - TensorFlow/Keras: `m = gamma * reciprocal(sqrt(var + eps))`,
      `x * m + (beta - mean * m)`.
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftFuseRmsNorm : Pass<"weft-fuse-rms-norm"> {
  let summary = "Replace decomposed RMS normalization by weft.rms_norm";
  let description = [{
    Recognizes `x * rsqrt(mean(x^2) + eps) * w` (and its forms with
    `sqrt`+`div` or `reciprocal`) over the last dimension, as Llama-style
    exports write RMSNorm.
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftFuseGelu : Pass<"weft-fuse-gelu"> {
  let summary = "Replace decomposed GELU by weft.gelu";
  let description = [{
    Recognizes `0.5 * x * (1 + erf(x / sqrt(2)))` and
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))` with the
    factors in any order and association, and constants within a relative
    1e-4 of their exact values.
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftFuseAttention : Pass<"weft-fuse-attention"> {
  let summary = "Replace matmul-scale-mask-softmax-matmul by weft.attention";
  let description = [{
    Recognizes `softmax(q * k^T * scale (+ mask)) * v` over 3-D or 4-D
    operands: the scale as a multiply or divide of the scores, of `q`, or of
    both `q` and `k`; an additive mask, or a boolean mask applied with
    `where(mask, scores, fill)` with `fill <= -1e4` (negated when the operands
    are swapped). The mask may also be applied to a `[B, H, S, T]` view of
    3-D `[B*H, S, T]` scores between two reshapes (as BART exports). A
    constant boolean mask equal to the causal pattern becomes the `causal`
    flag. The multiplicative form `s * m - c * (1 - m)` is left
    alone: it equals a masked softmax only when `m` is 0/1, which is not
    known for a graph input.
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

#endif // WEFT_DIALECT_WEFT_TRANSFORMS_PASSES_TD
