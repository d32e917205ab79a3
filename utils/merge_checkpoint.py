#!/usr/bin/env python3
"""Merges a sharded Weft checkpoint (a step-NNNNNNN directory: index.json
plus rank-NNNNN.safetensors files) into one safetensors file of whole
tensors, read with the safetensors package. With --compare, checks it
against another checkpoint's tensors instead (allclose, --rtol/--atol).

The index records per tensor its global shape, its sharding spec (one
token per dim: "-" whole, else the mesh axes that split it joined by '.',
with "xB" for B interleaved blocks) and, per shard, the file and the
shard's linear index over the split axes (major first)."""

import argparse
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def parse_mesh(text):
    sizes = []
    for item in filter(None, text.split(",")):
        sizes.append(int(item.split("=")[1]))
    return sizes


def parse_spec(text, rank):
    dims = []
    for token in text.split(",") if rank else []:
        if token == "-":
            dims.append(([], 1))
            continue
        axes, _, blocks = token.partition("x")
        dims.append(([int(a) for a in axes.split(".")], int(blocks or 1)))
    return dims


def place(whole, local, dims, mesh, shard):
    """Writes shard `shard` (its local array, padding included) into
    `whole`."""
    parts = [int(np.prod([mesh[a] for a in axes])) for axes, _ in dims]
    chunk = []
    for p in reversed(parts):
        chunk.append(shard % p)
        shard //= p
    chunk.reverse()
    target, source = [], []
    for d, ((axes, blocks), p, c) in enumerate(zip(dims, parts, chunk)):
        block = whole.shape[d] // blocks
        piece = local.shape[d] // blocks
        valid = max(0, min(piece, block - c * piece))
        target.append([slice(b * block + c * piece, b * block + c * piece + valid)
                       for b in range(blocks)])
        source.append([slice(b * piece, b * piece + valid)
                       for b in range(blocks)])
    # Every combination of blocks across dims is one box.
    for index in np.ndindex(*[len(t) for t in target]):
        whole[tuple(t[i] for t, i in zip(target, index))] = \
            local[tuple(s[i] for s, i in zip(source, index))]


def merge(path):
    with open(os.path.join(path, "index.json")) as f:
        index = json.load(f)
    mesh = parse_mesh(index["mesh"])
    files = {}
    merged = {}
    for name, entry in index["tensors"].items():
        dims = parse_spec(entry["sharding"], len(entry["shape"]))
        whole = None
        for shard in entry["shards"]:
            if shard["file"] not in files:
                files[shard["file"]] = load_file(
                    os.path.join(path, shard["file"]))
            local = files[shard["file"]][name]
            if whole is None:
                whole = np.zeros(entry["shape"], dtype=local.dtype)
            place(whole, local, dims, mesh, shard["shard"])
        merged[name] = whole
    return index, merged


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint")
    parser.add_argument("-o", "--output")
    parser.add_argument("--compare", metavar="CHECKPOINT")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-5)
    args = parser.parse_args()
    index, merged = merge(args.checkpoint)
    if args.output:
        save_file(merged, args.output, metadata={"step": str(index["step"])})
        print(f"wrote {args.output}: {len(merged)} tensors, step "
              f"{index['step']}")
    if args.compare:
        _, other = merge(args.compare)
        bad = 0
        worst = 0.0
        for name, value in merged.items():
            reference = other[name]
            excess = np.abs(value - reference) - args.rtol * np.abs(reference)
            worst = max(worst, float(np.max(excess)) if value.size else 0.0)
            if not np.allclose(value, reference, rtol=args.rtol,
                               atol=args.atol):
                print(f"{name}: differs by up to "
                      f"{np.max(np.abs(value - reference)):.3g}")
                bad += 1
        print(f"{len(merged)} tensors compared, {bad} differ (rtol "
              f"{args.rtol:g}, atol {args.atol:g})")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
