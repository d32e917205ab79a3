#!/usr/bin/env python3
"""Import each model of ../shared/models, evaluate it with the reference
evaluator (weft-eval) on its test_data_set_0 inputs, before and after
weft-fuse-idioms, and compare with the expected outputs (rtol 1e-4, atol
1e-5, the models' documented tolerance). Symbolic dims are bound from the
shapes of the input files. Prints one line per model and variant and a final
`N passed, M failed`."""

import argparse
import pathlib
import subprocess
import sys
import tempfile

import onnx

from test_data import dim_bindings, graph_inputs, load_pb
from weft import tool


def bindings_for(model_dir):
    """--dim values for the model, read off its test input files."""
    model = onnx.load(str(model_dir / "model.onnx"), load_external_data=False)
    data = model_dir / "test_data_set_0"
    shapes = [load_pb(data / f"input_{i}.pb").shape
              for i in range(len(graph_inputs(model)))]
    return dim_bindings(model, shapes)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", required=True, type=pathlib.Path)
    args = parser.parse_args()
    passed = failed = 0
    models = sorted(p for p in args.models.iterdir() if (p / "model.onnx").exists())
    with tempfile.TemporaryDirectory() as tmp:
        for model_dir in models:
            for variant, extra in (("imported", []), ("fused", ["--fuse"])):
                mlir = pathlib.Path(tmp) / f"{model_dir.name}.{variant}.mlir"
                cmd = [str(tool("weft-translate")), "--import-onnx",
                       str(model_dir / "model.onnx"), "-o", str(mlir)] + extra
                for binding in bindings_for(model_dir):
                    cmd += ["--dim", binding]
                translate = subprocess.run(cmd, capture_output=True, text=True)
                ok = translate.returncode == 0
                detail = translate.stderr.strip()
                if ok:
                    evaluate = subprocess.run(
                        [str(tool("weft-eval")), str(mlir), "--data-dir",
                         str(model_dir / "test_data_set_0"), "--rtol", "1e-4",
                         "--atol", "1e-5"], capture_output=True, text=True)
                    ok = evaluate.returncode == 0
                    detail = (evaluate.stdout + evaluate.stderr).strip().replace("\n", "; ")
                print(f"{model_dir.name} ({variant}): {'PASS' if ok else 'FAIL'}: {detail}")
                passed += ok
                failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
