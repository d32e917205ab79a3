#!/usr/bin/env python3
"""Forward-pass benchmark: Weft's compiled CPU code beside onnxruntime.

Generates a GPT-2-small-shaped model (12 layers, hidden 768, 12 heads,
vocab 50257, seq 128; random weights) with symbolic batch, compiles it with
weftc for batch 1 and 8 (reporting compile time and peak memory), and times
the forward pass of Weft and onnxruntime in one run with the same thread
count (1 and 2). Prints median times and the ratio Weft / onnxruntime, and
checks that both compute the same logits."""

import argparse
import pathlib
import re
import resource
import subprocess
import sys
import time

import numpy as np

from weft import tool

ROOT = pathlib.Path(__file__).resolve().parent.parent


def median_ms(values):
    return sorted(values)[len(values) // 2] * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layers", type=int, default=12)
    args = parser.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    model = work / f"gpt2_small_l{args.layers}.onnx"
    if not model.exists():
        subprocess.run([sys.executable, str(ROOT / "utils" / "gen_gpt2.py"),
                        "--layers", str(args.layers), "--hidden", "768", "--heads", "12",
                        "--vocab", "50257", "--seq", "128", "--symbolic",
                        "-o", str(model)], check=True)
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    weftc = tool("weftc")
    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        exe = work / f"gpt2_small_b{batch}"
        start = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        subprocess.run([str(weftc), str(model), "--dim", f"batch={batch}",
                        "--dim", "seq=128", "-o", str(exe)], check=True)
        compile_s = time.perf_counter() - start
        peak_mb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
        print(f"batch {batch}: weftc compile {compile_s:.1f} s, peak memory {peak_mb:.0f} MB")
        ids = np.random.default_rng(batch).integers(0, 50257, (batch, 128)).astype(np.int64)
        ids_path, out_path = work / f"ids_b{batch}.npy", work / f"logits_b{batch}.npy"
        np.save(ids_path, ids)
        for threads in [int(t) for t in args.threads.split(",")]:
            proc = subprocess.run([str(exe), "--input", f"input_ids={ids_path}",
                                   "--output", f"logits={out_path}", "--threads", str(threads),
                                   "--repeat", str(args.repeat + 1)],
                                  capture_output=True, text=True, check=True)
            weft_ms = float(re.search(r"median ([0-9.]+) ms", proc.stdout).group(1))
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(model), options,
                                           providers=["CPUExecutionProvider"])
            reference = session.run(None, {"input_ids": ids})[0]
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                session.run(None, {"input_ids": ids})
                times.append(time.perf_counter() - t0)
            ort_ms = median_ms(times)
            error = float(np.abs(np.load(out_path) - reference).max())
            rows.append((batch, threads, weft_ms, ort_ms, error))
    print(f"{'batch':>5} {'threads':>7} {'weft ms':>9} {'ort ms':>9} {'weft/ort':>8} {'max |diff|':>10}")
    for batch, threads, weft_ms, ort_ms, error in rows:
        print(f"{batch:>5} {threads:>7} {weft_ms:>9.1f} {ort_ms:>9.1f} {weft_ms / ort_ms:>8.2f} {error:>10.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
