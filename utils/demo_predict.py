#!/usr/bin/env python3
"""Run a compiled byte-level GPT model (from weftc) on a prompt and print its
next-token prediction: the prompt's bytes are the token ids, right-padded to
the model's sequence length (the causal mask keeps padding from influencing
the last prompt position), and the logits at the last prompt position give
the distribution of the next byte."""

import argparse
import sys

import numpy as np

from weft import run_executable


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("executable")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--generate", type=int, default=0,
                        help="then continue the prompt greedily by this many "
                             "bytes")
    parser.add_argument("--launcher", default=None,
                        help="run the executable through this launcher "
                             "(weft-run, for a partitioned model)")
    args = parser.parse_args()
    launcher = [args.launcher] if args.launcher else []

    def next_byte_probabilities(text):
        tokens = list(text)[-args.seq:]
        ids = np.zeros((1, args.seq), dtype=np.int64)
        ids[0, :len(tokens)] = tokens
        logits = run_executable(launcher + [args.executable], {"input_ids": ids},
                                ["logits"])[0][0, len(tokens) - 1]
        probs = np.exp(logits.astype(np.float64) - logits.max())
        return probs / probs.sum()

    text = args.prompt.encode("utf-8")
    probs = next_byte_probabilities(text)
    best = np.argsort(-probs)[:args.top]
    print(f"prompt: {args.prompt!r}")
    print("next byte: " + ", ".join(f"{bytes([int(t)])!r} {probs[t]:.3f}" for t in best))
    if args.generate:
        for _ in range(args.generate):
            text += bytes([int(np.argmax(probs))])
            probs = next_byte_probabilities(text)
        print("greedy continuation: " +
              repr(text.decode("utf-8", errors="replace")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
