#!/usr/bin/env python3
"""Generate a GPT-2-XL-shaped model (48 layers, hidden 1600, 25 heads, vocab
50257) whose weights live in a sparse external-data file, import it with
weft-translate, and check the import's wall time and peak memory."""

import argparse
import pathlib
import resource
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weft-translate", required=True)
    parser.add_argument("--workdir", required=True, type=pathlib.Path)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--max-rss-mb", type=float, default=1024.0)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    model = args.workdir / "gpt2_xl.onnx"
    subprocess.run([sys.executable, str(HERE / "gen_gpt2.py"), "--layers", "48",
                    "--hidden", "1600", "--heads", "25", "--vocab", "50257",
                    "--seq", "1024", "--external-data", "--zero-weights",
                    "-o", str(model)], check=True)
    start = time.monotonic()
    proc = subprocess.run([args.weft_translate, "--import-onnx", str(model),
                           "-o", str(args.workdir / "gpt2_xl.mlir")],
                          capture_output=True, text=True)
    seconds = time.monotonic() - start
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if proc.returncode != 0:
        print(f"import failed: {proc.stderr.strip()}")
        return 1
    params = (args.workdir / "gpt2_xl.mlir").read_text().count("weft.param")
    print(f"gpt2-xl import: {seconds:.1f} s, peak RSS {rss_mb:.0f} MB, "
          f"{params} weight arguments")
    ok = seconds < args.max_seconds and rss_mb < args.max_rss_mb
    print("PASS" if ok else f"FAIL: limits are {args.max_seconds} s and "
          f"{args.max_rss_mb} MB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
