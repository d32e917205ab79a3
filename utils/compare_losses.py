#!/usr/bin/env python3
"""Compares the per-step losses of two training logs (JSONL, as written by
`--log`), or other logged values (--key grad_norm --key lr, each checked):
every step from --from to --steps must agree within --rtol relative (--rtol
0: bit for bit, as the logs print floats exactly). Prints the largest
difference of each value and one line per disagreeing step."""

import argparse
import json
import sys


def values(path, key):
    with open(path) as f:
        return {row["step"]: row[key] for row in map(json.loads, f)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reference")
    parser.add_argument("other")
    parser.add_argument("--steps", type=int, required=True,
                        help="the last step compared")
    parser.add_argument("--from", dest="first", type=int, default=1,
                        help="the first step compared")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--key", action="append",
                        help="a value compared (repeatable; default loss)")
    args = parser.parse_args()
    bad = 0
    for key in args.key or ["loss"]:
        bad += compare(args, key)
    return 1 if bad else 0


def compare(args, key):
    """Prints the comparison of one logged value; returns the steps that
    disagree."""
    a, b = values(args.reference, key), values(args.other, key)
    worst, bad = 0.0, 0
    for step in range(args.first, args.steps + 1):
        if step not in a or step not in b:
            print(f"step {step}: {key} missing")
            bad += 1
            continue
        difference = abs(a[step] - b[step]) / max(abs(a[step]), 1e-30)
        worst = max(worst, difference)
        if difference > args.rtol:
            print(f"step {step}: {key} {a[step]} vs {b[step]}")
            bad += 1
    print(f"{key}: {args.steps - args.first + 1} steps, largest relative "
          f"difference {worst:.2e}, {bad} over {args.rtol:g}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
