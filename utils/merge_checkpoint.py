#!/usr/bin/env python3
"""Merges a sharded Weft checkpoint (a step-NNNNNNN directory: index.json
plus rank-NNNNN.safetensors files) into one safetensors file of whole
tensors, read with the safetensors package. With --compare, checks it
against another checkpoint's tensors instead (allclose, --rtol/--atol).

The index records per tensor its global shape, its sharding spec (one
token per dim: "-" whole, else the mesh axes that split it joined by '.',
with "xB" for B interleaved blocks) and, per shard, the file and the
shard's linear index over the split axes (major first). The shards are put
together by the weft package (the runtime's ShardSpec), after every file
is checked against the CRC-32s of the index."""

import argparse
import sys

import numpy as np
from safetensors.numpy import save_file

from weft.checkpoints import merge_checkpoint as merge
from weft.errors import WeftError


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint")
    parser.add_argument("-o", "--output")
    parser.add_argument("--compare", metavar="CHECKPOINT")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-5)
    args = parser.parse_args()
    try:
        index, merged = merge(args.checkpoint)
        other = merge(args.compare)[1] if args.compare else None
    except (OSError, WeftError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.output:
        save_file(merged, args.output, metadata={"step": str(index["step"])})
        print(f"wrote {args.output}: {len(merged)} tensors, step "
              f"{index['step']}")
    if args.compare:
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
