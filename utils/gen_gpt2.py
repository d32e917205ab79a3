#!/usr/bin/env python3
"""Generate a GPT-2-style ONNX model laid out as PyTorch's exporter emits it.

The graph takes ``input_ids`` (int64 [batch, seq]) and returns ``logits``
(float32 [batch, seq, vocab]).  It is written with the idioms the Weft importer
and its fusion passes must recognise:

* token embedding ``wte.weight`` [vocab, hidden] and learned position embedding
  ``wpe.weight`` [seq, hidden], both read with Gather (position ids come from a
  Range followed by Unsqueeze);
* per layer, pre-LayerNorm decomposed as PyTorch emits it below opset 17
  (ReduceMean -> Sub -> Pow -> ReduceMean -> Add(eps) -> Sqrt -> Div -> Mul
  -> Add);
* attention with a fused QKV MatMul + bias Add, Split (split sizes as an input,
  opset >= 13), Reshape to [b, s, heads, hd], Transpose (k directly to
  [b, heads, hd, s]), MatMul, Div by sqrt(hd), causal mask as
  ``Where(tril, scores, float32 min)``, Softmax(axis=-1), MatMul with v,
  Transpose + Reshape back, output projection MatMul + bias, residual Add;
* MLP: MatMul [h, 4h] + bias, GELU decomposed (erf form
  Div -> Erf -> Add -> Mul -> Mul, or the tanh approximation), MatMul [4h, h]
  + bias, residual Add;
* final LayerNorm and an LM head that multiplies by ``Transpose(wte.weight)``
  (tied weights).

Node names follow the exporter's scopes (``/h.0/attn/MatMul``, outputs
``/h.0/attn/MatMul_output_0``); initializer names follow the Hugging Face
module names (``h.0.attn.c_attn.weight``).  Shape operands are int64
Constant nodes.  With ``--symbolic`` the batch and sequence dimensions are the
dim_params ``batch`` and ``seq``: the position ids then come from
``Shape(input_ids)``, the [seq, seq] causal mask constant is sliced to the
actual length, and the Reshape targets use 0 ("copy this dimension") for batch
and seq.  The graphs for opsets 13 to 17 are identical apart from the opset
import (ReduceMean keeps its ``axes`` attribute up to opset 17).

Weights are drawn from ``numpy.random.RandomState(--seed)`` in initializer
order (wte, wpe, each layer's tensors, ln_f) as N(0, 0.02); LayerNorm gammas
are 1 + N(0, 0.02).  ``--zero-weights`` makes every weight zero without
drawing any random numbers.  ``--external-data`` stores every float
initializer in the side file ``<out>.weights`` (ONNX external data, each tensor
at a 64-byte aligned offset).  That file is written sparsely (seek +
truncate), so with ``--zero-weights`` even GPT-2-XL costs neither disk space
nor time, and no large array is ever built:

    python3 utils/gen_gpt2.py --layers 48 --hidden 1600 --heads 25 \\
        --vocab 50257 --seq 1024 --external-data --zero-weights \\
        -o /tmp/xl/model.onnx

``--check`` runs the model with onnxruntime and compares the logits against an
independent numpy implementation of the same forward pass (max abs error must
be below 1e-4); use it for small models only.

Demo model (the defaults):
    python3 utils/gen_gpt2.py --check -o gpt2_demo.onnx
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WEIGHT_STD = 0.02
LN_EPS = 1e-5
EXTERNAL_ALIGN = 64        # byte alignment of every tensor in the side file
DRAW_CHUNK = 1 << 22       # random numbers drawn per RandomState call
PROTOBUF_LIMIT = 2 ** 31   # a single protobuf message cannot exceed 2 GiB
CHECK_TOLERANCE = 1e-4


class WeightStore:
    """Creates the float initializers: random or zero, inline or external."""

    def __init__(self, seed, zero, side_path):
        self.rng = None if zero else np.random.RandomState(seed)
        self.side_path = side_path
        self.side_file = open(side_path, "wb") if side_path else None
        self.end = 0               # end of the data written to the side file
        self.initializers = []
        self.num_params = 0

    def add(self, name, shape, mean=0.0):
        """Adds a float32 initializer of `shape` drawn as mean + N(0, std)."""
        count = math.prod(shape)
        self.num_params += count
        if self.side_file is None:
            tensor = numpy_helper.from_array(
                self._draw(count, mean).reshape(shape), name)
        else:
            tensor = self._add_external(name, shape, count, mean)
        self.initializers.append(tensor)
        return name

    def _draw(self, count, mean):
        if self.rng is None:
            return np.zeros(count, dtype="<f4")
        values = self.rng.standard_normal(count) * WEIGHT_STD + mean
        return values.astype("<f4")

    def _add_external(self, name, shape, count, mean):
        offset = -(-self.end // EXTERNAL_ALIGN) * EXTERNAL_ALIGN
        length = count * 4
        if self.rng is not None:
            self.side_file.seek(offset)
            for start in range(0, count, DRAW_CHUNK):
                chunk = min(DRAW_CHUNK, count - start)
                self.side_file.write(self._draw(chunk, mean).tobytes())
        self.end = offset + length
        tensor = TensorProto(name=name, dims=shape,
                             data_type=TensorProto.FLOAT,
                             data_location=TensorProto.EXTERNAL)
        for key, value in (("location", os.path.basename(self.side_path)),
                           ("offset", str(offset)), ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        return tensor

    def close(self):
        """Sizes the side file; regions never written stay holes."""
        if self.side_file is not None:
            self.side_file.truncate(self.end)
            self.side_file.close()


class GraphBuilder:
    """Appends nodes named after exporter scopes, e.g. ``/h.0/attn/MatMul``."""

    def __init__(self):
        self.nodes = []
        self.used = {}

    def op(self, scope, op_type, inputs, outputs=1, names=None, **attrs):
        """Adds a node; returns its output name (or list of names)."""
        base = f"{scope}/{op_type}"
        index = self.used.get(base, 0)
        self.used[base] = index + 1
        node_name = base if index == 0 else f"{base}_{index}"
        names = names or [f"{node_name}_output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names,
                                           name=node_name, **attrs))
        return names[0] if outputs == 1 else names

    def const(self, scope, value, dtype):
        """Adds a Constant node holding `value` (scalar or list)."""
        array = np.array(value, dtype=dtype)
        return self.op(scope, "Constant", [],
                       value=numpy_helper.from_array(array))


def layer_norm(g, scope, x, prefix, weights, hidden):
    """Decomposed LayerNorm over the last axis, as exported below opset 17."""
    gamma = weights.add(f"{prefix}.weight", [hidden], mean=1.0)
    beta = weights.add(f"{prefix}.bias", [hidden])
    mean = g.op(scope, "ReduceMean", [x], axes=[-1], keepdims=1)
    centered = g.op(scope, "Sub", [x, mean])
    square = g.op(scope, "Pow", [centered, g.const(scope, 2.0, np.float32)])
    var = g.op(scope, "ReduceMean", [square], axes=[-1], keepdims=1)
    var_eps = g.op(scope, "Add", [var, g.const(scope, LN_EPS, np.float32)])
    std = g.op(scope, "Sqrt", [var_eps])
    normed = g.op(scope, "Div", [centered, std])
    return g.op(scope, "Add", [g.op(scope, "Mul", [normed, gamma]), beta])


def linear(g, scope, x, prefix, weights, fan_in, fan_out):
    """MatMul with a [fan_in, fan_out] weight followed by a bias Add."""
    weight = weights.add(f"{prefix}.weight", [fan_in, fan_out])
    bias = weights.add(f"{prefix}.bias", [fan_out])
    return g.op(scope, "Add", [g.op(scope, "MatMul", [x, weight]), bias])


def gelu(g, scope, x, form):
    """GELU decomposed into elementwise ops (exact erf form or tanh form)."""
    if form == "erf":
        scaled = g.op(scope, "Div", [x, g.const(scope, math.sqrt(2.0),
                                                np.float32)])
        one_plus = g.op(scope, "Add", [g.op(scope, "Erf", [scaled]),
                                       g.const(scope, 1.0, np.float32)])
        return g.op(scope, "Mul", [g.op(scope, "Mul", [x, one_plus]),
                                   g.const(scope, 0.5, np.float32)])
    half_x = g.op(scope, "Mul", [g.const(scope, 0.5, np.float32), x])
    cube = g.op(scope, "Pow", [x, g.const(scope, 3.0, np.float32)])
    inner = g.op(scope, "Add", [x, g.op(scope, "Mul", [
        g.const(scope, 0.044715, np.float32), cube])])
    tanh = g.op(scope, "Tanh", [g.op(scope, "Mul", [
        g.const(scope, math.sqrt(2.0 / math.pi), np.float32), inner])])
    one_plus = g.op(scope, "Add", [g.const(scope, 1.0, np.float32), tanh])
    return g.op(scope, "Mul", [half_x, one_plus])


def attention(g, scope, x, mask, prefix, weights, cfg, dims):
    """Causal self-attention with a fused QKV projection."""
    hidden, heads = cfg.hidden, cfg.heads
    head_dim = hidden // heads
    batch, seq = dims
    qkv = linear(g, scope, x, f"{prefix}.c_attn", weights, hidden, 3 * hidden)
    q, k, v = g.op(scope, "Split", [qkv, g.const(scope, [hidden] * 3,
                                                 np.int64)],
                   outputs=3, axis=2)
    split_shape = g.const(scope, [batch, seq, heads, head_dim], np.int64)

    def heads_view(t, perm):
        return g.op(scope, "Transpose",
                    [g.op(scope, "Reshape", [t, split_shape])], perm=perm)

    q = heads_view(q, [0, 2, 1, 3])
    k = heads_view(k, [0, 2, 3, 1])
    v = heads_view(v, [0, 2, 1, 3])
    scores = g.op(scope, "Div", [g.op(scope, "MatMul", [q, k]),
                                 g.const(scope, math.sqrt(head_dim),
                                         np.float32)])
    scores = g.op(scope, "Where", [mask, scores, g.const(
        scope, np.finfo(np.float32).min, np.float32)])
    probs = g.op(scope, "Softmax", [scores], axis=-1)
    context = g.op(scope, "Transpose", [g.op(scope, "MatMul", [probs, v])],
                   perm=[0, 2, 1, 3])
    context = g.op(scope, "Reshape", [context, g.const(
        scope, [batch, seq, hidden], np.int64)])
    return linear(g, scope, context, f"{prefix}.c_proj", weights, hidden,
                  hidden)


def build_model(cfg, weights):
    """Builds the ModelProto; float initializers come from `weights`."""
    g = GraphBuilder()
    batch_dim, seq_dim = ("batch", "seq") if cfg.symbolic else (cfg.batch,
                                                                 cfg.seq)
    wte = weights.add("wte.weight", [cfg.vocab, cfg.hidden])
    wpe = weights.add("wpe.weight", [cfg.seq, cfg.hidden])
    mask = numpy_helper.from_array(np.tril(np.ones((cfg.seq, cfg.seq),
                                                   dtype=bool)), "causal_mask")

    if cfg.symbolic:
        shape = g.op("", "Shape", ["input_ids"])
        seq_len = g.op("", "Gather", [shape, g.const("", 1, np.int64)], axis=0)
    else:
        seq_len = g.const("", cfg.seq, np.int64)
    positions = g.op("", "Range", [g.const("", 0, np.int64), seq_len,
                                   g.const("", 1, np.int64)])
    positions = g.op("", "Unsqueeze", [positions, g.const("", [0], np.int64)])
    x = g.op("", "Add", [g.op("/wte", "Gather", [wte, "input_ids"]),
                         g.op("/wpe", "Gather", [wpe, positions])])

    causal = mask.name
    if cfg.symbolic:
        seq_1d = g.op("", "Unsqueeze", [seq_len, g.const("", [0], np.int64)])
        ends = g.op("", "Concat", [seq_1d, seq_1d], axis=0)
        causal = g.op("", "Slice", [causal, g.const("", [0, 0], np.int64),
                                    ends, g.const("", [0, 1], np.int64)])
    # Reshape targets: 0 copies a symbolic batch/seq from the input.
    dims = (0, 0) if cfg.symbolic else (cfg.batch, cfg.seq)

    for i in range(cfg.layers):
        scope, prefix = f"/h.{i}", f"h.{i}"
        h = layer_norm(g, f"{scope}/ln_1", x, f"{prefix}.ln_1", weights,
                       cfg.hidden)
        h = attention(g, f"{scope}/attn", h, causal, f"{prefix}.attn",
                      weights, cfg, dims)
        x = g.op(scope, "Add", [x, h])
        h = layer_norm(g, f"{scope}/ln_2", x, f"{prefix}.ln_2", weights,
                       cfg.hidden)
        h = linear(g, f"{scope}/mlp", h, f"{prefix}.mlp.c_fc", weights,
                   cfg.hidden, 4 * cfg.hidden)
        h = gelu(g, f"{scope}/mlp/act", h, cfg.gelu)
        h = linear(g, f"{scope}/mlp", h, f"{prefix}.mlp.c_proj", weights,
                   4 * cfg.hidden, cfg.hidden)
        x = g.op(scope, "Add", [x, h])

    x = layer_norm(g, "/ln_f", x, "ln_f", weights, cfg.hidden)
    wte_t = g.op("/lm_head", "Transpose", [wte], perm=[1, 0])
    g.op("/lm_head", "MatMul", [x, wte_t], names=["logits"])

    graph = helper.make_graph(
        g.nodes, "gpt2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                       [batch_dim, seq_dim])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [batch_dim, seq_dim, cfg.vocab])],
        initializer=weights.initializers + [mask])
    opsets = [helper.make_opsetid("", cfg.opset)]
    return helper.make_model(
        graph, opset_imports=opsets, producer_name="weft-gen_gpt2",
        ir_version=helper.find_min_ir_version_for(opsets),
        doc_string=(f"GPT-2: layers={cfg.layers} hidden={cfg.hidden} "
                    f"heads={cfg.heads} vocab={cfg.vocab} seq={cfg.seq} "
                    f"gelu={cfg.gelu} seed={cfg.seed}"))


def reference_logits(params, ids, cfg):
    """Independent float64 numpy GPT-2 forward pass."""
    batch, seq = ids.shape
    heads, head_dim = cfg.heads, cfg.hidden // cfg.heads
    erf = np.vectorize(math.erf)

    def norm(t, name):
        mu = t.mean(-1, keepdims=True)
        var = ((t - mu) ** 2).mean(-1, keepdims=True)
        return (t - mu) / np.sqrt(var + LN_EPS) * params[name + ".weight"] \
            + params[name + ".bias"]

    def dense(t, name):
        return t @ params[name + ".weight"] + params[name + ".bias"]

    def split_heads(t):
        return t.reshape(batch, seq, heads, head_dim).transpose(0, 2, 1, 3)

    def act(t):
        if cfg.gelu == "erf":
            return 0.5 * t * (1.0 + erf(t / math.sqrt(2.0)))
        return 0.5 * t * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                        * (t + 0.044715 * t ** 3)))

    causal = np.tril(np.ones((seq, seq), dtype=bool))
    x = params["wte.weight"][ids] + params["wpe.weight"][:seq]
    for i in range(cfg.layers):
        p = f"h.{i}"
        q, k, v = np.split(dense(norm(x, p + ".ln_1"), p + ".attn.c_attn"),
                           3, axis=-1)
        scores = split_heads(q) @ split_heads(k).transpose(0, 1, 3, 2)
        scores = np.where(causal, scores / math.sqrt(head_dim), -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ split_heads(v)).transpose(0, 2, 1, 3)
        x = x + dense(context.reshape(batch, seq, cfg.hidden),
                      p + ".attn.c_proj")
        h = act(dense(norm(x, p + ".ln_2"), p + ".mlp.c_fc"))
        x = x + dense(h, p + ".mlp.c_proj")
    return norm(x, "ln_f") @ params["wte.weight"].T


def check_with_onnxruntime(path, cfg):
    """Compares onnxruntime against reference_logits; returns success."""
    import onnxruntime

    model = onnx.load(path)
    params = {t.name: numpy_helper.to_array(t).astype(np.float64)
              for t in model.graph.initializer
              if t.data_type == TensorProto.FLOAT}
    session = onnxruntime.InferenceSession(
        path, providers=["CPUExecutionProvider"])
    shapes = [(cfg.batch, cfg.seq)]
    if cfg.symbolic:
        shapes.append((cfg.batch + 1, max(1, cfg.seq // 2)))
    rng = np.random.RandomState(cfg.seed + 1)
    ok = True
    for batch, seq in shapes:
        ids = rng.randint(0, cfg.vocab, size=(batch, seq)).astype(np.int64)
        (got,) = session.run(["logits"], {"input_ids": ids})
        want = reference_logits(params, ids, cfg)
        err = float(np.abs(got - want).max())
        passed = got.shape == want.shape and err < CHECK_TOLERANCE
        ok &= passed
        print(f"check batch={batch} seq={seq}: max abs error {err:.3g} "
              f"(max |logit| {np.abs(want).max():.3g}) "
              f"{'ok' if passed else 'FAILED'}")
    return ok


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="See the module docstring for the graph layout; GPT-2-XL: "
               "--layers 48 --hidden 1600 --heads 25 --vocab 50257 "
               "--seq 1024 --external-data --zero-weights",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("-o", "--output", required=True,
                        default=argparse.SUPPRESS,
                        help="output .onnx path")
    parser.add_argument("--layers", type=int, default=2,
                        help="number of transformer blocks")
    parser.add_argument("--hidden", type=int, default=64,
                        help="model width")
    parser.add_argument("--heads", type=int, default=4,
                        help="attention heads (must divide --hidden)")
    parser.add_argument("--vocab", type=int, default=256,
                        help="vocabulary size")
    parser.add_argument("--seq", type=int, default=32,
                        help="sequence length (also the number of positions "
                             "in wpe and the causal mask)")
    parser.add_argument("--batch", type=int, default=1,
                        help="batch size (with --symbolic: used by --check)")
    parser.add_argument("--symbolic", action="store_true",
                        help="leave batch and seq as dim_params "
                             "'batch' and 'seq'")
    parser.add_argument("--opset", type=int, default=14,
                        choices=range(13, 18), help="default-domain opset")
    parser.add_argument("--gelu", choices=["erf", "tanh"], default="erf",
                        help="exact erf GELU or its tanh approximation")
    parser.add_argument("--seed", type=int, default=0,
                        help="numpy RandomState seed for the weights")
    parser.add_argument("--external-data", action="store_true",
                        help="store float initializers in <output>.weights")
    parser.add_argument("--zero-weights", action="store_true",
                        help="all weights zero, no random numbers drawn")
    parser.add_argument("--check", action="store_true",
                        help="compare onnxruntime with a numpy reference "
                             "(small models only)")
    cfg = parser.parse_args(argv)
    for name in ("layers", "hidden", "heads", "vocab", "seq", "batch"):
        if getattr(cfg, name) < 1:
            parser.error(f"--{name} must be positive")
    if cfg.hidden % cfg.heads:
        parser.error("--hidden must be a multiple of --heads")
    h, layers = cfg.hidden, cfg.layers
    num_params = (cfg.vocab + cfg.seq) * h + 2 * h \
        + layers * (12 * h * h + 13 * h)
    if not cfg.external_data and 4 * num_params >= PROTOBUF_LIMIT:
        parser.error(f"{num_params} parameters exceed the 2 GiB protobuf "
                     "limit; use --external-data")
    return cfg


def main(argv):
    cfg = parse_args(argv)
    out_dir = os.path.dirname(os.path.abspath(cfg.output))
    os.makedirs(out_dir, exist_ok=True)
    side_path = cfg.output + ".weights" if cfg.external_data else None
    weights = WeightStore(cfg.seed, cfg.zero_weights, side_path)
    try:
        model = build_model(cfg, weights)
    finally:
        weights.close()
    with open(cfg.output, "wb") as f:
        f.write(model.SerializeToString())
    onnx.checker.check_model(cfg.output)
    print(f"wrote {cfg.output}: {len(model.graph.node)} nodes, "
          f"{weights.num_params} parameters"
          + (f", weights in {side_path} ({weights.end} bytes)"
             if side_path else ""))
    if cfg.check and not check_with_onnxruntime(cfg.output, cfg):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
