#!/usr/bin/env python3
"""Imports the models of utils/gen_op_models.py (Tile, GatherElements,
ScatterND, Gather off axis 0 and strided or reversed slices, with trained
weights on their paths) and gen_moe.py's mixture of experts, compiles each one's loss and gradients (weftc --program=gradients), runs
them on the export's batch and compares the loss and every parameter's
gradient with PyTorch autograd in float64: max |weft - torch| / max |torch|
<= --rtol per tensor. Prints one line per tensor and `N passed, M failed`."""

import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from weft import run_executable

# model: (generator, its options): gen_op_models.py's models, and
# gen_moe.py's mixture of experts (top-2 routing with a capacity, dense
# dispatch and combine, the load-balancing loss added to the loss).
MODELS = {name: ("gen_op_models.py", ["--model", name])
          for name in ["tile", "gather-elements", "scatter-nd", "gather-axis", "strided-slice"]}
MODELS["moe"] = ("gen_moe.py", ["--batch", "4", "--seq", "32"])


def expected_gradients(path, reference):
    """{initializer: PyTorch's gradient of it}. Each torch parameter is the
    initializer of its name, or one of equal value (the exporter merges
    initializers of equal value, as all-ones norm scales, and folds a
    position table looked up whole), or one holding its transpose (a
    linear's weight); an initializer that stands for several parameters
    has the sum of their gradients."""
    initializers = {t.name: numpy_helper.to_array(t)
                    for t in onnx.load(path).graph.initializer}
    gradients = {}
    for key in reference:
        if not key.startswith("grad:"):
            continue
        param = key[len("grad:"):]
        value, gradient = reference[param], reference[key]
        if param in initializers and np.array_equal(initializers[param], value):
            name = param
        else:
            name = next((name for name, array in initializers.items()
                         if array.shape == value.shape and np.array_equal(array, value)), None)
            if name is None:
                name = next(name for name, array in initializers.items()
                            if array.shape == value.T.shape and np.array_equal(array, value.T))
                gradient = gradient.T
        gradients[name] = gradients.get(name, 0) + gradient
    return gradients


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weftc", required=True)
    parser.add_argument("--torch-python", default="/usr/bin/python3")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    args = parser.parse_args()
    unknown = [name for name in args.models.split(",") if name not in MODELS]
    if unknown:
        parser.error(f"unknown model '{unknown[0]}'")
    here = pathlib.Path(__file__).parent
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            generator, options = MODELS[name]
            stem = pathlib.Path(tmp) / name
            if generator == "gen_moe.py":
                options = options + ["-o", f"{stem}.onnx", "--reference", str(stem)]
            else:
                options = options + ["-o", str(stem)]
            subprocess.run([args.torch_python, str(here / generator), *options], check=True)
            reference = dict(np.load(f"{stem}.npz"))
            gradients = expected_gradients(f"{stem}.onnx", reference)
            exe = f"{stem}.grads"
            subprocess.run([args.weftc, f"{stem}.onnx", "--program=gradients",
                            "-o", exe], check=True)
            outputs = ["loss"] + [f"grad:{name}" for name in gradients]
            results = run_executable(
                [exe], {"input_ids": reference["input_ids"],
                        "labels": reference["labels"]}, outputs)
            expected_values = [reference["loss"]] + list(gradients.values())
            for output, value, expected in zip(outputs, results, expected_values):
                scale = max(float(np.abs(expected).max()), 1e-30)
                error = (float(np.abs(value.astype(np.float64) - expected).max())
                         / scale if value.shape == expected.shape else float("inf"))
                ok = error <= args.rtol
                print(f"{name} {output}: {'PASS' if ok else 'FAIL'}: "
                      f"relative error {error:.2e}")
                passed += ok
                failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
