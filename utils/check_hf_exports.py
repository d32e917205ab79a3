#!/usr/bin/env python3
"""Real Hugging Face `transformers` models (utils/gen_hf_models.py: 14
families, tiny configs, exported by torch.onnx.export from the library's
own modeling code) through Weft. For each family:

* `1 rank vs torch`: one rank's output matches torch's (rtol 1e-4, atol
  1e-5);
* `tp=2`: under `--mesh tp=2 --parallel megatron --report` (and
  `--bucket-mb 0`, so that every collective names its node), no projection
  weight (an initializer a MatMul or Gemm multiplies by; a tied head's
  folded copy counts as its source) is replicated, except where weftc says
  why: the one K/V head of multi-query attention (a remark) and a
  projection outside the layers (a warning); a rank holds at most
  55% of the layers' weights (the initializers of `h.N`, `layers.N`,
  `layer.N` or `block.N`, by name or by the nodes that use them);
  each layer has the optimum count of forward all-reduces (2: attention
  and MLP one after the other; 1: parallel residual, gpt-neox, phi,
  falcon and gptj; 3: a T5 decoder block, self-attention, cross-attention
  and feed-forward) and no other collective (falcon: one all-gather of its
  fused multi-query QKV); the outputs match one rank's;
* causal language models only (not bert, t5-encoder, t5), exported at
  batch 8 x 32 and trained `--steps` steps on `--data`:
  `train dp=2,tp=2 vs 1 rank` (`--parallel dp,megatron --grad-accum 2`)
  and `train pp=2 vs 1 rank` (1F1B over 2 micro-batches), each against
  the same one-rank run compiled with `--grad-accum 2` (a step is two
  micro-batches of the exported batch, gradients averaged): the loss,
  gradient norm and learning rate of every step within 2e-5 relative
  (compare_losses.py; measured up to 9.4e-6), and the loss falls.

The exports run in `--python` (default: the `hf-venv` virtual environment
beside the weft package's build tree, which `make hf-venv` creates). Prints
a line per check (`<family> <check>: PASS (...)` or `FAIL: reasons`),
then `N passed, M failed`; exits 1 on failures. `--jobs 2` checks two
families at once (about 4 minutes for all of them on 2 cores, 8 with
one).

    python3 utils/check_hf_exports.py --work /tmp/hf --data data/tinyshakespeare.tokens [--models gpt2,t5]
"""

import argparse
import collections
import concurrent.futures
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
from check_torch_exports import collectives_per_layer, projection_weights
from weft import run_executable, tool
from weft.errors import RunError
from weft.executables import error_line

from gen_hf_models import CAUSAL, MODELS, input_names, output_name

HERE = os.path.dirname(os.path.abspath(__file__))

PARALLEL_RESIDUAL = {"gpt-neox", "phi", "falcon", "gptj"}
LAYER = re.compile(r"(?:^|\.)(?:h|layers|layer|block)\.\d+")
LAYER_SHARE = 0.55
# compare_losses.py's 1e-5 leaves no margin here: Gemma's pp=2 gradient
# norm differs by 9.4e-6 (the stages sum in another order).
TRAIN_RTOL = 2e-5
TIMEOUT = 600  # seconds for one compile or run: a hang fails its check
RANKS_TIMEOUT = ["--timeout", "300"]  # weft-run stops every rank of a wedged run


def default_python():
    import weft
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(weft.__file__))))
    return os.path.join(build, "hf-venv", "bin", "python")


def run(command, stderr=False):
    """Runs a tool; RuntimeError with its error line when it fails. Its
    stdout, or with `stderr` (stdout, stderr)."""
    try:
        result = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                                timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{os.path.basename(str(command[0]))} did not finish "
                           f"in {TIMEOUT} s") from None
    if result.returncode != 0:
        raise RuntimeError(f"{os.path.basename(str(command[0]))}: "
                           + error_line(result.stderr or result.stdout, result.returncode))
    return (result.stdout, result.stderr) if stderr else result.stdout


def layer_of(name):
    """The layer a tensor or node name lies in ('h.0'; T5's 'encoder.block.0'
    and 'decoder.block.0' apart), or None. The exporter's node names skip
    some module names that its tensor names keep ('/m/decoder/layers.0/...'
    beside 'm.model.decoder.layers.0...'): only the layer's own name and
    the stack it is in count."""
    dotted = name.replace("/", ".").lstrip(".")
    match = LAYER.search(dotted)
    if not match:
        return None
    stacks = [part for part in dotted[:match.start()].split(".")
              if part in ("encoder", "decoder")]
    layer = match.group(0).lstrip(".")
    return f"{stacks[-1]}.{layer}" if stacks else layer


