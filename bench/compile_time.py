#!/usr/bin/env python3
"""Compile-time benchmark: weftc's wall time and peak memory (the child's
maximum resident set) for the models of issue 18, in one run:

- GPT-2-small (12 x 768, vocab 50257, seq 128): inference and a training
  step;
- a 24-layer GPT of hidden 256 at --mesh pp=4 with m = 4, 16 and 64
  micro-batches, and the same model on one rank at --grad-accum 4 and 64.

It prints each compile and the ratios the goals are about: GPT-2-small
inference under 10 s, and m = 64 (and --grad-accum 64) within 1.3x of
m = 4. A compile that runs past --timeout is reported as such and counts
as missing its goal. The models are written into --work (outside the
repository by default)."""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from weft import tool

ROOT = pathlib.Path(__file__).resolve().parent.parent


def generate(work, name, layers, hidden, heads, vocab, seq, batch):
    model = work / f"{name}.onnx"
    if not model.exists():
        subprocess.run([sys.executable, str(ROOT / "utils" / "gen_gpt2.py"),
                        "--layers", str(layers), "--hidden", str(hidden),
                        "--heads", str(heads), "--vocab", str(vocab), "--seq",
                        str(seq), "--batch", str(batch), "--zero-weights",
                        "-o", str(model)], check=True,
                       stdout=subprocess.DEVNULL)
    return model


def compile_once(weftc, model, flags, output, timeout):
    """(seconds, peak RSS in bytes, None) or (seconds, peak, 'why')."""
    with open(str(output) + ".log", "w+") as log:
        start = time.monotonic()
        process = subprocess.Popen([str(weftc), str(model), *flags, "-o",
                                    str(output)], stdout=subprocess.DEVNULL,
                                   stderr=log)
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > start + timeout:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                process.returncode = os.waitstatus_to_exitcode(status)
                return time.monotonic() - start, usage.ru_maxrss * 1024, \
                    f"timed out after {timeout:.0f} s"
            time.sleep(0.05)
        seconds = time.monotonic() - start
        if process.returncode != 0:
            log.seek(0)
            lines = log.read().strip().splitlines()
            return seconds, usage.ru_maxrss * 1024, \
                "failed: " + (lines[-1] if lines else "no message")
        return seconds, usage.ru_maxrss * 1024, None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", default=None,
                        help="where models and executables go (default: a "
                             "temporary directory)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one compile may take")
    parser.add_argument("--only", default="",
                        help="comma-separated names of the rows to run "
                             "(default: all)")
    args = parser.parse_args()
    weftc = tool("weftc")
    with tempfile.TemporaryDirectory(prefix="weft-compile-time-") as scratch:
        work = pathlib.Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        gpt2 = lambda: generate(work, "gpt2_small", 12, 768, 12, 50257, 128, 1)
        deep = lambda: generate(work, "gpt_l24_h256", 24, 256, 8, 256, 128, 4)
        rows = [
            ("gpt2-small inference", gpt2, []),
            ("gpt2-small train", gpt2, ["--train"]),
        ]
        for m in (4, 16, 64):
            rows.append((f"l24 pp=4 m={m}", deep,
                         ["--train", "--mesh", "pp=4", "--microbatches",
                          str(m)]))
        for k in (4, 64):
            rows.append((f"l24 grad-accum={k}", deep,
                         ["--train", "--grad-accum", str(k)]))
        only = set(filter(None, args.only.split(",")))
        results = {}
        print(f"{'compile':<24} {'seconds':>9} {'peak GB':>8}  note")
        for name, model, flags in rows:
            if only and name not in only:
                continue
            seconds, peak, problem = compile_once(
                weftc, model(), flags, work / name.replace(" ", "_"),
                args.timeout)
            results[name] = (seconds, problem)
            print(f"{name:<24} {seconds:>9.1f} {peak / 1e9:>8.2f}  "
                  f"{problem or ''}", flush=True)

    def ratio(slow, fast):
        if slow not in results or fast not in results:
            return None
        (a, why_a), (b, why_b) = results[slow], results[fast]
        return None if why_b else (float("inf") if why_a else a / b)

    goals = []
    if "gpt2-small inference" in results:
        seconds, problem = results["gpt2-small inference"]
        goals.append(("gpt2-small inference under 10 s",
                      f"{seconds:.1f} s", not problem and seconds < 10))
    for slow, fast in (("l24 pp=4 m=64", "l24 pp=4 m=4"),
                       ("l24 grad-accum=64", "l24 grad-accum=4")):
        r = ratio(slow, fast)
        if r is not None:
            goals.append((f"{slow} within 1.3x of {fast.split()[-1]}",
                          f"{r:.2f}x", r <= 1.3))
    for goal, value, met in goals:
        print(f"goal: {goal}: {value} ({'met' if met else 'not met'})")


if __name__ == "__main__":
    main()
