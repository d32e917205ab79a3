#!/usr/bin/env python3
"""Predicted against measured step times of parallel plans on this machine.

Calibrates the `cpu-local` cluster for the rank count
(utils/calibrate_cpu_local.py: weft-calibrate under mpiexec, then two
one-rank reference steps). For every plan weft-plan --fix predicts its
step time and weftc --train --plan=<the same plan> compiles it. Then weft-run
trains every plan for --steps steps on the bundled corpus, plan after plan,
for --rounds rounds in a rotating order: this machine's speed drifts by
tens of percent over seconds, and interleaving spreads the drift over all
plans alike. A plan's measurement is the median of its step times after 4
warm-up steps of each launch. Prints both per plan, their ratio, the median
error and Spearman's rank correlation; exits 1 when the correlation is
under --min-spearman.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from weft import tool

# dp/tp/pp mixes on 4 ranks (micro-batch count m: batch 8 / dp / mbs).
PLANS = [
    "dp=4,tp=1,pp=1,mbs=2,m=1,zero=0",
    "dp=4,tp=1,pp=1,mbs=2,m=1,zero=1",
    "dp=4,tp=1,pp=1,mbs=1,m=2,zero=0",
    "dp=2,tp=2,pp=1,mbs=4,m=1,zero=0",
    "dp=1,tp=4,pp=1,mbs=8,m=1,zero=0",
    "dp=2,tp=1,pp=2,mbs=1,m=4,schedule=1f1b,v=1,zero=0",
    "dp=2,tp=1,pp=2,mbs=1,m=4,schedule=gpipe,v=1,zero=0",
    "dp=1,tp=2,pp=2,mbs=2,m=4,schedule=1f1b,v=1,zero=0",
    "dp=1,tp=1,pp=4,mbs=2,m=4,schedule=1f1b,v=1,zero=0",
    "dp=1,tp=1,pp=4,mbs=1,m=8,schedule=gpipe,v=1,zero=0",
]


def ranks_of(values):
    """Ranks 1..n, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x, y):
    rx, ry = ranks_of(x), ranks_of(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / (sum((a - mx) ** 2 for a in rx) *
                  sum((b - my) ** 2 for b in ry)) ** 0.5


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr.strip()}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--min-spearman", type=float, default=0.8)
    args = parser.parse_args()
    warmup = 4  # the first steps are not timed: they include start-up
    if args.steps <= warmup:
        parser.error(f"--steps must exceed the {warmup} warm-up steps")
    work = tempfile.mkdtemp(prefix="weft-planner-")
    env = dict(os.environ, WEFT_CPU_LOCAL=os.path.join(work, "cpu-local.json"))
    print(run([sys.executable, "utils/calibrate_cpu_local.py", "--ranks",
               str(args.ranks)], env=env).strip())

    model = os.path.join(work, "gpt.onnx")
    run([sys.executable, "utils/gen_gpt2.py", "--layers", "4", "--hidden",
         "128", "--heads", "4", "--vocab", "256", "--seq", "64", "--batch",
         "8", "-o", model])
    batch, seq = 8, 64
    predictions, programs = [], []
    for index, plan in enumerate(PLANS):
        full = plan + ",recompute=none,sp=0"
        if "schedule" not in full:
            full += ",schedule=1f1b,v=1"
        prediction = json.loads(run(
            [str(tool("weft-plan")), model, "--cluster",
             "cpu-local", "--precision", "f32", "--fix", full, "--json",
             "--top", "1"], env=env))
        plans = prediction["plans"]
        if not plans:
            sys.exit(f"{plan}: weft-plan found no fitting plan")
        predictions.append(plans[0]["step_time"])
        exe = os.path.join(work, f"plan{index}", "train")
        os.makedirs(os.path.dirname(exe))
        run([str(tool("weftc")), model, "--train",
             f"--plan={full}", "--cluster=cpu-local", "-o", exe], env=env)
        programs.append(exe)

    step_times = [[] for _ in PLANS]
    for turn in range(args.rounds):
        for offset in range(len(PLANS)):
            index = (turn + offset) % len(PLANS)
            log = os.path.join(work, f"plan{index}", f"round{turn}.jsonl")
            run([str(tool("weft-run")), "-n", str(args.ranks),
                 programs[index], "--data", "data/tinyshakespeare.tokens",
                 "--steps", str(args.steps), "--print-every",
                 str(args.steps), "--log", log], env=env)
            steps = [json.loads(line) for line in open(log)]
            step_times[index] += [batch * seq / s["tokens_per_s"]
                                  for s in steps[warmup:]]
    rows = []
    for plan, predicted, times in zip(PLANS, predictions, step_times):
        measured = statistics.median(times)
        rows.append((plan, predicted, measured))
        print(f"{plan:55s} predicted {predicted * 1e3:8.1f} ms  measured "
              f"{measured * 1e3:8.1f} ms  measured/predicted "
              f"{measured / predicted:5.2f}", flush=True)
    predicted = [r[1] for r in rows]
    measured = [r[2] for r in rows]
    errors = [abs(p - m) / m * 100 for _, p, m in rows]
    rho = spearman(predicted, measured)
    print(f"\n{len(rows)} plans on {args.ranks} ranks: Spearman rank "
          f"correlation {rho:.2f} (at least {args.min_spearman}), median "
          f"error {statistics.median(errors):.0f}%")
    if rho < args.min_spearman:
        sys.exit(1)


if __name__ == "__main__":
    main()
