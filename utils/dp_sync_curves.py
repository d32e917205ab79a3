#!/usr/bin/env python3
"""Loss curves of local SGD (weftc --dp-sync every=K) against every-step
data parallelism: the demo's GPT (utils/gen_gpt2.py, sequence 32, batch 8)
on the bundled tiny-Shakespeare tokens, dp=4 ranks, AdamW, for each K of
--every (default 1,4,16; K=1 is ordinary data parallelism). Prints the mean
loss of each window of --window steps, one row per window, and the mean
of the last window relative to K=1's."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import weft

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data", "tinyshakespeare.tokens")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", default="1,4,16")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--dp", type=int, default=4)
    args = parser.parse_args()
    every = [int(k) for k in args.every.split(",")]
    curves = {}
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.onnx")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_gpt2.py"), "--seq", "32",
                        "--batch", "8", "-o", model], check=True, stdout=subprocess.DEVNULL)
        for k in every:
            program, log = os.path.join(work, f"k{k}"), os.path.join(work, f"k{k}.jsonl")
            subprocess.run([weft.tool("weftc"), model, "--train", "--mesh", f"dp={args.dp}",
                            "--parallel", "dp", "--dp-sync", f"every={k}", "-o", program],
                           check=True, stderr=subprocess.DEVNULL)
            subprocess.run([weft.tool("weft-run"), program, "--data", DATA, "--steps",
                            str(args.steps), "--lr", "3e-3", "--warmup", "20",
                            "--print-every", str(args.steps), "--log", log],
                           check=True, stdout=subprocess.DEVNULL)
            with open(log) as f:
                curves[k] = [json.loads(line)["loss"] for line in f]
    print("| steps | " + " | ".join(f"K = {k}" for k in every) + " |")
    print("|---|" + "---|" * len(every))
    windows = range(0, args.steps, args.window)
    means = {k: [sum(curves[k][w:w + args.window]) / len(curves[k][w:w + args.window])
                 for w in windows] for k in every}
    for i, w in enumerate(windows):
        last = min(w + args.window, args.steps)
        print(f"| {w + 1}-{last} | " + " | ".join(f"{means[k][i]:.3f}" for k in every) + " |")
    base = means[every[0]][-1]
    print("last window against K = %d: " % every[0] +
          ", ".join(f"K = {k} {100 * (means[k][-1] / base - 1):+.1f}%" for k in every[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
