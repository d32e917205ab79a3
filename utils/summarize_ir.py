#!/usr/bin/env python3
"""Print a short summary of a Weft IR file: inputs, outputs, weights (count and
parameters) and how many of each weft op it holds."""

import collections
import math
import re
import sys


def elements(type_text):
    dims = type_text.split("x")[:-1]
    return math.prod(int(d) for d in dims) if dims else 1


def main(path):
    text = open(path).read()
    params = re.findall(r"tensor<([^>]*)> \{weft\.param = \"([^\"]+)\"\}", text)
    inputs = re.findall(r"tensor<([^>]*)> \{weft\.input = \"([^\"]+)\"\}", text)
    outputs = re.search(r"weft\.outputs = \[([^\]]*)\]", text)
    ops = collections.Counter(re.findall(r"= (weft\.[a-z_]+)", text))
    print(f"inputs:  " + ", ".join(f"{n} tensor<{t}>" for t, n in inputs))
    print(f"outputs: {outputs.group(1) if outputs else '?'}")
    total = sum(elements(t) for t, _ in params)
    print(f"weights: {len(params)} tensors, {total:,} parameters")
    print("ops:     " + ", ".join(f"{op.split('.')[1]} x{n}" for op, n in ops.most_common()))


if __name__ == "__main__":
    main(sys.argv[1])
