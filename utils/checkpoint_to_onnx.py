#!/usr/bin/env python3
"""Writes an ONNX model whose weights are a Weft checkpoint's parameters:
every initializer named like a checkpoint parameter takes its value (the
optimizer state is left out), and an initializer the compiler tied to one
(it was that parameter's transpose, as a folded LM head is) takes the
trained value's transpose. The model may differ from the trained one in
batch size or sequence length, not in its parameters."""

import argparse
import sys

import onnx
from onnx import numpy_helper

from weft.checkpoints import merge_checkpoint as merge


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint")
    parser.add_argument("model")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    index, tensors = merge(args.checkpoint)
    params = {name: tensors[name] for name, entry in index["tensors"].items()
              if entry["role"] == "param"}
    model = onnx.load(args.model)
    originals = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
                 if len(t.dims) == 2}
    replaced = set()
    for i, initializer in enumerate(model.graph.initializer):
        value = params.get(initializer.name)
        if value is None:
            continue
        if list(value.shape) != list(initializer.dims):
            print(f"error: parameter '{initializer.name}' is {list(value.shape)} "
                  f"in the checkpoint but {list(initializer.dims)} in "
                  f"{args.model}", file=sys.stderr)
            return 1
        model.graph.initializer[i].CopyFrom(
            numpy_helper.from_array(value, initializer.name))
        replaced.add(initializer.name)
    for i, initializer in enumerate(model.graph.initializer):
        if initializer.name in params or len(initializer.dims) != 2:
            continue
        copy = originals[initializer.name]
        for name in replaced:
            source = originals.get(name)
            if source is not None and source.T.shape == copy.shape and \
                    (source.T == copy).all():
                model.graph.initializer[i].CopyFrom(
                    numpy_helper.from_array(params[name].T.copy(), initializer.name))
                break
    missing = sorted(set(params) - replaced)
    if missing:
        print(f"error: {args.model} has no initializer '{missing[0]}'",
              file=sys.stderr)
        return 1
    onnx.save(model, args.output)
    print(f"wrote {args.output}: {len(replaced)} parameters of step "
          f"{index['step']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
