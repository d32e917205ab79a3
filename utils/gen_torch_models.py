#!/usr/bin/python3
"""Exports transformer language models written in PyTorch to ONNX the way a
user does it: `torch.onnx.export` at opset 14 with the default constant
folding, optionally with dynamic batch and sequence axes. Run it with
Debian's torch (`/usr/bin/python3`); the models are shaped like the code
people export today, not like Weft's own generator:

* `gpt-nobias`: nanoGPT with `bias=False`. Bias-free linears (exported as
  MatMul by a folded, transposed initializer), LayerNorm without a shift,
  a packed QKV projection cut by `split`, a causal mask sliced from a
  registered buffer, tanh GELU and an LM head tied to the token embedding.
  Its token input is named `idx`. Its norm scales are drawn near 1, so
  that the exporter (which merges initializers of equal value) keeps them
  apart.
* `llama`: a Llama-style decoder. RMSNorm, bias-free projections, grouped-
  query attention (`--kv-heads` < `--heads`, K/V repeated by `expand`),
  rotary embeddings (`rotate_half` on cos/sin tables computed from
  `arange` in the forward pass), a causal mask built from `arange`
  comparisons, SwiGLU, an untied LM head. Its token input is `tokens`.

* `llama2c`: the Llama-style decoder as llama2.c writes it: the causal
  mask a registered buffer of -inf above the diagonal, added to the
  scores (exported as a float initializer holding -inf), and the output
  projection tied to the token embedding (exported as the table and a
  folded transposed copy). Its norm scales are drawn near 1: the exporter
  merges initializers of equal value, so scales all 1 would be exported as
  one tensor, trained as one.

* `neox`: GPT-NeoX's layout: a fused QKV projection with biases whose
  output is viewed per head as [q | k | v] (interleaved: [heads, 3,
  head_dim]), rotary embeddings on the first quarter of each head only
  (partial rotary: slices and a concat around the rotation), and parallel
  residuals (x + attention(ln1(x)) + mlp(ln2(x))).

All return `logits` [batch, seq, vocab]. Weights come from
`torch.manual_seed(--seed)`. `--reference PREFIX` saves the export's token
batch as `PREFIX.tokens.npy` and torch's logits for it as
`PREFIX.logits.npy`: the independent reference for the compiled model.
"""

