#!/usr/bin/python3
"""Exports a GPT whose MLPs are mixtures of experts, written in PyTorch the
way GShard and the Switch Transformer write them, to ONNX. Run it with
Debian's torch (`/usr/bin/python3`).

Each MoE layer routes every token of a group (a sequence of the batch) to
its top-k experts by a softmax router, with a capacity of
`ceil(k * capacity_factor * seq / experts)` tokens per expert and group;
tokens past an expert's capacity are dropped (they pass through the
residual only). Dispatch and combine are dense one-hot tensors
[batch, seq, experts, capacity], contracted with matmuls, so the export
needs no data-dependent shapes. The experts' weights are stacked
[experts, dim, ffn] and [experts, ffn, dim]. The model returns `logits`
and `aux_loss`, the Switch Transformer's load-balancing loss (experts x
the dot product of the fraction of tokens whose first choice is each
expert and its mean router probability), summed over the layers and
scaled by `--aux-weight`.

`--reference STEM` also writes STEM.npz, the independent reference for
the training step's gradients: the float weights, the token ids, labels
(the next token, -100 at the end), and PyTorch's loss (mean cross-entropy
plus the weighted load-balancing loss, as Weft's training step adds them)
and every parameter's gradient, in float64 (`loss`, `grad:<name>`).
"""

import argparse
import math
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

# Importing a sibling script would leave a bytecode cache in utils/: runs
# write nothing into the repo.
sys.dont_write_bytecode = True
from gen_op_models import write_reference  # noqa: E402
from gen_torch_models import causal_self_attention  # noqa: E402


class MoE(nn.Module):
    def __init__(self, dim, ffn, experts, top_k, capacity):
        super().__init__()
        self.experts, self.top_k, self.capacity = experts, top_k, capacity
        self.router = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, dim, ffn) * 0.02)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, dim) * 0.02)

    def forward(self, x):
        b, s, d = x.shape
        e, c = self.experts, self.capacity
        probs = F.softmax(self.router(x), dim=-1)  # [b, s, e]
        remaining = probs
        before = torch.zeros(b, 1, e, dtype=x.dtype)  # tokens already queued per expert
        dispatch = torch.zeros(b, s, e, c, dtype=x.dtype)
        combine = torch.zeros(b, s, e, c, dtype=x.dtype)
        first = None
        for _ in range(self.top_k):
            gate = remaining.amax(dim=-1, keepdim=True)  # [b, s, 1]
            choice = (remaining == gate).to(x.dtype)  # [b, s, e]
            if first is None:
                first = choice
            # 1-based place in the expert's queue of this group.
            position = torch.cumsum(choice, dim=1) + before
            kept = choice * (position <= c).to(x.dtype)
            slot = (position.long() - 1).unsqueeze(-1) == torch.arange(c)
            sent = kept.unsqueeze(-1) * slot.to(x.dtype)
            dispatch = dispatch + sent
            combine = combine + sent * gate.unsqueeze(-1)
            before = before + choice.sum(dim=1, keepdim=True)
            remaining = remaining * (1 - choice)
        tokens = dispatch.reshape(b, s, e * c).transpose(1, 2) @ x  # [b, ec, d]
        tokens = tokens.reshape(b, e, c, d).permute(1, 0, 2, 3)  # [e, b, c, d]
        hidden = F.gelu(tokens.reshape(e, b * c, d) @ self.w1,
                        approximate="tanh")
        out = (hidden @ self.w2).reshape(e, b, c, d).permute(1, 0, 2, 3)
        y = combine.reshape(b, s, e * c) @ out.reshape(b, e * c, d)
        aux = e * (first.mean(dim=(0, 1)) * probs.mean(dim=(0, 1))).sum()
        return y, aux


class Block(nn.Module):
    def __init__(self, dim, heads, seq, ffn, experts, top_k, capacity):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.moe = MoE(dim, ffn, experts, top_k, capacity)
        self.register_buffer(
            "mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        x = x + causal_self_attention(self.ln_1(x), self.c_attn, self.c_proj,
                                      self.heads, self.mask)
        y, aux = self.moe(self.ln_2(x))
        return x + y, aux


class MoeGpt(nn.Module):
    def __init__(self, args):
        super().__init__()
        capacity = math.ceil(args.top_k * args.capacity_factor * args.seq /
                             args.experts)
        self.aux_weight = args.aux_weight
        self.wte = nn.Embedding(args.vocab, args.dim)
        self.wpe = nn.Embedding(args.seq, args.dim)
        self.h = nn.ModuleList(
            Block(args.dim, args.heads, args.seq, args.ffn, args.experts,
                  args.top_k, capacity) for _ in range(args.layers))
        self.ln_f = nn.LayerNorm(args.dim)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        aux = 0
        for block in self.h:
            x, layer_aux = block(x)
            aux = aux + layer_aux
        logits = self.ln_f(x) @ self.wte.weight.t()
        return logits, self.aux_weight * aux


def main():
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--ffn", type=int, default=128)
    parser.add_argument("--experts", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--capacity-factor", type=float, default=1.25)
    parser.add_argument("--aux-weight", type=float, default=0.01)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", metavar="STEM",
                        help="write STEM.npz: PyTorch's loss and gradients in float64")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()

    warnings.filterwarnings("ignore")  # the tracer's notes on shapes
    torch.manual_seed(args.seed)
    model = MoeGpt(args).eval()
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq))
    torch.onnx.export(model, (tokens,), args.output, opset_version=14,
                      input_names=["input_ids"],
                      output_names=["logits", "aux_loss"])
    if args.reference:
        write_reference(model, tokens, args.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
