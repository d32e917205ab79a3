#!/usr/bin/python3
"""PyTorch autograd reference for the GPT-2-style models of gen_gpt2.py:
reads the parameters (.npz), token ids and labels (.npy), computes the mean
cross-entropy (ignore index -100) in float64 and writes the loss and every
parameter's gradient to an .npz (keys `loss` and `grad:<name>`).

Runs under Debian's python3 (python3-torch), which is independent of Weft:
    /usr/bin/python3 utils/torch_gpt_gradients.py params.npz ids.npy labels.npy out.npz --layers 2 --heads 4
"""

import argparse
import math

import numpy as np
import torch
import torch.nn.functional as F

LN_EPS = 1e-5


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("params")
    parser.add_argument("ids")
    parser.add_argument("labels")
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--gelu", choices=["erf", "tanh"], default="erf")
    args = parser.parse_args()
    stored = np.load(args.params)
    p = {name: torch.tensor(stored[name], dtype=torch.float64, requires_grad=True)
         for name in stored.files}
    ids = torch.tensor(np.load(args.ids), dtype=torch.long)
    labels = torch.tensor(np.load(args.labels), dtype=torch.long)
    batch, seq = ids.shape
    hidden = p["wte.weight"].shape[1]
    head_dim = hidden // args.heads

    def norm(t, name):
        return F.layer_norm(t, (hidden,), p[name + ".weight"], p[name + ".bias"], LN_EPS)

    def dense(t, name):
        return t @ p[name + ".weight"] + p[name + ".bias"]

    def heads(t):
        return t.view(batch, seq, args.heads, head_dim).transpose(1, 2)

    causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
    x = p["wte.weight"][ids] + p["wpe.weight"][:seq]
    for i in range(args.layers):
        q, k, v = dense(norm(x, f"h.{i}.ln_1"), f"h.{i}.attn.c_attn").split(hidden, dim=-1)
        scores = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(head_dim)
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        context = (probs @ heads(v)).transpose(1, 2).reshape(batch, seq, hidden)
        x = x + dense(context, f"h.{i}.attn.c_proj")
        h = F.gelu(dense(norm(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc"),
                   approximate="none" if args.gelu == "erf" else "tanh")
        x = x + dense(h, f"h.{i}.mlp.c_proj")
    logits = norm(x, "ln_f") @ p["wte.weight"].T
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100)
    loss.backward()
    out = {"loss": loss.detach().numpy()}
    for name, tensor in p.items():
        out[f"grad:{name}"] = tensor.grad.numpy()
    np.savez(args.out, **out)


if __name__ == "__main__":
    main()