import argparse
import math
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm with an optional bias."""

    def __init__(self, dim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


def causal_self_attention(x, c_attn, c_proj, heads, mask):
    """GPT-2's attention: a fused QKV projection, causal softmax attention
    over `heads` heads (`mask` [1, 1, seq, seq] lower-triangular ones), and
    the output projection."""
    b, t, c = x.size()
    q, k, v = c_attn(x).split(c, dim=2)
    q = q.view(b, t, heads, c // heads).transpose(1, 2)
    k = k.view(b, t, heads, c // heads).transpose(1, 2)
    v = v.view(b, t, heads, c // heads).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf"))
    y = F.softmax(att, dim=-1) @ v
    return c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GptBlock(nn.Module):
    def __init__(self, dim, heads, seq, bias):
        super().__init__()
        self.heads = heads
        self.ln_1 = LayerNorm(dim, bias)
        self.c_attn = nn.Linear(dim, 3 * dim, bias=bias)
        self.c_proj = nn.Linear(dim, dim, bias=bias)
        self.ln_2 = LayerNorm(dim, bias)
        self.c_fc = nn.Linear(dim, 4 * dim, bias=bias)
        self.mlp_proj = nn.Linear(4 * dim, dim, bias=bias)
        self.register_buffer(
            "mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        x = x + causal_self_attention(self.ln_1(x), self.c_attn, self.c_proj,
                                      self.heads, self.mask)
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp_proj(h)


class Gpt(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq, bias=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.h = nn.ModuleList(GptBlock(dim, heads, seq, bias)
                               for _ in range(layers))
        self.ln_f = LayerNorm(dim, bias)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") \
                    or name == "ln_f.weight":
                # Near 1, not 1: the exporter merges initializers of equal
                # value, and Weft would train one scale for all of them.
                nn.init.normal_(p, 1.0, 0.02)

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class RmsNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def repeat_kv(self, x):
        b, s, kv, hd = x.shape
        rep = self.heads // self.kv_heads
        return x[:, :, :, None, :].expand(b, s, kv, rep, hd).reshape(b, s, kv * rep, hd)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
        out = F.softmax(scores.float(), dim=-1).type_as(q) @ v
        return self.wo(out.transpose(1, 2).contiguous().view(b, s, -1))


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn):
        super().__init__()
        self.attention_norm = RmsNorm(dim)
        self.attention = LlamaAttention(dim, heads, kv_heads)
        self.ffn_norm = RmsNorm(dim)
        self.w1 = nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)
        self.w3 = nn.Linear(dim, ffn, bias=False)

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(self.attention_norm(x), cos, sin, mask)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab, dim, heads, kv_heads, layers, ffn, seq=0):
        """seq > 0: llama2.c's form, a -inf mask buffer of seq x seq and a
        tied output projection."""
        super().__init__()
        self.head_dim = dim // heads
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(LlamaBlock(dim, heads, kv_heads, ffn)
                                    for _ in range(layers))
        self.norm = RmsNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
        self.register_buffer("mask", torch.triu(
            torch.full((1, 1, seq, seq), float("-inf")), diagonal=1)
            if seq else None)
        if seq:
            self.output.weight = self.tok_embeddings.weight
            # torch's exporter merges initializers of equal value: norm
            # scales all ones would become one tensor in the export.
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    nn.init.normal_(p, 1.0, 0.02)

    def forward(self, tokens):
        s = tokens.shape[1]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float()
                                    / self.head_dim))
        freqs = torch.outer(torch.arange(s).float(), inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)[None, :, None, :]
        cos, sin = angles.cos(), angles.sin()
        positions = torch.arange(s)
        mask = (positions[None, :] > positions[:, None] if self.mask is None
                else self.mask[:, :, :s, :s])
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output(self.norm(x))


class NeoxLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.rotary = self.head_dim // 4
        self.input_layernorm = nn.LayerNorm(dim)
        self.post_attention_layernorm = nn.LayerNorm(dim)
        self.query_key_value = nn.Linear(dim, 3 * dim)
        self.dense = nn.Linear(dim, dim)
        self.dense_h_to_4h = nn.Linear(dim, 4 * dim)
        self.dense_4h_to_h = nn.Linear(4 * dim, dim)

    def attention(self, x, cos, sin, mask):
        b, s, _ = x.shape
        qkv = self.query_key_value(x).view(b, s, self.heads, 3 * self.head_dim)
        q, k, v = (qkv[..., i * self.head_dim:(i + 1) * self.head_dim]
                   .permute(0, 2, 1, 3) for i in range(3))
        r = self.rotary

        def rotate(t):
            rot, keep = t[..., :r], t[..., r:]
            return torch.cat((rot * cos + rotate_half(rot) * sin, keep), dim=-1)

        q, k = rotate(q), rotate(k)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(mask, float("-inf"))
        out = (F.softmax(scores, dim=-1) @ v).permute(0, 2, 1, 3).reshape(b, s, -1)
        return self.dense(out)

    def forward(self, x, cos, sin, mask):
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(
            self.post_attention_layernorm(x))))
        return x + self.attention(self.input_layernorm(x), cos, sin, mask) + mlp


class Neox(nn.Module):
    def __init__(self, vocab, dim, heads, layers):
        super().__init__()
        self.rotary = dim // heads // 4
        self.embed_in = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(NeoxLayer(dim, heads) for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(dim)
        self.embed_out = nn.Linear(dim, vocab, bias=False)
        for name, p in self.named_parameters():
            nn.init.normal_(p, 1.0 if name.endswith("norm.weight") else 0.0, 0.02)

    def forward(self, tokens):
        s = tokens.shape[1]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.rotary, 2).float()
                                    / self.rotary))
        freqs = torch.outer(torch.arange(s).float(), inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)[None, None]
        cos, sin = angles.cos(), angles.sin()
        positions = torch.arange(s)
        mask = positions[None, :] > positions[:, None]
        x = self.embed_in(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.embed_out(self.final_layer_norm(x))


def build(model, vocab=256, dim=64, heads=8, kv_heads=4, layers=2, ffn=128,
          seq=16):
    """The module `--model` names, with the generator's defaults (the
    caller seeds torch first)."""
    if model == "gpt-nobias":
        return Gpt(vocab, dim, heads, layers, seq)
    if model == "neox":
        return Neox(vocab, dim, heads, layers)
    return Llama(vocab, dim, heads, kv_heads, layers, ffn,
                 seq if model == "llama2c" else 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["gpt-nobias", "llama", "llama2c", "neox"],
                        required=True)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--ffn", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--dynamic", action="store_true",
                        help="export batch and sequence as dynamic axes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", metavar="PREFIX")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()

    warnings.filterwarnings("ignore")  # the tracer's notes on shapes
    torch.manual_seed(args.seed)
    model = build(args.model, args.vocab, args.dim, args.heads, args.kv_heads,
                  args.layers, args.ffn, args.seq)
    name = {"gpt-nobias": "idx", "neox": "input_ids"}.get(args.model, "tokens")
    model.eval()
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq))
    axes = {name: {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    torch.onnx.export(model, (tokens,), args.output, opset_version=14,
                      input_names=[name], output_names=["logits"],
                      dynamic_axes=axes if args.dynamic else None)
    if args.reference:
        import numpy
        with torch.no_grad():
            logits = model(tokens)
        numpy.save(args.reference + ".tokens.npy", tokens.numpy())
        numpy.save(args.reference + ".logits.npy", logits.numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main())
