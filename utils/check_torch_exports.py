#!/usr/bin/env python3
"""Tensor parallelism and training on models exported from PyTorch the way
users export them (utils/gen_torch_models.py: a bias-free nanoGPT and a
Llama-style model with RMSNorm, SwiGLU, RoPE and grouped-query attention),
with and without dynamic batch and sequence axes.

For each export:
* one rank matches torch's own logits (rtol 1e-4, atol 1e-5);
* under tp=2 and tp=4 (`--parallel megatron --report`) every projection
  weight (an initializer a MatMul or Gemm multiplies by) is split, each
  layer has exactly 2 all-reduces forward and no other collective, and the
  outputs match one rank's.
For each static export, trained 20 steps on the bundled corpus, the losses,
gradient norms and learning rates of `--mesh dp=2,tp=2` match one rank's
within 1e-5 relative (compare_losses.py), and the loss falls; the Llama-style
model also trains under pp=2 (1F1B, 2 micro-batches) against one rank with
`--grad-accum 2`. Prints a line per check, then `N passed, M failed`."""

import argparse
import collections
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from check_compiled_models import compare
from compare_losses import compare_logs
from weft import run_executable, tool

TORCH_PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN_INPUT = {"gpt-nobias": "idx", "llama": "tokens"}


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))}: "
                           f"{(result.stderr or result.stdout).strip()[-400:]}")
    return result.stdout


def projection_weights(path):
    """Initializers that a MatMul or Gemm multiplies by; a tied LM head's
    folded copy (the transpose of another initializer, which Weft trains as
    that one) is named by its source."""
    model = onnx.load(path)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    weights = {n.input[1] for n in model.graph.node
               if n.op_type in ("MatMul", "Gemm") and n.input[1] in arrays}

    def source(name):
        copy = arrays[name]
        return next((other for other, array in arrays.items()
                     if other != name and array.ndim == 2
                     and array.shape == copy.T.shape
                     and np.array_equal(array, copy.T)), name)

    return {source(name) for name in weights}


def layer_of(location):
    match = re.search(r"/((?:h|layers)\.\d+)/", location)
    return match.group(1) if match else None


def collectives_per_layer(report, layer_of):
    """The forward collectives over tp of a `--report --bucket-mb 0`, by
    the layer `layer_of` finds in each one's location: a Counter of
    all-reduces and {layer: ["<kind> at <location>", ...]} of the others."""
    reduces, others = collections.Counter(), collections.defaultdict(list)
    for kind, location in re.findall(r"^  (\w+) over tp: .*\(\"(.*)\"\)$", report, re.M):
        layer = layer_of(location)
        if layer is None:
            continue
        if kind == "all_reduce":
            reduces[layer] += 1
        else:
            others[layer].append(f"{kind} at {location}")
    return reduces, others


