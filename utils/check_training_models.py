#!/usr/bin/env python3
"""Train each model of ../shared/models for --steps steps on the CPU
backend and on another --target (cuda-emulation: the CUDA target's kernels
run on the CPU, a test tool), in f32 and in bf16, and compare the two logs
step by step (loss, gradient norm, learning rate; utils/compare_losses.py):
f32 within --rtol (1e-5), bf16 within --bf16-rtol (2e-2; each backend's
bf16 against the other's).

A model trains when weftc can derive its training step: an integer input
holding token ids (`input_ids` where there are several) and a first output
with one row of logits per token. weftc's own one-line refusal is printed
for the others. Symbolic dims are bound from the test data, the tokens'
first dim to 2 and their last to 16; the step's other inputs (masks, token
types, positions, past keys and values) are drawn once like the test data
and fed to every step (`--input`); the corpus is the token file modulo the
model's vocabulary.

Prints one line per model and precision, then `N passed, M failed, K not
trained`."""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from check_compiled_models import random_like
from compare_losses import compare_logs
from test_data import graph_inputs, load_pb

BATCH, SEQ = 2, 16
NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
                "i32": np.int32, "i8": np.int8, "u8": np.uint8, "i1": np.bool_}


def token_input(model):
    """The input weftc trains on: `input_ids` among several integer inputs,
    else the only one (None: weftc says why not)."""
    integers = [i.name for i in graph_inputs(model)
                if i.type.tensor_type.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)]
    return "input_ids" if "input_ids" in integers else (integers[0] if len(integers) == 1 else None)


def bindings(model, test_inputs, tokens):
    """--dim bindings: the test data's, with the token input's first
    symbolic dim BATCH and its last SEQ."""
    bound = {}
    for info, array in zip(graph_inputs(model), test_inputs):
        dims = info.type.tensor_type.shape.dim
        for axis, dim in enumerate(dims):
            if not dim.dim_param or "+" in dim.dim_param:
                continue
            size = array.shape[axis]
            if info.name == tokens and len(dims) >= 2:
                size = BATCH if axis == 0 else SEQ if axis == len(dims) - 1 else size
            bound.setdefault(dim.dim_param, size)
            if info.name == tokens:
                bound[dim.dim_param] = size
    return [arg for name, size in sorted(bound.items()) for arg in ("--dim", f"{name}={size}")]


def fixed_inputs(manifest, model, test_inputs, tokens, work, rng):
    """--input arguments: each input of the step besides the trainer's own,
    drawn like its test data at the step's shape."""
    test = {info.name: array for info, array in zip(graph_inputs(model), test_inputs)}
    args = []
    for buffer in manifest["buffers"]:
        name = buffer["name"]
        if buffer["role"] != "input" or name == tokens or name not in test:
            continue
        if buffer["dtype"] not in NUMPY_DTYPES:
            sys.exit(f"input '{name}' is {buffer['dtype']}, which numpy cannot hold")
        array = np.resize(test[name], buffer["shape"]).astype(NUMPY_DTYPES[buffer["dtype"]])
        info = next(i for i in graph_inputs(model) if i.name == name)
        if array.dtype.kind == "f":
            array = random_like(info, array, rng)
        path = work / f"{name}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    return args


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", required=True, type=pathlib.Path)
    parser.add_argument("--weftc", required=True)
    parser.add_argument("--data", required=True, help="a token file (uint16)")
    parser.add_argument("--target", default="cuda-emulation")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--bf16-rtol", type=float, default=2e-2)
    parser.add_argument("--only", nargs="*", help="model directory names")
    args = parser.parse_args()
    corpus = np.fromfile(args.data, dtype="<u2")
    passed = failed = untrained = 0
    rng = np.random.default_rng(0)
    for model_dir in sorted(p for p in args.models.iterdir() if (p / "model.onnx").exists()):
        if args.only and model_dir.name not in args.only:
            continue
        model = onnx.load(str(model_dir / "model.onnx"), load_external_data=False)
        data = model_dir / "test_data_set_0"
        test_inputs = [load_pb(data / f"input_{i}.pb") for i in range(len(graph_inputs(model)))]
        tokens = token_input(model)
        dims = bindings(model, test_inputs, tokens)
        with tempfile.TemporaryDirectory() as tmp:
            work = pathlib.Path(tmp)
            common = [args.weftc, str(model_dir / "model.onnx"), "--train", *dims]
            if tokens:
                common += ["--token-input", tokens]
            compiled = subprocess.run(common + ["-o", str(work / "cpu-f32")],
                                      capture_output=True, text=True)
            if compiled.returncode != 0:
                reason = [line for line in compiled.stderr.splitlines() if "error:" in line]
                reason = re.sub(r"^.*?error: (weft-derive-train-step: )?", "",
                                reason[0] if reason else compiled.stderr.strip())
                print(f"{model_dir.name}: not trained: {re.sub(r' [(]at loc.*$', '', reason)}")
                untrained += 1
                continue
            manifest = json.loads(subprocess.run([str(work / "cpu-f32"), "--print-manifest"],
                                                 capture_output=True, text=True, check=True).stdout)
            training = manifest["training"]
            ids = next(b for b in manifest["buffers"] if b["name"] == training["token_input"])
            vocab = min(training["vocab"], ids.get("index_bound", training["vocab"]))
            (corpus % vocab).astype("<u2").tofile(work / "corpus.tokens")
            feeds = fixed_inputs(manifest, model, test_inputs, tokens, work, rng)
            run = ["--data", str(work / "corpus.tokens"), "--steps", str(args.steps),
                   "--lr", "3e-3", "--warmup", str(args.steps // 2), *feeds]
            for precision, rtol in (("f32", args.rtol), ("bf16", args.bf16_rtol)):
                logs = {}
                for target in ("cpu", args.target):
                    exe = work / f"{target}-{precision}"
                    if not exe.exists():
                        subprocess.run(common + ["--target", target, "--precision", precision,
                                                 "-o", str(exe)],
                                       capture_output=True, text=True, check=True)
                    logs[target] = work / f"{target}-{precision}.jsonl"
                    trained = subprocess.run([str(exe), *run, "--log", str(logs[target])],
                                             capture_output=True, text=True)
                    if trained.returncode != 0:
                        sys.exit(f"{model_dir.name} {target} {precision}: "
                                 f"{trained.stderr.strip()}")
                result = compare_logs(logs["cpu"], logs[args.target], args.steps, rtol=rtol)
                print(f"{model_dir.name} {precision}: {'PASS' if result.ok else 'FAIL'} "
                      f"(vocab {vocab}, {result.describe()})")
                passed += result.ok
                failed += not result.ok
    print(f"{passed} passed, {failed} failed, {untrained} not trained")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
