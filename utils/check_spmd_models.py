#!/usr/bin/env python3
"""Run models partitioned over 4 ranks and compare them with the same model
compiled for one rank, on the same inputs (rtol 1e-4, atol 1e-5).

Each model is compiled once without a mesh and once per strategy
(default dp=4, tp=4, dp=2 x tp=2, tp=2 with sequence parallelism; tp=2
on request), the partitioned
executables run under weft-run (4 ranks oversubscribed on this machine's
cores), and every output is compared. A symbolic batch dim is bound to
--batch so that data parallelism has a batch to split; inputs are random,
shaped and scaled like the model's test data. Prints one line per model and
strategy, then `N passed, M failed`."""

import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from check_compiled_models import compare, random_like
from test_data import graph_inputs, load_pb
from weft import run_executable

STRATEGIES = {
    "dp=4": ["--mesh", "dp=4", "--parallel", "dp"],
    "tp=2": ["--mesh", "tp=2", "--parallel", "megatron"],
    "tp=4": ["--mesh", "tp=4", "--parallel", "megatron"],
    "dp=2,tp=2": ["--mesh", "dp=2,tp=2", "--parallel", "dp,megatron"],
    "tp=2+sp": ["--mesh", "tp=2", "--parallel", "megatron",
                "--sequence-parallel"],
}


def batched_inputs(model, test_inputs, batch, rng):
    """Inputs with every symbolic batch-like dim (the first dim that is a
    dim_param) grown to `batch`, and the dim bindings for weftc."""
    bindings, arrays = {}, []
    for info, array in zip(graph_inputs(model), test_inputs):
        dims = info.type.tensor_type.shape.dim
        shape = list(array.shape)
        for axis, dim in enumerate(dims):
            if dim.dim_param and "+" not in dim.dim_param:
                if dim.dim_param not in bindings:
                    bindings[dim.dim_param] = (
                        batch if axis == _batch_axis(dims) else shape[axis])
                shape[axis] = bindings[dim.dim_param]
        # Tile the test data to the new shape, then draw fresh values like it.
        tiled = np.resize(array, shape) if array.size else np.zeros(shape, array.dtype)
        arrays.append(random_like(info, tiled, rng) if tiled.dtype.kind == "f"
                      else _fresh_ints(tiled, array, rng))
    return arrays, [f"{k}={v}" for k, v in sorted(bindings.items())]


def _batch_axis(dims):
    for axis, dim in enumerate(dims):
        if dim.dim_param:
            return axis
    return -1


def _fresh_ints(tiled, original, rng):
    if tiled.dtype == np.bool_ or np.all((original == 0) | (original == 1)):
        return tiled
    high = max(int(original.max()) + 1, 1)
    return rng.integers(0, high, size=tiled.shape).astype(tiled.dtype)


def check_model(path, test_inputs, args, rng, work):
    model = onnx.load(str(path), load_external_data=False)
    names = [i.name for i in graph_inputs(model)]
    outputs = [o.name for o in model.graph.output]
    inputs, bindings = batched_inputs(model, test_inputs, args.batch, rng)
    dims = [x for b in bindings for x in ("--dim", b)]
    single = work / "single"
    compiled = subprocess.run([args.weftc, str(path), *dims, "-o", str(single)],
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        return [(name, False, compiled.stderr.strip()) for name in args.strategies]
    reference = run_executable([str(single)], dict(zip(names, inputs)), outputs)
    results = []
    for name in args.strategies:
        flags = STRATEGIES[name]
        exe = work / name.replace("=", "").replace(",", "_").replace("+", "_")
        pad = ["--pad-uneven"] if args.pad_uneven else []
        compiled = subprocess.run([args.weftc, str(path), *dims, *flags, *pad,
                                   "-o", str(exe)], capture_output=True, text=True)
        if compiled.returncode != 0:
            results.append((name, False, compiled.stderr.strip()))
            continue
        try:
            actual = run_executable([args.weft_run, "--timeout", "300", str(exe)],
                                    dict(zip(names, inputs)), outputs)
        except RuntimeError as error:
            results.append((name, False, str(error)))
            continue
        checks = [(o,) + compare(a, e) for o, a, e in zip(outputs, actual, reference)]
        worst = max(c[2] for c in checks)
        ok = all(c[1] for c in checks)
        results.append((name, ok, f"max abs diff {worst:.3g}"
                        + ("" if ok else " MISMATCH in " +
                           ", ".join(c[0] for c in checks if not c[1]))))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weftc", required=True)
    parser.add_argument("--weft-run", required=True)
    parser.add_argument("--models", type=pathlib.Path,
                        help="directory of model directories (model.onnx and "
                             "test_data_set_0)")
    parser.add_argument("--only", nargs="*", default=[],
                        help="model directory names to run (default: all)")
    parser.add_argument("--onnx", nargs="*", default=[], type=pathlib.Path,
                        help="extra .onnx files (inputs drawn from zeros of "
                             "their declared shapes)")
    parser.add_argument("--strategies", nargs="*", choices=list(STRATEGIES),
                        default=["dp=4", "tp=4", "dp=2,tp=2", "tp=2+sp"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--pad-uneven", action="store_true",
                        help="let dims that do not divide be padded")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    passed = failed = 0
    models = []
    if args.models:
        for model_dir in sorted(p for p in args.models.iterdir()
                                if (p / "model.onnx").exists()):
            if args.only and model_dir.name not in args.only:
                continue
            model = onnx.load(str(model_dir / "model.onnx"), load_external_data=False)
            data = model_dir / "test_data_set_0"
            inputs = [load_pb(data / f"input_{i}.pb")
                      for i in range(len(graph_inputs(model)))]
            models.append((model_dir.name, model_dir / "model.onnx", inputs))
    for path in args.onnx:
        model = onnx.load(str(path), load_external_data=False)
        inputs = [np.load(path.with_suffix(f".input{i}.npy"))
                  for i in range(len(graph_inputs(model)))]
        models.append((path.stem, path, inputs))
    for name, path, inputs in models:
        with tempfile.TemporaryDirectory() as tmp:
            for strategy, ok, detail in check_model(path, inputs, args, rng,
                                                    pathlib.Path(tmp)):
                print(f"{name} {strategy}: {'PASS' if ok else 'FAIL'}: {detail}",
                      flush=True)
                passed += ok
                failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
