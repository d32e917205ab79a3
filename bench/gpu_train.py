#!/usr/bin/env python3
"""GPU training bench: Weft's CUDA training step beside PyTorch eager and
torch.compile on the same GPU, model, batch and sequence, in one run.

  gpu_train.py prepare DIR [--weftc WEFTC] [--layers 12 --hidden 768
      --heads 12 --vocab 50257 --seq 1024 --batch 8 --gelu tanh]
      On a machine with Weft (no GPU needed): compiles the GPT-2-style
      training step (default GPT-2 small, 124M, with GPT-2's own tanh GELU,
      which the GEMMs' epilogues compute) with --target=cuda, in f32
      and at --precision bf16, into DIR
      (no weights: the run draws them, --init-seed), with the libraries the
      GPU machine lacks (utils/gpu_check.sh packs it with the checks).
  gpu_train.py run DIR [--steps 12] [--device cuda] [--torch-modes eager,compile]
      On the GPU machine (PyTorch with CUDA): trains Weft's step and
      PyTorch's (nanoGPT's model: same shapes, AdamW, clipping) from random
      parameters on random tokens, and prints the median tokens/s of each,
      MFU, and Weft's ratio to each PyTorch mode at the same precision.
      Then it runs Weft's bf16 step 3 more times under
      $WEFT_PROFILE_LAUNCHES and prints each launch's measured time beside
      the kernel report's prediction for this GPU (utils/compare_profile.py;
      the reports for H100 and H200 are made by `prepare`).

Weft's f32 step is compared with PyTorch in float32 (TF32 off), its bf16
step (bf16 GEMMs and cuDNN's fused attention) with PyTorch's bf16
autocast. MFU counts 6 N + 12 L T d FLOP per token (PaLM's) against the GPU's
peak for the precision (--peak-f32, --peak-bf16; default H100/H200 SXM:
67 and 989 TFLOP/s)."""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Beside this script in a bundle, in utils/ in the repository.
sys.path[:0] = [str(pathlib.Path(__file__).resolve().parent), str(ROOT / "utils")]
from gpu_bundle import copy_host_libraries, run_on_gpu, ship  # noqa: E402


def prepare(args):
    out = pathlib.Path(args.dir).resolve()
    if out.exists():
        shutil.rmtree(out)
    (out / "lib").mkdir(parents=True)
    shape = {k: getattr(args, k)
             for k in ("layers", "hidden", "heads", "vocab", "seq", "batch", "gelu")}
    onnx_path = out / "gpt.onnx"
    subprocess.run([sys.executable, str(ROOT / "utils" / "gen_gpt2.py"), "-o", str(onnx_path),
                    "--zero-weights", "--external-data"] +
                   [f"--{k}={v}" for k, v in shape.items()], check=True,
                   stdout=subprocess.DEVNULL)
    start = time.time()
    if args.weftc is None:
        from weft import tool  # only here: `run` works without the package
        args.weftc = str(tool("weftc"))
    for precision in ("f32", "bf16"):
        report = ["--report=kernels", "--gpu=h200",
                  f"--report-file={out / 'report_h200.json'}"] if precision == "bf16" else []
        subprocess.run([args.weftc, str(onnx_path), "--train", "--target=cuda",
                        "--precision", precision, "-o", str(out / f"train_{precision}")] +
                       report, check=True, stdout=subprocess.DEVNULL)
        (out / f"train_{precision}.weights").unlink()
    # The bf16 step again, its launches marked for the profile (each mark
    # waits for the GPU: not the build the bench times).
    subprocess.run([args.weftc, str(onnx_path), "--train", "--target=cuda",
                    "--precision", "bf16", "--profile-launches", "-o",
                    str(out / "train_bf16_profile")], check=True, stdout=subprocess.DEVNULL)
    (out / "train_bf16_profile.weights").unlink()
    # The same program priced on an H100 (only the report is kept).
    subprocess.run([args.weftc, str(onnx_path), "--train", "--target=cuda",
                    "--precision", "bf16", "--emit=obj", "--report=kernels",
                    "--gpu=h100", f"--report-file={out / 'report_h100.json'}",
                    "-o", str(out / "priced.o")], check=True, stdout=subprocess.DEVNULL)
    for path in out.glob("priced.*"):
        path.unlink()
    compile_seconds = time.time() - start
    for path in out.glob("gpt.onnx*"):
        path.unlink()
    shutil.copy(ROOT / "data" / "tinyshakespeare.tokens", out / "data.tokens")
    copy_host_libraries(out / "train_f32", out / "lib")
    ship(out / "lib")
    (out / "shape.json").write_text(json.dumps(shape))
    shutil.copy(__file__, out / "gpu_train.py")
    shutil.copy(ROOT / "utils" / "compare_profile.py", out / "compare_profile.py")
    print(f"prepared {out} ({compile_seconds:.0f} s to compile)")
    return 0


def flops_per_token(shape):
    d, layers, vocab, seq = shape["hidden"], shape["layers"], shape["vocab"], shape["seq"]
    params = vocab * d + seq * d + layers * (12 * d * d + 13 * d) + 2 * d
    return 6 * params + 12 * layers * seq * d


def weft_rate(base, precision, steps, env):
    log = base / f"weft_{precision}.jsonl"
    run_on_gpu([str(base / f"train_{precision}"), "--init-seed", "1", "--data",
                str(base / "data.tokens"), "--steps", str(steps), "--lr", "3e-4",
                "--log", str(log), "--print-every", str(steps)], base, env)
    rates = [json.loads(line)["tokens_per_s"] for line in open(log)][2:]
    return statistics.median(rates)


