#!/usr/bin/env python3
"""Local SGD (weftc --dp-sync every=K) checked by construction from the
checkpoints of one run saved with `weft-run ... --save-replicas`: at each
saved step, every parameter and Adam moment of the averaged checkpoint
`DIR/step-N` must be the mean of the replicas' own checkpoints
`DIR/replica-R/step-N`, and the replicas must differ (else the average
proves nothing). `--same NAME=A:B` also checks that checkpoint A (one of the
replicas, say) equals checkpoint B of an independent run (the one-rank
program of that replica's rows).

Each tensor is compared as its largest absolute difference over its largest
absolute value (Adam's second moments are ~1e-8 where parameters are ~1);
every tensor within --rtol (default 1e-5) passes; `--allow PART=RTOL`
gives the tensors whose names contain PART their own bound in the `--same`
checks (say why where it is used). Prints one line per check; exits 1
naming the first tensor over its bound."""

import argparse
import glob
import os
import sys

import numpy as np

from weft.checkpoints import merge_checkpoint


def difference(value, reference):
    """max |value - reference| / max |reference| (0 when both are zero)."""
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    gap = float(np.max(np.abs(value - reference))) if reference.size else 0.0
    return gap / scale if scale > 0 else gap


def tensors(path):
    """The checkpoint's float tensors (parameters and optimizer state)."""
    _, merged = merge_checkpoint(path)
    return {name: value.astype(np.float64) for name, value in merged.items()
            if value.dtype.kind == "f"}


def compare(label, value, reference, rtol, allowed=()):
    """Every tensor of `value` against `reference` (within `rtol`, or the
    bound of the first (part, bound) in `allowed` whose part its name
    contains); returns the worst difference of those held to `rtol`, or
    exits naming the first tensor over its bound."""
    if set(value) != set(reference):
        sys.exit(f"FAIL {label}: the tensors differ: "
                 f"{sorted(set(value) ^ set(reference))}")
    worst = 0.0
    for name in sorted(reference):
        bound = next((b for part, b in allowed if part in name), rtol)
        gap = difference(value[name], reference[name])
        if gap > bound:
            sys.exit(f"FAIL {label}: tensor '{name}' differs by {gap:.3g} "
                     f"(relative to its largest value), over {bound:g}")
        if bound == rtol:
            worst = max(worst, gap)
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ckpt_dir", help="the run's --ckpt-dir")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--same", action="append", default=[], metavar="A:B",
                        help="checkpoint A must equal checkpoint B")
    parser.add_argument("--allow", action="append", default=[],
                        metavar="PART=RTOL",
                        help="in --same: tensors named with PART within RTOL")
    args = parser.parse_args()

    steps = sorted(os.path.basename(p)
                   for p in glob.glob(os.path.join(args.ckpt_dir, "step-*")))
    replicas = sorted(glob.glob(os.path.join(args.ckpt_dir, "replica-*")))
    if not steps or len(replicas) < 2:
        sys.exit(f"FAIL: '{args.ckpt_dir}' needs step-N checkpoints and two or "
                 "more replica-R directories (weft-run --save-replicas)")
    for step in steps:
        averaged = tensors(os.path.join(args.ckpt_dir, step))
        own = [tensors(os.path.join(r, step)) for r in replicas]
        mean = {name: sum(o[name] for o in own) / len(own) for name in averaged}
        worst = compare(f"{step}: the average of {len(own)} replicas", averaged,
                        mean, args.rtol)
        apart = max(difference(own[1][name], own[0][name]) for name in averaged)
        if apart <= 100 * args.rtol:
            sys.exit(f"FAIL {step}: the replicas differ by {apart:.3g} at most: "
                     "too little for the average to show anything")
        print(f"PASS {step}: {len(averaged)} tensors are the mean of "
              f"{len(own)} replicas within {worst:.2g} (replicas differ by up "
              f"to {apart:.2g})")
    allowed = [(part, float(bound)) for part, _, bound in
               (text.partition("=") for text in args.allow)]
    for pair in args.same:
        first, _, second = pair.partition(":")
        worst = compare(f"{first} against {second}", tensors(first),
                        tensors(second), args.rtol, allowed)
        print(f"PASS {os.path.relpath(first, args.ckpt_dir)} equals "
              f"{second.split(os.sep)[-2]}/{os.path.basename(second)} within "
              f"{worst:.2g}" + (" (and --allow)" if allowed else ""))


if __name__ == "__main__":
    main()
