#!/usr/bin/env python3
"""Run a compiled byte-level GPT model (from weftc) on a prompt and print its
next-token prediction: the prompt's bytes are the token ids, right-padded to
the model's sequence length (the causal mask keeps padding from influencing
the last prompt position), and the logits at the last prompt position give
the distribution of the next byte."""

import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("executable")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--launcher", default=None,
                        help="run the executable through this launcher "
                             "(weft-run, for a partitioned model)")
    args = parser.parse_args()
    tokens = list(args.prompt.encode("utf-8"))[-args.seq:]
    ids = np.zeros((1, args.seq), dtype=np.int64)
    ids[0, :len(tokens)] = tokens
    with tempfile.TemporaryDirectory() as tmp:
        ids_path, logits_path = pathlib.Path(tmp) / "ids.npy", pathlib.Path(tmp) / "logits.npy"
        np.save(ids_path, ids)
        launcher = [args.launcher] if args.launcher else []
        subprocess.run(launcher + [args.executable, "--input", f"input_ids={ids_path}",
                                   "--output", f"logits={logits_path}"], check=True)
        logits = np.load(logits_path)[0, len(tokens) - 1].astype(np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    best = np.argsort(-probs)[:args.top]
    print(f"prompt: {args.prompt!r}")
    print("next byte: " + ", ".join(f"{bytes([int(t)])!r} {probs[t]:.3f}" for t in best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
