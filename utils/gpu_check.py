#!/usr/bin/env python3
"""The GPU checks of the CUDA backend, in two halves for two machines.

  gpu_check.py prepare DIR [--weftc WEFTC] --models MODELS --data TOKENS
      On a machine with Weft (no GPU needed): compiles each shared model and
      the bundled GPT's training step with --target=cuda into DIR, with
      their inputs and the CPU backend's outputs and losses as references,
      and copies the shared libraries the executables need from this machine
      (OpenBLAS, libomp) into DIR/lib. DIR is what the GPU machine gets
      (utils/gpu_check.sh packs it with the bench).
  gpu_check.py run DIR
      On the GPU machine (python3 with numpy; no Weft, no MLIR): runs every
      executable on the GPU and compares: each shared model's outputs with
      the CPU backend's (rtol 1e-4 of each element or, near zero, of the
      output's largest magnitude), the GPT's 50 losses with the CPU
      backend's (rtol 1e-3; at bf16 the CPU backend's bf16 losses and
      gradient norms, rtol 2e-2), and the attention cases of
      utils/attention_cases.py at bf16 (cuDNN's fused kernels) with the
      emulation's outputs (1e-2 + 1e-2 absolute, as emulation-attention.test
      holds the emulation to the reference evaluator). Prints one line per check and a summary;
      exits 69 when there is no GPU, 1 when a check fails.
"""

import argparse
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np

from gpu_bundle import copy_host_libraries, run_on_gpu, ship

GPT_STEPS = 50
MODEL_RTOL = 1e-4
LOSS_RTOL = {"f32": 1e-3, "bf16": 2e-2}
ATTENTION_TOLERANCE = 1e-2


def prepare(args):
    import onnx
    from test_data import dim_bindings, graph_inputs, load_pb
    from weft import run_executable, tool
    args.weftc = args.weftc or str(tool("weftc"))

    out = pathlib.Path(args.dir)
    if out.exists():
        shutil.rmtree(out)
    (out / "lib").mkdir(parents=True)
    manifest = {"models": [], "gpt": None}
    for model_dir in sorted(p for p in pathlib.Path(args.models).iterdir()
                            if (p / "model.onnx").exists()):
        model = onnx.load(str(model_dir / "model.onnx"), load_external_data=False)
        data = model_dir / "test_data_set_0"
        inputs = [load_pb(data / f"input_{i}.pb") for i in range(len(graph_inputs(model)))]
        names = [i.name for i in graph_inputs(model)]
        outputs = [o.name for o in model.graph.output]
        work = out / model_dir.name
        work.mkdir()
        bindings = []
        for binding in dim_bindings(model, [a.shape for a in inputs]):
            bindings += ["--dim", binding]
        for target, exe in [("cuda", work / "model"), ("cpu", work / "cpu")]:
            subprocess.run([args.weftc, str(model_dir / "model.onnx"), "-o", str(exe),
                            f"--target={target}"] + bindings, check=True)
        reference = run_executable([str(work / "cpu")], dict(zip(names, inputs)), outputs)
        for path in work.glob("cpu*"):
            path.unlink()
        for name, array in zip(names, inputs):
            np.save(work / f"input.{name}.npy", array)
        for name, array in zip(outputs, reference):
            np.save(work / f"expected.{name}.npy", array)
        for path in work.glob("run*"):
            path.unlink()
        manifest["models"].append({"name": model_dir.name, "inputs": names,
                                   "outputs": outputs})
    gpt = out / "gpt"
    gpt.mkdir()
    src = pathlib.Path(__file__).resolve().parent
    # GELU's tanh form: the bf16 step's GELU and its gradient are the
    # GEMMs' cuBLASLt epilogues, which only a GPU runs.
    subprocess.run([sys.executable, str(src / "gen_gpt2.py"), "--seq", "32", "--batch", "8",
                    "--gelu", "tanh", "-o", str(gpt / "gpt.onnx")], check=True,
                   stdout=subprocess.DEVNULL)
    train = ["--steps", str(GPT_STEPS), "--lr", "3e-3", "--warmup", "10"]
    for precision in LOSS_RTOL:
        for target, exe in [("cuda", gpt / f"train_{precision}"),
                            ("cpu", gpt / f"train_cpu_{precision}")]:
            subprocess.run([args.weftc, str(gpt / "gpt.onnx"), "--train", "-o", str(exe),
                            f"--target={target}", "--precision", precision], check=True)
        subprocess.run([str(gpt / f"train_cpu_{precision}"), "--data", args.data, "--log",
                        str(gpt / f"cpu_{precision}.jsonl")] + train, check=True,
                       stdout=subprocess.DEVNULL)
    for path in gpt.glob("train_cpu*"):
        path.unlink()
    shutil.copy(args.data, gpt / "data.tokens")
    manifest["gpt"] = {"args": train}
    copy_host_libraries(gpt / "train_f32", out / "lib")

    # The fused attention: the cases compiled for the GPU, and the
    # emulation's outputs of the same program as the references.
    attention = out / "attention"
    cases = [sys.executable, str(src / "attention_cases.py")]
    subprocess.run(cases + ["write", str(attention), "--dtype", "bf16"], check=True)
    for target, exe in [("cuda", "attention"), ("cuda-emulation", "emulated")]:
        subprocess.run([args.weftc, str(attention / "main.mlir"), f"--target={target}",
                        "-o", str(attention / exe)], check=True)
    subprocess.run(cases + ["run", str(attention), str(attention / "emulated")], check=True,
                   stdout=subprocess.DEVNULL)
    (attention / "outputs").rename(attention / "expected")
    for path in attention.glob("emulated*"):
        path.unlink()
    ship(out / "lib")
    (out / "checks.json").write_text(json.dumps(manifest, indent=1))
    shutil.copy(__file__, out / "gpu_check.py")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"prepared {out}: {len(manifest['models'])} models and the GPT's training "
          f"step, {size / 2**20:.1f} MiB")
    return 0