def weft_profile(base, env, steps=3):
    """Weft's bf16 step under $WEFT_PROFILE_LAUNCHES: each launch's time
    on this GPU beside the report's prediction for it."""
    import torch
    name = torch.cuda.get_device_name()
    if "H100" not in name and "H200" not in name:
        print(f"weft cuda bf16 profile: {name} is neither an H100 nor an H200: "
              f"measured against the H200's prediction")
    report = base / ("report_h100.json" if "H100" in name else "report_h200.json")
    profile = base / "profile.txt"
    run_on_gpu([str(base / "train_bf16_profile"), "--init-seed", "1", "--data",
                str(base / "data.tokens"), "--steps", str(steps), "--lr", "3e-4",
                "--log", str(base / "profile.jsonl")], base,
               dict(env, WEFT_PROFILE_LAUNCHES=str(profile)))
    subprocess.run([sys.executable, str(base / "compare_profile.py"), "--report",
                    str(report), "--profile", str(profile), "--steps", str(steps),
                    "--device", name], check=True)


def torch_rate(shape, steps, device, precision, compiled):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    d, heads, layers = shape["hidden"], shape["heads"], shape["layers"]
    vocab, seq, batch = shape["vocab"], shape["seq"], shape["batch"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.attn_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            shape_ = (x.shape[0], x.shape[1], heads, d // heads)
            q, k, v = (t.view(shape_).transpose(1, 2) for t in (q, k, v))
            if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = (q @ k.transpose(-2, -1)) / (d // heads) ** 0.5
                causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool,
                                    device=x.device).tril()
                y = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
            x = x + self.attn_proj(y.transpose(1, 2).reshape(x.shape))
            approximate = "tanh" if shape.get("gelu") == "tanh" else "none"
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)),
                                            approximate=approximate))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, ids, labels):
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1))

    torch.manual_seed(0)
    model = GPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    step_fn = model
    if compiled:
        step_fn = torch.compile(model)
    tokens = torch.randint(0, vocab, (batch, seq + 1), device=device)
    ids, labels = tokens[:, :-1], tokens[:, 1:]
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        with torch.autocast(device_type=device, dtype=torch.bfloat16,
                            enabled=precision == "bf16"):
            loss = step_fn(ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return batch * seq / statistics.median(times[2:])


def run(args):
    base = pathlib.Path(args.dir).resolve()
    shape = json.loads((base / "shape.json").read_text())
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(base / "lib"), env.get("LD_LIBRARY_PATH")]))
    per_token = flops_per_token(shape)
    peak = {"f32": args.peak_f32 * 1e12, "bf16": args.peak_bf16 * 1e12}
    rows = []
    for precision in ("f32", "bf16"):
        try:
            rows.append(("weft cuda", precision, weft_rate(base, precision, args.steps, env)))
        except RuntimeError as error:
            print(f"weft cuda {precision}: FAIL: {error}")
    modes = args.torch_modes.split(",")
    if not modes or set(modes) - {"eager", "compile"}:
        print(f"error: --torch-modes takes eager, compile or both, not "
              f"'{args.torch_modes}'", file=sys.stderr)
        return 2
    modes = [mode == "compile" for mode in modes]
    for precision in ("f32", "bf16"):
        for compiled in modes:
            name = "torch.compile" if compiled else "pytorch eager"
            try:
                rows.append((name, precision,
                             torch_rate(shape, args.steps, args.device, precision, compiled)))
            except Exception as error:  # a mode this PyTorch lacks
                print(f"{name} {precision}: not run: {str(error).splitlines()[0]}")
    print(f"GPT {shape['layers']} layers x {shape['hidden']}, vocab {shape['vocab']}, "
          f"batch {shape['batch']} x seq {shape['seq']}: {per_token / 1e9:.2f} GFLOP "
          f"per token")
    for name, precision, rate in rows:
        mfu = 100 * rate * per_token / peak[precision]
        print(f"{name:14s} {precision:5s} {rate:12.0f} tokens/s  MFU {mfu:6.2f}%")
    weft = {p: r for n, p, r in rows if n == "weft cuda"}
    for name, precision, rate in rows:
        if name != "weft cuda" and precision in weft:
            print(f"weft / {name} {precision}: {weft[precision] / rate:.3f}x")
    try:
        weft_profile(base, env)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"weft cuda bf16 profile: FAIL: {error}")
        return 1
    return 0 if len(weft) == 2 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir")
    p.add_argument("--weftc", help="default: the weft package's (weft.tool)")
    for name, default in (("layers", 12), ("hidden", 768), ("heads", 12),
                          ("vocab", 50257), ("seq", 1024), ("batch", 8)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--gelu", choices=["erf", "tanh"], default="tanh",
                   help="the model's GELU, on both sides (gen_gpt2.py --gelu)")
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--steps", type=int, default=12)
    r.add_argument("--torch-modes", default="eager,compile",
                   help="the PyTorch sides: eager, compile or both "
                        "(torch.compile's first step compiles for a minute)")
    r.add_argument("--device", default="cuda")
    r.add_argument("--peak-f32", type=float, default=67.0)
    r.add_argument("--peak-bf16", type=float, default=989.0)
    args = parser.parse_args()
    return prepare(args) if args.mode == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
