#!/usr/bin/env python3
"""The bundled tokenizer: byte-level, one token per UTF-8 byte (vocabulary
256, matching the bundled GPT model). Writes the tokens as a flat array of
little-endian uint16 (the nanoGPT / llm.c token-file layout) and can decode
such a file back.

    python3 utils/tokenize_bytes.py data/tinyshakespeare.txt -o data/tinyshakespeare.tokens
    python3 utils/tokenize_bytes.py --decode data/tinyshakespeare.tokens | head
"""

import argparse
import sys

import numpy as np


def encode(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype("<u2")


def decode(tokens: np.ndarray) -> str:
    return bytes(tokens.astype(np.uint8)).decode("utf-8", errors="replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("-o", "--output")
    parser.add_argument("--decode", action="store_true")
    args = parser.parse_args()
    if args.decode:
        sys.stdout.write(decode(np.fromfile(args.input, dtype="<u2")))
        return 0
    with open(args.input, encoding="utf-8") as f:
        tokens = encode(f.read())
    tokens.tofile(args.output)
    print(f"wrote {args.output}: {len(tokens)} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
