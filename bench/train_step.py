#!/usr/bin/env python3
"""Training-step benchmark: Weft's compiled training step (weftc --train,
one rank) beside PyTorch's eager training step on the same model, batch and
thread count, in one run. The model is utils/gen_gpt2.py's GPT-2-style
model (default: the bundled demo model, and a wider one); both train in
float32 with AdamW and clipping. Prints median tokens per second of each
and the ratio Weft / PyTorch."""

import argparse
import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from weft import tool

ROOT = pathlib.Path(__file__).resolve().parent.parent
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch


def weft_tokens_per_second(work, model, steps, threads):
    exe = work / (model.stem + "_train")
    subprocess.run([str(tool("weftc")), str(model), "--train", "-o",
                    str(exe)], check=True)
    log = work / (model.stem + ".jsonl")
    subprocess.run([str(exe), "--data", str(ROOT / "data" /
                                            "tinyshakespeare.tokens"),
                    "--steps", str(steps), "--lr", "1e-3", "--log", str(log),
                    "--print-every", str(steps * 10), "--threads",
                    str(threads)], check=True, stdout=subprocess.DEVNULL)
    rates = [json.loads(line)["tokens_per_s"] for line in open(log)][2:]
    return sorted(rates)[len(rates) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--configs",
                        default="2x64x4:32x8,4x256x8:64x8,4x256x4:128x4,"
                        "12x768x12x50257:128x2@1",
                        help="layers x hidden x heads [x vocab] : seq x batch "
                        "[@ threads], ... (vocab 256 and --threads unless "
                        "given; the last is GPT-2 small's shape)")
    args = parser.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'model':>28} {'threads':>7} {'weft tok/s':>11} "
          f"{'torch tok/s':>11} {'weft/torch':>10}")
    for config in args.configs.split(","):
        shape, data = config.split(":")
        layers, hidden, heads, *vocab = map(int, shape.split("x"))
        vocab = vocab[0] if vocab else 256
        data, _, thread_counts = data.partition("@")
        seq, batch = map(int, data.split("x"))
        model = work / (f"train_l{layers}_h{hidden}_v{vocab}_s{seq}_b{batch}"
                        ".onnx")
        subprocess.run([sys.executable, str(ROOT / "utils" / "gen_gpt2.py"),
                        "--layers", str(layers), "--hidden", str(hidden),
                        "--heads", str(heads), "--vocab", str(vocab), "--seq",
                        str(seq), "--batch", str(batch), "-o", str(model)],
                       check=True, stdout=subprocess.DEVNULL)
        params = {t.name: numpy_helper.to_array(t)
                  for t in onnx.load(str(model)).graph.initializer
                  if t.name.endswith((".weight", ".bias"))}
        np.savez(work / (model.stem + ".npz"), **params)
        for threads in map(int, (thread_counts or args.threads).split(",")):
            weft = weft_tokens_per_second(work, model, args.steps,
                                          threads)
            seconds = float(subprocess.run(
                [TORCH_PYTHON, str(ROOT / "bench" / "torch_train_step.py"),
                 str(work / (model.stem + ".npz")), "--layers", str(layers),
                 "--heads", str(heads), "--batch", str(batch), "--seq",
                 str(seq), "--steps", str(args.steps), "--threads",
                 str(threads)], check=True, capture_output=True,
                text=True).stdout.strip())
            torch = batch * seq / seconds
            print(f"{model.stem:>28} {threads:>7} {weft:>11.0f} {torch:>11.0f} "
                  f"{weft / torch:>9.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