def compare(actual, expected):
    if actual.shape != expected.shape:
        return False, float("inf")
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    error = np.abs(a - e)
    scale = float(np.abs(e).max(initial=0))
    ok = bool(np.all((error <= MODEL_RTOL * (np.abs(e) + scale)) | (np.isnan(a) & np.isnan(e))))
    return ok, float(np.nanmax(error)) if error.size else 0.0


def run(args):
    base = pathlib.Path(args.dir).resolve()
    checks = json.loads((base / "checks.json").read_text())
    passed = failed = 0

    def report(name, ok, detail):
        nonlocal passed, failed
        print(f"{name}: {'PASS' if ok else 'FAIL'}: {detail}")
        passed += ok
        failed += not ok

    for model in checks["models"]:
        work = base / model["name"]
        command = [str(work / "model")]
        for name in model["inputs"]:
            command += ["--input", f"{name}={work / f'input.{name}.npy'}"]
        for name in model["outputs"]:
            command += ["--output", f"{name}={work / f'gpu.{name}.npy'}"]
        try:
            run_on_gpu(command, work)
        except RuntimeError as error:
            report(model["name"], False, str(error))
            continue
        results = [(name,) + compare(np.load(work / f"gpu.{name}.npy"),
                                     np.load(work / f"expected.{name}.npy"))
                   for name in model["outputs"]]
        report(model["name"], all(r[1] for r in results),
               "; ".join(f"{n} vs cpu: max abs error {e:.3g}" for n, _, e in results))
    gpt = base / "gpt"
    for precision, rtol in LOSS_RTOL.items():
        name = f"gpt training, {precision}, {GPT_STEPS} steps"
        try:
            run_on_gpu([str(gpt / f"train_{precision}"), "--data", str(gpt / "data.tokens"),
                        "--log", str(gpt / f"gpu_{precision}.jsonl")] + checks["gpt"]["args"],
                       gpt)
            logs = [[json.loads(line) for line in open(gpt / f"{side}_{precision}.jsonl")]
                    for side in ("cpu", "gpu")]
            worst = {key: max((abs(g[key] - c[key]) / abs(c[key]) for c, g in zip(*logs)),
                              default=float("inf"))
                     for key in ("loss", "grad_norm")}
            report(name, len(logs[1]) == GPT_STEPS and max(worst.values()) <= rtol,
                   f"largest relative difference from the CPU backend: loss {worst['loss']:.3g}, "
                   f"gradient norm {worst['grad_norm']:.3g} (rtol {rtol:g})")
        except RuntimeError as error:
            report(name, False, str(error))
    attention = base / "attention"
    names = (attention / "names.txt").read_text().splitlines()
    command = [str(attention / "attention")]
    for name in names[0].split():
        command += ["--input", f"{name}={attention / 'inputs' / (name + '.npy')}"]
    for name in names[1].split():
        command += ["--output", f"{name}={attention / (name + '.gpu.npy')}"]
    try:
        run_on_gpu(command, attention)
        errors = {}
        for name in names[1].split():
            got = np.load(attention / f"{name}.gpu.npy").astype(np.float64)
            want = np.load(attention / "expected" / f"{name}.npy").astype(np.float64)
            bad = np.abs(got - want) > ATTENTION_TOLERANCE * (1 + np.abs(want))
            errors[name] = (float(np.abs(got - want).max()), int(bad.sum()))
        worst = max(errors, key=lambda n: errors[n][0])
        report("fused attention, bf16 (cuDNN)", all(b == 0 for _, b in errors.values()),
               f"{len(errors)} outputs; worst {worst}: max abs error {errors[worst][0]:.3g}, "
               f"{errors[worst][1]} values outside {ATTENTION_TOLERANCE:g} + "
               f"{ATTENTION_TOLERANCE:g} relative")
    except (RuntimeError, ValueError) as error:
        report("fused attention, bf16 (cuDNN)", False, str(error))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir")
    p.add_argument("--weftc", help="default: the weft package's (weft.tool)")
    p.add_argument("--models", required=True)
    p.add_argument("--data", required=True)
    r = sub.add_parser("run")
    r.add_argument("dir")
    args = parser.parse_args()
    return prepare(args) if args.mode == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
