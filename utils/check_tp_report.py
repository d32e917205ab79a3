#!/usr/bin/env python3
"""Reads `weftc --report` of a model partitioned with tensor parallelism over
`--ranks` ranks (on stdin) and checks that each rank holds at most its share
of the split parameters plus the replicated ones, and that the replicated
ones are the small tensors Megatron keeps whole: norm scales and shifts,
biases of row-split layers, position embeddings. Prints what it checked;
exits 1 on a violation."""

import argparse
import re
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, required=True)
    args = parser.parse_args()
    text = sys.stdin.read()
    per_rank, whole = map(int, re.search(
        r"^parameters: (\d+) bytes \(whole model: (\d+) bytes\)", text, re.M).groups())
    split, split_whole = map(int, re.search(r"^  split: (\d+) bytes of (\d+)", text, re.M).groups())
    replicated_bytes, count, names = re.search(
        r"^  replicated: (\d+) bytes in (\d+) tensors:(.*)$", text, re.M).groups()
    replicated_bytes = int(replicated_bytes)
    tensors = names.split()
    problems = []
    if per_rank > split_whole / args.ranks + replicated_bytes:
        problems.append(f"{per_rank} bytes per rank > {split_whole}/{args.ranks} "
                        f"+ {replicated_bytes}")
    if split * args.ranks != split_whole:
        problems.append(f"split parameters: {split} x {args.ranks} != {split_whole}")
    small = re.compile(r"(ln|norm|LayerNorm).*\.(weight|bias)|\.bias|wpe|position")
    for tensor in tensors:
        name = tensor.split("[")[0]
        if not small.search(name):
            problems.append(f"'{tensor}' is replicated")
    print(f"per rank: {per_rank} bytes; split share: {split_whole // args.ranks}; "
          f"replicated: {replicated_bytes} bytes in {len(tensors)} small tensors; "
          f"whole model: {whole} bytes")
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
