#!/usr/bin/env python3
"""Compile every model of ../shared/models (inference) and the bundled GPT's
training step with `weftc --target=cuda --emit=obj`. The CUDA lowering has
ptxas assemble every kernel for each chip of kCudaChips (sm_90 and sm_80,
weft/Target/CUDA/CUDATarget.h; the object embeds the sm_90 cubins), so a
model passes when the object is written; the line also says how many
kernels the object embeds. Needs no
GPU. Prints one line per program and a final `N passed, M failed`."""

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

import onnx

from test_data import dim_bindings, load_pb, graph_inputs

HERE = pathlib.Path(__file__).resolve().parent


def compile_cuda(weftc, model, extra, work):
    """Returns (ok, detail)."""
    obj = work / "model.o"
    obj.unlink(missing_ok=True)
    build = subprocess.run([weftc, str(model), "--target=cuda", "--emit=obj",
                            "-o", str(obj)] + extra,
                           capture_output=True, text=True)
    if build.returncode != 0 or not obj.exists():
        return False, build.stderr.strip().splitlines()[-1:] or ["no object"]
    # Each kernel is a gpu.module of its own, embedded as `<kernel>_binary`.
    symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True,
                             check=True).stdout
    kernels = len(re.findall(r"_binary$", symbols, re.MULTILINE))
    if not kernels:
        return False, ["the object embeds no kernel"]
    return True, [f"{kernels} kernels, assembled for sm_90 and sm_80"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=pathlib.Path)
    parser.add_argument("--weftc", required=True)
    args = parser.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        programs = []
        if args.models:
            for model_dir in sorted(p for p in args.models.iterdir()
                                    if (p / "model.onnx").exists()):
                model = onnx.load(str(model_dir / "model.onnx"),
                                  load_external_data=False)
                data = model_dir / "test_data_set_0"
                shapes = [load_pb(data / f"input_{i}.pb").shape
                          for i in range(len(graph_inputs(model)))]
                extra = []
                for binding in dim_bindings(model, shapes):
                    extra += ["--dim", binding]
                programs.append((model_dir.name, model_dir / "model.onnx",
                                 extra))
        gpt = work / "gpt2.onnx"
        subprocess.run([sys.executable, str(HERE / "gen_gpt2.py"), "-o",
                        str(gpt), "--batch", "2", "--seq", "32"], check=True,
                       capture_output=True)
        programs.append(("bundled GPT training step", gpt, ["--train"]))
        for name, model, extra in programs:
            ok, detail = compile_cuda(args.weftc, model, extra, work)
            print(f"{name}: {'PASS' if ok else 'FAIL'}: {' '.join(detail)}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
