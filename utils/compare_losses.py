#!/usr/bin/env python3
"""The one comparison of two training logs (JSONL, as `--log` writes them)
that every multi-rank training test uses, from lit or through
`compare_logs` (utils/check_pipeline.py, check_torch_exports.py,
check_hf_exports.py): per step, the loss, the pre-clip gradient norm and
the learning rate (`--key` picks others; each checked), relative
difference within --rtol (default 1e-5; --rtol 0: bit for bit, as the logs
print floats exactly). The gradient norm is compared because AdamW with a
global clip gives the same losses when every gradient is scaled by one
factor (a sum where a mean is due passes on losses alone).

Prints each value's largest difference, then either `loss, grad_norm, lr:
steps F-L agree within RTOL` or the first differing step with both values
(and exits 1)."""

import argparse
import json
import sys

DEFAULT_KEYS = ("loss", "grad_norm", "lr")
DEFAULT_RTOL = 1e-5


def load(path):
    """{step: row} of a log."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {row["step"]: row for row in rows}


class Comparison:
    """Two logs compared over steps first..last: `worst[key]` (the largest
    relative difference), `over[key]` (how many steps exceed rtol) and
    `first_difference` ((step, key, reference value, other value) or
    None)."""

    def __init__(self, reference, other, first, last, rtol, keys):
        self.first, self.last, self.rtol, self.keys = first, last, rtol, list(keys)
        self.worst = {key: 0.0 for key in self.keys}
        self.over = {key: 0 for key in self.keys}
        self.first_difference = None
        for step in range(first, last + 1):
            for key in self.keys:
                a = reference.get(step, {}).get(key)
                b = other.get(step, {}).get(key)
                if a is None or b is None:
                    difference = float("inf")
                else:
                    difference = abs(a - b) / max(abs(a), 1e-30)
                    self.worst[key] = max(self.worst[key], difference)
                if difference > rtol:
                    self.over[key] += 1
                    if self.first_difference is None:
                        self.first_difference = (step, key, a, b)

    @property
    def ok(self):
        return self.first_difference is None

    def describe(self):
        """One line: the largest difference of each value, and the first
        differing step."""
        worst = ", ".join(f"{key} {self.worst[key]:.1e}" for key in self.keys)
        line = f"steps {self.first}-{self.last}, largest relative difference: {worst}"
        if self.first_difference:
            step, key, a, b = self.first_difference
            line += f"; first difference: step {step}: {key} {a} (reference) vs {b}"
        return line


def compare_logs(reference, other, last, first=1, rtol=DEFAULT_RTOL, keys=DEFAULT_KEYS):
    """Compares the logs at paths `reference` and `other`."""
    return Comparison(load(reference), load(other), first, last, rtol, keys)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference")
    parser.add_argument("other")
    parser.add_argument("--steps", type=int, required=True,
                        help="the last step compared")
    parser.add_argument("--from", dest="first", type=int, default=1,
                        help="the first step compared")
    parser.add_argument("--rtol", type=float, default=DEFAULT_RTOL)
    parser.add_argument("--key", action="append",
                        help="a value compared (repeatable; default: loss, grad_norm, lr)")
    args = parser.parse_args()
    keys = args.key or DEFAULT_KEYS
    reference = load(args.reference)
    missing = [key for key in keys if not any(key in row for row in reference.values())]
    if missing:
        print(f"error: {args.reference} logs no '{missing[0]}'")
        return 1
    result = Comparison(reference, load(args.other), args.first, args.steps, args.rtol, keys)
    for key in keys:
        print(f"{key}: {args.steps - args.first + 1} steps, largest relative "
              f"difference {result.worst[key]:.2e}, {result.over[key]} over {args.rtol:g}")
    if not result.ok:
        step, key, a, b = result.first_difference
        print(f"first difference: step {step}: {key} {a} (reference) vs {b}")
        return 1
    print(f"{', '.join(keys)}: steps {args.first}-{args.steps} agree within {args.rtol:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
