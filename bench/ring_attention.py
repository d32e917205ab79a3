#!/usr/bin/env python3
"""Ring attention's causal load balancing, measured: the head/tail layout
(`--cp-attention ring`) beside one contiguous chunk per rank
(`--cp-attention ring-contiguous`), in one run.

A GPT with a long sequence (attention dominates its step) is compiled for
`--mesh cp=N` in both layouts and trained for a few steps with `--trace`.
For every step after the first, each rank's busy time is the step minus
its waits in collectives (the ring's shifts, the gradients' all-reduce);
medians over the steps resist a busy machine's outliers. Printed per
layout: the median step, each rank's busy time and the spread between the
busiest and the idlest rank; then the head/tail layout's busy time over
the contiguous one's.

Under a causal mask the contiguous ring computes all n blocks of its
queries (the later ones fully masked); the head/tail ranks compute the
diagonal block's three needed quarters and half a block per later step,
(2n+1)/(4n) of the attention FLOPs (0.625 at n=2), and stay balanced.
Their blocks are also a quarter of the size, kinder to the caches, so the
measured ratio can fall below the FLOP ratio. Exits non-zero when the
head/tail layout is not faster. Both layouts give every rank the same
work (the contiguous ring computes its masked blocks too), so their
spread measures the machine's noise, printed for that.

Each rank needs a core of its own (the default, cp=2, fits a 2-core
machine); with fewer cores the ranks take turns and the times measure the
machine."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from statistics import median

from weft import tool


def busy_per_step(trace, ranks):
    """{rank: [busy ms of each step after the first]}."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    busy = {}
    for rank in range(ranks):
        mine = [e for e in events if e["tid"] == rank]
        steps = sorted((e for e in mine if e["cat"] == "step"), key=lambda e: e["ts"])
        waits = [e for e in mine if e["cat"] == "collective"]
        busy[rank] = [
            (s["dur"] - sum(w["dur"] for w in waits
                            if s["ts"] <= w["ts"] <= s["ts"] + s["dur"])) / 1e3
            for s in steps[1:]]
    return busy


def step_ms(trace):
    """Median step time (ms) after the first, the slowest rank's."""
    steps = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e["cat"] == "step":
            steps.setdefault(int(e["name"].split()[1]), []).append(e["dur"])
    return median([max(steps[n]) for n in sorted(steps)[1:]]) / 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                       "tinyshakespeare.tokens"))
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--work", help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="weft-ring-bench-")
    os.makedirs(work, exist_ok=True)
    n = args.cp
    if (os.cpu_count() or 1) < n:
        print(f"warning: {n} ranks on {os.cpu_count()} cores: the ranks share cores")
    model = os.path.join(work, "gpt.onnx")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "utils",
                                                 "gen_gpt2.py"),
                    "--layers", str(args.layers), "--hidden", str(args.hidden),
                    "--heads", "4", "--seq", str(args.seq), "--batch", "1", "-o", model],
                   check=True, capture_output=True)
    print(f"GPT: {args.layers} layers, hidden {args.hidden}, causal, seq {args.seq}, batch 1; "
          f"cp={n}; {args.steps} steps (the first is not counted)")
    print(f"{'layout':<16} {'step (ms)':>9} " +
          " ".join(f"{'rank ' + str(r) + ' busy':>12}" for r in range(n)) + f" {'spread':>7}")
    busy_means, spreads = {}, {}
    for layout in ("ring-contiguous", "ring"):
        exe = os.path.join(work, layout)
        subprocess.run([str(tool("weftc")), model, "--train", "--mesh", f"cp={n}",
                        "--parallel", "cp", "--cp-attention", layout, "-o", exe],
                       check=True, capture_output=True)
        trace_path = exe + ".trace.json"
        subprocess.run([str(tool("weft-run")), exe, "--data", args.data,
                        "--steps", str(args.steps), "--print-every", str(args.steps),
                        "--trace", trace_path], check=True, capture_output=True, cwd=work)
        with open(trace_path) as f:
            trace = json.load(f)
        busy = busy_per_step(trace, n)
        means = [median(busy[r]) for r in range(n)]
        busy_means[layout] = sum(means) / n
        spreads[layout] = (max(means) - min(means)) / max(means)
        print(f"{layout:<16} {step_ms(trace):>9.1f} " +
              " ".join(f"{m:>12.1f}" for m in means) + f" {spreads[layout]:>7.3f}")
    ratio = busy_means["ring"] / busy_means["ring-contiguous"]
    floor = (2 * n + 1) / (4 * n)
    print(f"head/tail busy time / contiguous: {ratio:.3f} (attention's own work: "
          f"{floor:.3f} of the contiguous ring's)")
    if ratio >= 1:
        print("the head/tail layout is not faster")
    return 0 if ratio < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
