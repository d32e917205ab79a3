#!/usr/bin/env python3
"""Compiles the loss-and-gradient program of a GPT-2-style model
(weftc --program=gradients), runs it on a batch, and compares the loss and
every parameter's gradient with PyTorch autograd on the same weights and
batch (utils/torch_gpt_gradients.py under Debian's python3-torch):
max |weft - torch| / max |torch| <= --rtol per tensor. Prints one line per
parameter and `N passed, M failed`."""

import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from weft import run_executable



def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weftc", required=True)
    parser.add_argument("--gen", required=True, help="utils/gen_gpt2.py")
    parser.add_argument("--torch-python", default="/usr/bin/python3")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--precision", default="f32",
                        help="weftc --precision (the reference stays f32)")
    parser.add_argument("--gelu", choices=["erf", "tanh"], default="erf",
                        help="the model's GELU (gen_gpt2.py --gelu)")
    args = parser.parse_args()
    here = pathlib.Path(__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        model = work / "gpt.onnx"
        subprocess.run([sys.executable, args.gen, "--layers", str(args.layers),
                        "--hidden", str(args.hidden), "--heads", str(args.heads),
                        "--vocab", str(args.vocab), "--seq", str(args.seq),
                        "--batch", str(args.batch), "--gelu", args.gelu,
                        "-o", str(model)],
                       check=True, capture_output=True)
        params = {t.name: numpy_helper.to_array(t)
                  for t in onnx.load(str(model)).graph.initializer
                  if t.data_type == onnx.TensorProto.FLOAT and t.dims}
        params = {k: v for k, v in params.items() if k.endswith((".weight", ".bias"))}
        np.savez(work / "params.npz", **params)
        rng = np.random.default_rng(0)
        ids = rng.integers(0, args.vocab, (args.batch, args.seq))
        labels = np.roll(ids, -1, axis=1)
        labels[:, -1] = -100  # the last position has no next token
        np.save(work / "ids.npy", ids)
        np.save(work / "labels.npy", labels)
        exe = work / "grads"
        subprocess.run([args.weftc, str(model), "--program=gradients",
                        "--precision", args.precision, "-o", str(exe)],
                       check=True)
        outputs = ["loss"] + [f"grad:{name}" for name in params]
        results = run_executable([str(exe)], {"input_ids": ids, "labels": labels},
                                 outputs)
        weft = dict(zip(outputs, results))
        subprocess.run([args.torch_python, str(here / "torch_gpt_gradients.py"),
                        str(work / "params.npz"), str(work / "ids.npy"),
                        str(work / "labels.npy"), str(work / "torch.npz"),
                        "--layers", str(args.layers), "--heads", str(args.heads),
                        "--gelu", args.gelu],
                       check=True)
        reference = np.load(work / "torch.npz")
        passed = failed = 0
        for name in outputs:
            a = weft[name].astype(np.float64)
            e = reference[name]
            scale = max(float(np.abs(e).max()), 1e-30)
            error = float(np.abs(a - e).max()) / scale if a.shape == e.shape else float("inf")
            ok = error <= args.rtol
            print(f"{name}: {'PASS' if ok else 'FAIL'}: relative error {error:.2e}")
            passed += ok
            failed += not ok
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
