#!/usr/bin/env python3
"""Measures each pipeline rank's idle fraction from a --trace timeline and
prints it beside the schedule's formula.

A compute-bound GPT (wide layers, long sequences, a small vocabulary) is
compiled for `--mesh pp=P` under GPipe, 1F1B, the interleaved schedule
(v = 2) and ZB-H1 and trained for a few steps with `--trace`. Traced steps start
together on every rank, so for each step the window is from the first
rank's start to the last rank's end, and a rank is busy while it runs its
step and is not waiting in a receive. Its idle fraction, averaged over the
steps after the first, is printed beside the bubble of the schedule:
(p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v*m+p-1) interleaved,
(p-1)/(3m+p-1) for ZB-H1 (forward, input-gradient and weight-gradient
passes of equal length), with the rank's mean forward and backward
instruction times (under ZB-H1 a backward instruction is one of the two
passes). The formula assumes stages of
equal speed; where one stage is slower its neighbour waits for it every
micro-batch, so the ranks' values spread around the formula by the
imbalance, and their mean is the pipeline's idle fraction. Exits non-zero
when that mean is further than --tolerance from the formula.

Each rank needs a core of its own: with fewer cores than ranks the ranks
take turns on them, and the timeline measures the machine, not the
schedule. The default, p = 2, fits the 2-core machine this project is
developed on."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from weft import tool


def instruction_times(trace, rank):
    """Mean forward and backward instruction times of `rank` (ms), without
    the receives inside them."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] == rank]
    recvs = [e for e in events if e["cat"] == "recv"]
    means = []
    for category in ("forward", "backward"):
        spans = [e for e in events if e["cat"] == category]
        busy = [s["dur"] - sum(r["dur"] for r in recvs
                               if s["ts"] <= r["ts"] <= s["ts"] + s["dur"]) for s in spans]
        means.append(sum(busy) / max(1, len(busy)) / 1e3)
    return means


def step_windows(trace):
    """Per step: (window start, window end, {rank: busy seconds})."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = {}
    for event in events:
        if event["cat"] == "step":
            number = int(event["name"].split()[1])
            steps.setdefault(number, []).append(event)
    results = []
    for number in sorted(steps):
        spans = steps[number]
        start = min(e["ts"] for e in spans)
        end = max(e["ts"] + e["dur"] for e in spans)
        busy = {}
        for span in spans:
            rank = span["tid"]
            waiting = sum(e["dur"] for e in events
                          if e["tid"] == rank and e["cat"] == "recv"
                          and span["ts"] <= e["ts"] <= span["ts"] + span["dur"])
            busy[rank] = span["dur"] - waiting
        results.append((number, start, end, busy))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                       "tinyshakespeare.tokens"))
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4, help="micro-batch size")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--work", help="scratch directory (default: a temporary one)")
    parser.add_argument("--reuse", action="store_true",
                        help="run the executables already in --work")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="weft-pipeline-bench-")
    os.makedirs(work, exist_ok=True)
    p, m = args.stages, args.microbatches
    cores = os.cpu_count() or 1
    if cores < p:
        print(f"warning: {p} ranks on {cores} cores: the ranks share cores and "
              "the measured idle time is not the schedule's")
    layers = 2 * p * 2  # two layers per stage with two chunks per rank
    model = os.path.join(work, "gpt.onnx")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "utils",
                                                 "gen_gpt2.py"),
                    "--layers", str(layers), "--hidden", str(args.hidden), "--heads", "4",
                    "--seq", str(args.seq), "--batch", str(args.batch), "-o", model],
                   check=True, capture_output=True)
    print(f"GPT: {layers} layers, hidden {args.hidden}, seq {args.seq}, micro-batch "
          f"{args.batch}; pp={p}, {m} micro-batches; {args.steps} steps (the first is "
          "not counted)")
    print(f"{'schedule':<16} {'rank':>4} {'F (ms)':>7} {'B (ms)':>7} {'idle (trace)':>13} "
          f"{'formula':>8} {'difference':>11}")
    worst = 0.0
    for schedule, chunks in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)):
        exe = os.path.join(work, schedule)
        if not (args.reuse and os.path.exists(exe)):
            subprocess.run([str(tool("weftc")), model, "--train", "--mesh",
                            f"pp={p}", "--microbatches", str(m), "--schedule", schedule,
                            "--virtual-stages", str(chunks), "-o", exe], check=True)
        trace_path = exe + ".trace.json"
        subprocess.run([str(tool("weft-run")), exe, "--data", args.data,
                        "--steps", str(args.steps), "--print-every", str(args.steps),
                        "--trace", trace_path], check=True, capture_output=True, cwd=work)
        with open(trace_path) as f:
            trace = json.load(f)
        windows = step_windows(trace)[1:]
        formula = (p - 1) / ((3 if schedule == "zb-h1" else chunks) * m + p - 1)
        name = schedule + (f" v={chunks}" if chunks > 1 else "")
        idles = []
        for rank in range(p):
            idle = sum(1 - busy[rank] / (end - start)
                       for _, start, end, busy in windows) / len(windows)
            idles.append(idle)
            forward, backward = instruction_times(trace, rank)
            print(f"{name:<16} {rank:>4} {forward:>7.1f} {backward:>7.1f} {idle:>13.3f} "
                  f"{formula:>8.3f} {idle - formula:>+11.3f}")
        mean = sum(idles) / p
        worst = max(worst, abs(mean - formula))
        print(f"{name:<16} {'mean':>4} {'':>7} {'':>7} {mean:>13.3f} {formula:>8.3f} "
              f"{mean - formula:>+11.3f}")
    verdict = "within" if worst <= args.tolerance else "NOT within"
    print(f"largest difference of a schedule's mean: {worst:.3f}, {verdict} "
          f"{args.tolerance} of the formula")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