def layer_weights(path):
    """{layer: {initializer: bytes}} for the float initializers in a layer,
    by name or, for the exporter's folded copies (onnx::MatMul_N), by the
    nodes that use them all lying in one layer; the layers' names; and the
    node that first uses each initializer (what names an onnx::MatMul_N)."""
    model = onnx.load(path)
    users = collections.defaultdict(set)
    first_user = {}
    layers = set()
    for node in model.graph.node:
        layer = layer_of(node.name)
        if layer:
            layers.add(layer)
        for name in node.input:
            users[name].add(layer)
            first_user.setdefault(name, node.name)
    weights = collections.defaultdict(dict)
    for tensor in model.graph.initializer:
        if tensor.data_type != onnx.TensorProto.FLOAT:
            continue
        layer = layer_of(tensor.name)
        if layer is None and len(users[tensor.name]) == 1:
            layer = next(iter(users[tensor.name]))
        if layer:
            weights[layer][tensor.name] = numpy_helper.to_array(tensor).nbytes
    return weights, sorted(layers | set(weights)), first_user


# Falcon's fused QKV holds 4 query heads and its one K/V head twice: the
# projection splits by the 6 heads (3 per rank) and one all-gather of its
# output gives each rank its query heads and the K/V head whole (6 KiB per
# rank here: less than replicating the projection costs in compute and
# memory; Megatron-LM has no split of a fused multi-query QKV at all).
OTHER_COLLECTIVES = {"falcon": ["all_gather"]}


def expected_reduces(family, layer):
    if family in PARALLEL_RESIDUAL:
        return 1
    if family == "t5" and layer.startswith("decoder."):
        return 3
    return 2


# What weftc says of a weight Megatron leaves whole: a remark for the one
# K/V head of multi-query attention, a warning for any other contraction.
KEPT_WHOLE = re.compile(r"megatron: parameter '([^']+)' stays whole on every 'tp' rank: "
                        r"it projects the one key/value head")
WARNED = re.compile(r"megatron: parameter '([^']+)' stays replicated on every 'tp' rank")


def check_report(family, report, diagnostics, projections, weights, layers, users, tp):
    """Problems with a tp report (replicated projections, a rank's share of
    the layers' weights, all-reduces per layer, other collectives in
    layers), and a summary of what it found. A projection may stay whole
    where weftc says why: multi-query attention's K/V head (a remark), and
    a contraction outside the layers (a warning: BERT's head transform, as
    Megatron-LM keeps it); a warned projection inside a layer still fails."""
    problems = []
    replicated = re.search(r"^  replicated: \d+ bytes in \d+ tensors:(.*)$", report, re.M)
    names = {t.split("[")[0] for t in replicated.group(1).split()} if replicated else set()
    in_layers = {name for w in weights.values() for name in w}
    kept = set(KEPT_WHOLE.findall(diagnostics))
    warned = set(WARNED.findall(diagnostics)) - in_layers
    problems += [f"projection '{name}'"
                 + (f" ({users[name]})" if name.startswith("onnx::") and name in users else "")
                 + " is replicated" for name in sorted((names & projections) - kept - warned)]
    if not layers:
        problems.append("no layers found in the model's names")
    whole = sum(sum(w.values()) for w in weights.values())
    local = sum(size if name in names else size / tp
                for w in weights.values() for name, size in w.items())
    share = local / whole if whole else 1.0
    if share > LAYER_SHARE:
        problems.append(f"a rank holds {share:.0%} of the layers' weights")
    reduces, others = collectives_per_layer(report, layer_of)
    counts = collections.Counter()
    for layer in layers:
        want = expected_reduces(family, layer)
        counts[want] += 1
        if reduces[layer] != want:
            problems.append(f"{layer}: {reduces[layer]} all-reduces, not {want}")
        expected = OTHER_COLLECTIVES.get(family, [])
        if sorted(o.split()[0] for o in others[layer]) != expected:
            problems += [f"unexpected {other}" for other in others[layer]] or [
                f"{layer}: no {', '.join(expected)}"]
    problems += [f"unexpected {other}" for layer, found in others.items()
                 if layer not in layers for other in found]
    per_layer = ", ".join(f"{n} layers x {k}" if n > 1 else f"1 layer x {k}"
                          for k, n in sorted(counts.items()))
    stated = names & projections & (kept | warned)
    split = len(projections) - len(stated)
    summary = (f"{split} projections split"
               + (f", {len(names & projections & kept)} K/V kept whole" if kept & names else "")
               + (f", {len(names & projections & warned)} outside the layers whole"
                  if warned & names else "")
               + f", {share:.0%} of layer weights per rank, all-reduces {per_layer}"
               + "".join(f", 1 {kind} per layer" for kind in OTHER_COLLECTIVES.get(family, [])))
    return problems, summary


def losses(path):
    with open(path) as f:
        return [row["loss"] for row in map(json.loads, f)]