def check_report(report, weights, layers):
    """Problems with a tp report: replicated projections, layers without
    exactly 2 all-reduces, other collectives in layers."""
    problems = []
    replicated = re.search(r"^  replicated: \d+ bytes in \d+ tensors:(.*)$", report, re.M)
    names = [t.split("[")[0] for t in replicated.group(1).split()] if replicated else []
    for name in names:
        if name in weights:
            problems.append(f"projection '{name}' is replicated")
    reduces, others_by_layer = collectives_per_layer(report, layer_of)
    others = [other for found in others_by_layer.values() for other in found]
    for layer in layers:
        if reduces[layer] != 2:
            problems.append(f"{layer}: {reduces[layer]} all-reduces, not 2")
    problems += [f"unexpected {other}" for other in others]
    return problems, sum(reduces.values())


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--data", required=True, help="token file to train on")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    weftc, weft_run = str(tool("weftc")), str(tool("weft-run"))
    os.makedirs(args.work, exist_ok=True)
    passed = failed = 0

    def verdict(name, problems, detail=""):
        nonlocal passed, failed
        if problems:
            failed += 1
            print(f"{name}: FAIL: " + "; ".join(problems))
        else:
            passed += 1
            print(f"{name}: PASS{detail}")

    def export(model, stem, *options):
        path = os.path.join(args.work, stem + ".onnx")
        run([TORCH_PYTHON, os.path.join(HERE, "gen_torch_models.py"), "--model", model,
             "-o", path, *options])
        return path

    for model in ("gpt-nobias", "llama"):
        name = TOKEN_INPUT[model]
        layers = ["h.0", "h.1"] if model == "gpt-nobias" else ["layers.0", "layers.1"]
        for dynamic in (False, True):
            stem = model + ("-dynamic" if dynamic else "")
            reference = os.path.join(args.work, stem)
            try:
                path = export(model, stem, "--reference", reference,
                              *(["--dynamic"] if dynamic else []))
                dims = ["--dim", "batch=2", "--dim", "seq=16"] if dynamic else []
                tokens = reference + ".tokens.npy"
                one = os.path.join(args.work, stem + "-1")
                run([weftc, path, *dims, "-o", one])
                logits = run_executable([one], {name: np.load(tokens)}, ["logits"])[0]
                ok, error = compare(logits, np.load(reference + ".logits.npy"))
                verdict(f"{stem} 1 rank vs torch", [] if ok else [f"max abs error {error:.2e}"],
                        f" (max abs error {error:.1e})")
            except RuntimeError as error:
                verdict(f"{stem} 1 rank vs torch", [str(error)])
                continue
            weights = projection_weights(path)
            for tp in (2, 4):
                check = f"{stem} tp={tp}"
                exe = os.path.join(args.work, f"{stem}-tp{tp}")
                try:
                    report = run([weftc, path, *dims, "--mesh", f"tp={tp}", "--parallel",
                                  "megatron", "--report", "-o", exe])
                    problems, reduces = check_report(report, weights, layers)
                    ok, error = compare(
                        run_executable([weft_run, exe], {name: np.load(tokens)}, ["logits"])[0],
                        logits)
                    if not ok:
                        problems.append(f"outputs differ from 1 rank by {error:.2e}")
                    verdict(check, problems,
                            f" ({len(weights)} projections split, {reduces} all-reduces "
                            f"in {len(layers)} layers, max abs difference {error:.1e})")
                except RuntimeError as error:
                    verdict(check, [str(error)])

        # Training: 20 steps against one rank.
        train = ["--data", args.data, "--steps", str(args.steps), "--lr", "3e-3",
                 "--warmup", "5", "--seed", "3"]
        stem = model + "-train"
        meshes = [("dp=2,tp=2", ["--mesh", "dp=2,tp=2", "--parallel", "dp,megatron"], 1)]
        if model == "llama":
            meshes.append(("pp=2", ["--mesh", "pp=2", "--microbatches", "2",
                                    "--schedule", "1f1b"], 2))
        try:
            path = export(model, stem, "--batch", "8", "--seq", "32")
        except RuntimeError as error:
            verdict(f"{stem}", [str(error)])
            continue
        references = {}
        for mesh, options, accumulate in meshes:
            check = f"{stem} {mesh} vs 1 rank"
            try:
                if accumulate not in references:
                    exe = os.path.join(args.work, f"{stem}-1x{accumulate}")
                    run([weftc, path, "--train", "--grad-accum", str(accumulate), "-o", exe])
                    run([exe, *train, "--log", exe + ".jsonl"])
                    references[accumulate] = exe + ".jsonl"
                exe = os.path.join(args.work, f"{stem}-{mesh.replace(',', '_').replace('=', '')}")
                run([weftc, path, "--train", *options, "-o", exe])
                run([weft_run, exe, *train, "--log", exe + ".jsonl"])
                result = compare_logs(references[accumulate], exe + ".jsonl", args.steps)
                expected = losses(references[accumulate])
                falls = expected[-1] < expected[0]
                problems = ([] if result.ok else [result.describe()]) + \
                    ([] if falls else ["the loss does not fall"])
                verdict(check, problems,
                        f" (loss {expected[0]:.3f} -> {expected[-1]:.3f}, "
                        f"{result.describe()})")
            except RuntimeError as error:
                verdict(check, [str(error)])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
