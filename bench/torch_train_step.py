#!/usr/bin/python3
"""PyTorch reference for bench/train_step.py: the GPT-2-style model of
utils/gen_gpt2.py (its parameters from an .npz), trained in float32 with
AdamW and gradient clipping, as Weft's training step does. Prints the
median seconds per step. Runs under Debian's python3 (python3-torch)."""

import argparse
import math
import os
import time

# torch.set_num_threads does not reach the BLAS of Debian's torch (a generic
# BLAS: OpenBLAS with its own thread pool, two threads on a two-core
# machine), so the threads are set for every library before they load.
_early = argparse.ArgumentParser(add_help=False)
_early.add_argument("--threads", type=int, default=1)
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = str(_early.parse_known_args()[0].threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("params")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    stored = np.load(args.params)
    p = {name: torch.nn.Parameter(torch.tensor(stored[name]))
         for name in stored.files}
    vocab, hidden = p["wte.weight"].shape
    head_dim = hidden // args.heads
    causal = torch.tril(torch.ones(args.seq, args.seq, dtype=torch.bool))

    def norm(t, name):
        return F.layer_norm(t, (hidden,), p[name + ".weight"], p[name + ".bias"])

    def dense(t, name):
        return t @ p[name + ".weight"] + p[name + ".bias"]

    def heads(t):
        return t.view(args.batch, args.seq, args.heads, head_dim).transpose(1, 2)

    def loss_of(ids, labels):
        x = p["wte.weight"][ids] + p["wpe.weight"][:args.seq]
        for i in range(args.layers):
            q, k, v = dense(norm(x, f"h.{i}.ln_1"),
                            f"h.{i}.attn.c_attn").split(hidden, dim=-1)
            scores = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(head_dim)
            probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)
            context = (probs @ heads(v)).transpose(1, 2).reshape(
                args.batch, args.seq, hidden)
            x = x + dense(context, f"h.{i}.attn.c_proj")
            h = F.gelu(dense(norm(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc"))
            x = x + dense(h, f"h.{i}.mlp.c_proj")
        logits = norm(x, "ln_f") @ p["wte.weight"].T
        return F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1))

    decayed = [t for t in p.values() if t.dim() >= 2]
    others = [t for t in p.values() if t.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": 0.1},
         {"params": others, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    generator = torch.Generator().manual_seed(0)
    times = []
    for _ in range(args.steps):
        tokens = torch.randint(0, vocab, (args.batch, args.seq + 1),
                               generator=generator)
        start = time.perf_counter()
        loss = loss_of(tokens[:, :-1], tokens[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        optimizer.step()
        times.append(time.perf_counter() - start)
    print(sorted(times[2:])[len(times[2:]) // 2])


if __name__ == "__main__":
    main()
