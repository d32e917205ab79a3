#!/usr/bin/env python3
"""Imports the models of utils/gen_op_models.py (Tile, GatherElements,
ScatterND, Gather off axis 0 and strided or reversed slices, with trained
weights on their paths),
compiles each one's loss and gradients (weftc --program=gradients), runs
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

MODELS = ["tile", "gather-elements", "scatter-nd", "gather-axis", "strided-slice"]


def exported_names(path, reference):
    """Each torch parameter's initializer: the same name, or (a linear's
    weight, folded transposed by the exporter) the one holding its
    transpose."""
    initializers = {t.name: numpy_helper.to_array(t)
                    for t in onnx.load(path).graph.initializer}
    names = {}
    for key in reference:
        if not key.startswith("grad:"):
            continue
        param = key[len("grad:"):]
        if param in initializers:
            names[param] = param
            continue
        value = reference[param]
        names[param] = next(name for name, array in initializers.items()
                            if array.shape == value.T.shape
                            and np.array_equal(array, value.T))
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weftc", required=True)
    parser.add_argument("--torch-python", default="/usr/bin/python3")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    here = pathlib.Path(__file__).parent
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            stem = pathlib.Path(tmp) / name
            subprocess.run([args.torch_python, str(here / "gen_op_models.py"),
                            "--model", name, "-o", str(stem)], check=True)
            reference = dict(np.load(f"{stem}.npz"))
            onnx_names = exported_names(f"{stem}.onnx", reference)
            exe = f"{stem}.grads"
            subprocess.run([args.weftc, f"{stem}.onnx", "--program=gradients",
                            "-o", exe], check=True)
            outputs = ["loss"] + [f"grad:{onnx_names[p]}" for p in onnx_names]
            results = run_executable(
                [exe], {"input_ids": reference["input_ids"],
                        "labels": reference["labels"]}, outputs)
            expected_values = [reference["loss"]] + [
                reference[f"grad:{p}"] if onnx_names[p] == p
                else reference[f"grad:{p}"].T for p in onnx_names]
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