def check_family(family, args, python, weftc, weft_run):
    """The (check, problems, detail) verdicts of one family."""
    verdicts = []
    work = os.path.join(args.work, family)
    os.makedirs(work, exist_ok=True)
    generator = os.path.join(HERE, "gen_hf_models.py")
    names, output = input_names(family), output_name(family)

    # Forward: one rank against torch, then tp=2.
    path, reference = os.path.join(work, "model.onnx"), os.path.join(work, "ref")
    check = f"{family} 1 rank vs torch"
    one_output = None
    try:
        run([python, generator, "--model", family, "--reference", reference, "-o", path])
        inputs = {name: np.load(f"{reference}.{name}.npy") for name in names}
        expected = np.load(f"{reference}.{output}.npy")
    except RuntimeError as error:
        return [(check, [f"export: {error}"], "")]
    try:
        one = os.path.join(work, "one")
        run([weftc, path, "-o", one])
        one_output = run_executable([one], inputs, [output], timeout=TIMEOUT)[0]
        ok, error = compare(one_output, expected)
        verdicts.append((check, [] if ok else [f"max abs error {error:.2e}"],
                         f"max abs error {error:.1e}"))
    except (RuntimeError, RunError) as error:
        verdicts.append((check, [str(error)], ""))

    check = f"{family} tp=2"
    try:
        projections = projection_weights(path)
        weights, layers, users = layer_weights(path)
        exe = os.path.join(work, "tp2")
        # No buckets: each collective keeps the location of the node it
        # comes from (a bucket of independent ones, such as T5's encoder
        # and decoder self-attention reductions, has none).
        report, diagnostics = run([weftc, path, "--mesh", "tp=2", "--parallel", "megatron",
                                   "--report", "--bucket-mb", "0", "-o", exe], stderr=True)
        problems, summary = check_report(family, report, diagnostics, projections, weights,
                                         layers, users, 2)
        got = run_executable([weft_run, *RANKS_TIMEOUT, exe], inputs, [output],
                             timeout=TIMEOUT)[0]
        against = "1 rank" if one_output is not None else "torch (1 rank failed)"
        ok, error = compare(got, one_output if one_output is not None else expected)
        if not ok:
            problems.append(f"outputs differ from {against} by {error:.2e}")
        verdicts.append((check, problems, f"{summary}, max abs difference from {against} "
                                          f"{error:.1e}"))
    except (RuntimeError, RunError) as error:
        verdicts.append((check, [str(error)], ""))

    if family not in CAUSAL:
        return verdicts

    # Training against one rank accumulating 2 micro-batches.
    meshes = [("dp=2,tp=2", "dp2tp2", ["--mesh", "dp=2,tp=2", "--parallel", "dp,megatron",
                                       "--grad-accum", "2"]),
              ("pp=2", "pp2", ["--mesh", "pp=2", "--microbatches", "2", "--schedule", "1f1b"])]
    train = ["--data", args.data, "--steps", str(args.steps), "--lr", "3e-3",
             "--warmup", "5", "--seed", "3"]
    path = os.path.join(work, "train.onnx")
    try:
        run([python, generator, "--model", family, "--batch", "8", "--seq", "32", "-o", path])
        exe = os.path.join(work, "train-1")
        run([weftc, path, "--train", "--grad-accum", "2", "-o", exe])
        reference = exe + ".jsonl"
        run([exe, *train, "--log", reference])
        expected = losses(reference)
    except RuntimeError as error:
        return verdicts + [(f"{family} train {mesh} vs 1 rank", [f"1 rank: {error}"], "")
                           for mesh, _, _ in meshes]
    for mesh, stem, options in meshes:
        check = f"{family} train {mesh} vs 1 rank"
        try:
            exe = os.path.join(work, "train-" + stem)
            run([weftc, path, "--train", *options, "-o", exe])
            run([weft_run, *RANKS_TIMEOUT, exe, *train, "--log", exe + ".jsonl"])
        except RuntimeError as error:
            verdicts.append((check, [str(error)], ""))
            continue
        result = compare_logs(reference, exe + ".jsonl", args.steps, rtol=TRAIN_RTOL)
        problems = [] if result.ok else [result.describe()]
        if not expected[-1] < expected[0]:
            problems.append("the loss does not fall")
        verdicts.append((check, problems,
                         f"loss {expected[0]:.3f} -> {expected[-1]:.3f}, {result.describe()}"))
    return verdicts


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True)
    parser.add_argument("--data", required=True, help="token file to train on")
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated families (default: all)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--python", default=None,
                        help="the Python with torch and transformers (default: "
                             "<build>/hf-venv/bin/python)")
    parser.add_argument("--jobs", type=int, default=1, help="families checked at once")
    args = parser.parse_args()
    families = [m for m in args.models.split(",") if m]
    unknown = [m for m in families if m not in MODELS]
    if unknown:
        parser.error(f"unknown families {', '.join(unknown)} (known: {', '.join(MODELS)})")
    python = args.python or default_python()
    if not os.access(python, os.X_OK):
        parser.error(f"no Python at {python} (make hf-venv makes it; or --python)")
    weftc, weft_run = str(tool("weftc")), str(tool("weft-run"))
    args.data = os.path.abspath(args.data)
    os.makedirs(args.work, exist_ok=True)

    passed = failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(check_family, family, args, python, weftc, weft_run)
                   for family in families]
        for future in futures:
            for check, problems, detail in future.result():
                if problems:
                    failed += 1
                    print(f"{check}: FAIL: " + "; ".join(problems), flush=True)
                else:
                    passed += 1
                    print(f"{check}: PASS ({detail})", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
