#!/usr/bin/python3
"""Small language models built around one ONNX data-movement op each, for
checking that op's import, values and gradient against PyTorch: run it with
Debian's torch (`/usr/bin/python3`). Each model embeds the token ids,
passes them through the op with trained weights on the path, and projects
to logits; torch.onnx.export writes the op as users' exports do:

* `tile`: `w.repeat(...)` (Tile), as GPT-J repeats its rotary table;
* `gather-elements`: `torch.gather` along the channels and along the
  sequence (GatherElements);
* `scatter-nd`: `x[:, idx] = v` (ScatterND) and `index_put_(...,
  accumulate=True)` (ScatterND with reduction 'add');
* `gather-axis`: `x[:, :, idx]` and `x.select(...)` (Gather on axes 1 and 2);
* `strided-slice`: `x[..., ::2]`, `x[..., 1::2]` (GPT-J's rotary pairs),
  `x[..., 2::3]` (a stride that overruns the end) and `x.flip(-1)` (Slice
  with negative steps).

Writes `<output>.onnx` and `<output>.npz`: the float weights, token ids,
labels (the next token, -100 at the end), and torch's loss and gradients
in float64 (`loss`, `grad:<name>`)."""

import argparse
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Tile(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.halves = nn.Parameter(torch.randn(1, dim // 2))
        self.rows = nn.Parameter(torch.randn(2, dim))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        seq = ids.shape[1]
        scale = self.halves.repeat(1, 2)  # [1, dim]
        shift = self.rows.repeat(seq // 2, 1)  # [seq, dim]
        return self.head(torch.tanh(x * scale + shift))


class GatherElements(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        generator = torch.Generator().manual_seed(1)
        self.register_buffer("channels", torch.randint(0, dim, (1, 1, dim),
                                                        generator=generator))

    def forward(self, ids):
        x = self.embed(ids)
        b, s, c = x.shape
        channels = self.channels.expand(b, s, c)
        mixed = torch.gather(x, 2, channels)
        earlier = torch.gather(x, 1, (torch.arange(s) // 2).view(1, s, 1)
                               .expand(b, s, c))
        return self.head(torch.tanh(mixed + earlier))


class ScatterND(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rows = nn.Parameter(torch.randn(3, dim))
        self.plane = nn.Parameter(torch.randn(dim))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        b, s, c = x.shape
        idx = torch.tensor([1, 4, 6])
        written = x.clone()
        written[:, idx] = self.rows.expand(b, 3, c)
        added = x.clone()
        # Distinct indices: torch exports accumulate=True as a ScatterND
        # into zeros, which keeps one of repeated indices (eager sums them).
        added.index_put_((torch.tensor([2, 0, 1]),), self.plane.expand(3, s, c),
                         accumulate=True)
        return self.head(torch.tanh(written + added))


class GatherAxis(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Parameter(torch.randn(dim, 4, dim) / dim ** 0.5)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        mixed = torch.einsum("bsc,ckd->bskd", x, self.mix)  # [b, s, 4, d]
        picked = mixed[:, :, torch.tensor([2, 0, 2])].sum(2)  # Gather axis 2
        shared = mixed.select(2, 3)  # Gather axis 2, scalar index
        return self.head(torch.tanh(picked + shared))


class StridedSlice(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.scale = nn.Parameter(torch.randn(dim))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids) * self.scale  # [b, s, 16]
        pairs = x[..., ::2] * x[..., 1::2]  # 8
        thirds = x[..., 2::3]  # 5: elements 2, 5, ..., 14 of 16
        reversed_ = x.flip(-1)[..., :3]  # 3
        return self.head(torch.tanh(torch.cat([pairs, thirds, reversed_], -1)))


MODELS = {"tile": Tile, "gather-elements": GatherElements,
          "scatter-nd": ScatterND, "gather-axis": GatherAxis,
          "strided-slice": StridedSlice}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--vocab", type=int, default=32)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--seq", type=int, default=8)
    parser.add_argument("-o", "--output", required=True, help="path stem")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = MODELS[args.model](args.vocab, args.dim)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids,), args.output + ".onnx", opset_version=16,
                          input_names=["input_ids"], output_names=["logits"])
    write_reference(model, ids, args.output)
    return 0


def write_reference(model, ids, stem):
    """STEM.npz: the float weights, the token ids, labels (the next token,
    -100 at the end), and PyTorch's loss and every parameter's gradient in
    float64. The loss is the mean cross-entropy of the model's logits, plus
    its second output when it returns one (an auxiliary loss, added as
    Weft's training step adds it)."""
    labels = torch.roll(ids, -1, 1)
    labels[:, -1] = -100
    model = model.double()
    outputs = model(ids)
    logits, extra = outputs if isinstance(outputs, tuple) else (outputs, 0)
    loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                           ignore_index=-100) + extra
    loss.backward()
    arrays = {"input_ids": ids.numpy(), "labels": labels.numpy(),
              "loss": loss.detach().numpy()}
    for name, parameter in model.named_parameters():
        arrays[name] = parameter.detach().float().numpy()
        arrays["grad:" + name] = parameter.grad.numpy()
    np.savez(stem + ".npz", **arrays)


if __name__ == "__main__":
    sys.exit(main())
