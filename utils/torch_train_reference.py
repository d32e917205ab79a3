#!/usr/bin/python3
"""Trains a model of utils/gen_torch_models.py in PyTorch, in float64, the
way Weft's trainer trains its export: the same initial weights (the
generator's seed), the same batches (windows of the token file at the
trainer's seeded offsets, runtime/lib/core/Trainer.cpp), the same learning-rate
schedule (linear warmup, cosine decay to --min-lr, lr/10 by default), AdamW
(beta1 0.9, beta2 0.95, eps 1e-8, decoupled weight decay on tensors of rank
2 and more) after clipping the global gradient norm at --clip-norm (scale
min(1, clip / (norm + 1e-6))). Weights that the module ties (llama2.c's
output projection and token embedding) are one tensor, as PyTorch trains
them. Writes one JSON line per step: step, loss, lr, grad_norm (before
clipping). Run it with Debian's torch (`/usr/bin/python3`)."""

import argparse
import fnmatch
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import gen_torch_models  # noqa: E402

MASK = (1 << 64) - 1


def mix(x):
    """runtime/lib/core/Trainer.cpp's mix (splitmix64's finalizer)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def learning_rate(step, lr, min_lr, warmup, steps):
    if step <= warmup:
        return lr * step / max(1, warmup)
    progress = (step - warmup) / max(1, steps - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1, help="the trainer's --seed")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--min-lr", type=float)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--clip-norm", type=float, default=1.0)
    parser.add_argument("--freeze-glob", action="append", default=[],
                        help="parameters that do not train (fnmatch patterns "
                             "on their names, as weftc --freeze)")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()

    torch.manual_seed(args.model_seed)
    model = gen_torch_models.build(args.model, seq=args.seq).double()
    tokens = np.fromfile(args.data, dtype=np.uint16)
    min_lr = args.lr / 10 if args.min_lr is None else args.min_lr
    params = [p for name, p in model.named_parameters()
              if not any(fnmatch.fnmatchcase(name, g) for g in args.freeze_glob)]
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    beta1, beta2, eps = 0.9, 0.95, 1e-8
    with open(args.output, "w") as log:
        for step in range(1, args.steps + 1):
            windows = []
            for b in range(args.batch):
                offset = mix(mix(args.seed) ^ mix(step * 1000003 + b)) % (
                    len(tokens) - args.seq - 1)
                windows.append(tokens[offset:offset + args.seq + 1].astype(np.int64))
            windows = torch.tensor(np.stack(windows))
            model.zero_grad()
            logits = model(windows[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten())
            loss.backward()
            norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in params))
            scale = min(1.0, args.clip_norm / (norm + 1e-6)) if args.clip_norm > 0 else 1.0
            lr = learning_rate(step, args.lr, min_lr, args.warmup, args.steps)
            with torch.no_grad():
                for p, (m, v) in zip(params, moments):
                    g = p.grad * scale
                    m.mul_(beta1).add_(g, alpha=1 - beta1)
                    v.mul_(beta2).add_(g * g, alpha=1 - beta2)
                    update = (m / (1 - beta1 ** step)) / (
                        torch.sqrt(v / (1 - beta2 ** step)) + eps)
                    if p.dim() >= 2:
                        update = update + args.weight_decay * p
                    p.sub_(lr * update)
            log.write(json.dumps({"step": step, "loss": float(loss), "lr": lr,
                                  "grad_norm": norm}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
