#!/usr/bin/env python3
"""Compares the per-step losses of two training logs (JSONL, as written by
`--log`), or another logged value (--key grad_norm): every step from --from
to --steps must agree within --rtol relative (--rtol 0: bit for bit, as the
logs print floats exactly). Prints the largest difference and one line per
disagreeing step."""

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
    parser.add_argument("--key", default="loss", help="the value compared")
    args = parser.parse_args()
    a, b = values(args.reference, args.key), values(args.other, args.key)
    worst, bad = 0.0, 0
    for step in range(args.first, args.steps + 1):
        if step not in a or step not in b:
            print(f"step {step}: missing")
            bad += 1
            continue
        difference = abs(a[step] - b[step]) / abs(a[step])
        worst = max(worst, difference)
        if difference > args.rtol:
            print(f"step {step}: {a[step]} vs {b[step]}")
            bad += 1
    print(f"{args.steps - args.first + 1} steps, largest relative difference {worst:.2e}, "
          f"{bad} over {args.rtol:g}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
