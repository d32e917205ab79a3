#!/usr/bin/env python3
"""Trains a small GPT with pipeline parallelism under each schedule and
compares its losses with one rank's.

For each mesh given, every schedule (gpipe, 1f1b, interleaved with two
model chunks per rank, zb-h1) is compiled with `weftc --mesh MESH --microbatches M`
and trained for --steps steps under weft-run; the reference is the same
model on one rank with `--grad-accum M`, which draws the same batches and
splits them into the same micro-batches. Every step's loss, gradient norm
and learning rate must agree within --rtol relative (compare_losses.py). Prints one line per configuration and a summary;
exits non-zero if any configuration disagrees or fails."""

import argparse
import os
import subprocess
import sys

from compare_losses import DEFAULT_RTOL, compare_logs
from weft import tool

SCHEDULES = [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)]


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise RuntimeError(f"{' '.join(command[:2])}...: "
                           f"{message[-1] if message else 'failed'}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--data", required=True, help="token file")
    parser.add_argument("--mesh", action="append", required=True,
                        help="a mesh with a pp axis, e.g. pp=2,dp=2 (repeatable)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rtol", type=float, default=DEFAULT_RTOL)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    weftc, weft_run = str(tool("weftc")), str(tool("weft-run"))
    generate = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen_gpt2.py")
    train = ["--data", args.data, "--steps", str(args.steps), "--lr", "3e-3",
             "--warmup", "5", "--seed", "7"]

    models, references = {}, {}

    def model(layers):
        if layers not in models:
            path = os.path.join(args.work, f"gpt{layers}.onnx")
            run([sys.executable, generate, "--layers", str(layers), "--hidden", "32",
                 "--heads", "2", "--seq", "16", "--batch", "2", "-o", path])
            models[layers] = path
        return models[layers]

    def reference(layers, microbatches):
        key = (layers, microbatches)
        if key not in references:
            exe = os.path.join(args.work, f"ref{layers}x{microbatches}")
            run([weftc, model(layers), "--train", "--grad-accum", str(microbatches),
                 "-o", exe])
            log = exe + ".jsonl"
            run([exe, *train, "--log", log])
            references[key] = log
        return references[key]

    failures = 0
    total = 0
    for mesh in args.mesh:
        axes = dict(part.split("=") for part in mesh.split(","))
        stages = int(axes["pp"])
        parallel = [name for axis, name in (("dp", "dp"), ("tp", "megatron")) if axis in axes]
        microbatches = max(2, stages)
        for schedule, chunks in SCHEDULES:
            total += 1
            layers = max(4, stages * chunks)
            name = f"{mesh} {schedule}" + (f" v={chunks}" if chunks > 1 else "")
            exe = os.path.join(args.work, f"{mesh.replace(',', '_').replace('=', '')}_{schedule}")
            command = [weftc, model(layers), "--train", "--mesh", mesh,
                       "--microbatches", str(microbatches), "--schedule", schedule,
                       "--virtual-stages", str(chunks), "-o", exe]
            if parallel:
                command += ["--parallel", ",".join(parallel)]
            try:
                expected = reference(layers, microbatches)
                run(command)
                run([weft_run, exe, *train, "--log", exe + ".jsonl"])
            except RuntimeError as error:
                print(f"{name}: FAILED: {error}")
                failures += 1
                continue
            result = compare_logs(expected, exe + ".jsonl", args.steps, rtol=args.rtol)
            failures += not result.ok
            print(f"{name}: {microbatches} micro-batches, {layers} layers, "
                  f"{result.describe()}: {'ok' if result.ok else 'DIFFERENT'}")
    print(f"{total - failures} of {total} configurations match one rank "
          f"within {args.rtol:g}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
