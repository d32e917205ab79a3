#!/usr/bin/env python3
"""Compare weft-plan's predictions with published GPT training runs.

For every row of the CSV, weft-plan prices the published configuration
(--fix with the row's dp, tp, pp, micro-batch size, schedule, recomputation
and sequence parallelism; "?" for one the source does not state leaves it
to the planner) on a cluster of the row's size: optional trailing
columns give the sequence length (default 2048), the cluster preset
(default dgx-a100-80g), the context-parallel degree (default 1), the
model family with its options (default "gpt"; e.g. "llama:kv-heads=8,
ffn=14336", quoted) and the row's own bound on its absolute error in
percent (default --max-row-error; a row with a bound of its own says why
in a comment above it). A "tflops" row's predicted step time is turned
into TFLOP/s per GPU with the formula its source uses (Narayanan et al.
2021, eq. 3); a "step_s" row compares step times, an "mfu" row the
planner's MFU (model FLOPs over the bf16 peak) with the published one,
a "tokens_per_gpu" row tokens per second per GPU.
Prints a markdown table, the median absolute error of each source and of
all rows; exits 1 when a row's error exceeds its bound, a median exceeds
--max-median-error, or a published run (which ran, so fit) is predicted
out of memory.
"""
import argparse
import csv
import json
import statistics
import subprocess
import sys


def eq3_flops(batch, seq, layers, hidden, vocab):
    """Narayanan et al. 2021, eq. 3: FLOPs of a step with full recomputation."""
    return (96 * batch * seq * layers * hidden * hidden *
            (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden)))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weft-plan", required=True)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--max-median-error", type=float, default=15.0,
                        help="percent, over all rows and over each source's")
    parser.add_argument("--max-row-error", type=float, default=30.0,
                        help="percent, for a row without a bound of its own")
    args = parser.parse_args()

    rows = [r for r in csv.reader(
        line for line in open(args.runs) if not line.startswith("#"))]
    errors, by_source, failures = [], {}, []
    print("| source | params (B) | GPUs | tp | pp | dp | batch | mbs | "
          "strategy | published | Weft | error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        (source, params, layers, hidden, heads, vocab, gpus, tp, pp, batch,
         mbs, schedule, v, zero, recompute, sp, metric, published) = row[:18]
        defaults = ["2048", "dgx-a100-80g", "1", "gpt", str(args.max_row_error)]
        seq, cluster, cp, family, bound = (row[18:] + defaults[len(row) - 18:])[:5]
        bound = float(bound)
        layers, hidden, heads, vocab, gpus, tp, pp, batch, seq, cp = map(
            int, (layers, hidden, heads, vocab, gpus, tp, pp, batch, seq, cp))
        dp = gpus // (tp * pp * cp)
        family, _, options = family.partition(":")
        model = (f"{family}:layers={layers},hidden={hidden},heads={heads},"
                 f"vocab={vocab},seq={seq}" + (f",{options}" if options else ""))
        pinned = {"mbs": mbs, "schedule": schedule, "v": v, "zero": zero,
                  "recompute": recompute, "sp": sp}
        fix = f"dp={dp},tp={tp},pp={pp},cp={cp}" + "".join(
            f",{key}={value}" for key, value in pinned.items() if value != "?")
        command = [args.weft_plan,
                   f"--synthetic={model}",
                   f"--cluster={cluster}", f"--nodes={gpus // 8}",
                   f"--global-batch={batch}", f"--fix={fix}", "--json",
                   "--top=1"]
        result = subprocess.run(command, capture_output=True, text=True)
        prediction = json.loads(result.stdout)
        plans = prediction["plans"] or prediction["smallest_too_large"]
        if not plans:
            sys.exit(f"{source} {params}B: weft-plan priced no plan: "
                     f"{result.stderr.strip()}")
        plan = plans[0]
        published = float(published)
        if metric == "tflops":
            predicted = (eq3_flops(batch, seq, layers, hidden, vocab) /
                         (gpus * plan["step_time"]) / 1e12)
            error = 100 * (predicted - published) / published
            shown = f"{published:g} TFLOP/s | {predicted:.1f} TFLOP/s"
        elif metric == "tokens_per_gpu":
            predicted = plan["tokens_per_second"] / gpus
            error = 100 * (predicted - published) / published
            shown = f"{published:g} tokens/s/GPU | {predicted:.0f}"
        elif metric == "mfu":
            predicted = 100 * plan["mfu"]
            error = 100 * (predicted - published) / published
            shown = f"MFU {published:g}% | {predicted:.1f}%"
        else:
            # The error of the throughput, as for the TFLOP/s rows.
            predicted = plan["step_time"]
            error = 100 * (published / predicted - 1)
            shown = f"{published:g} s | {predicted:.2f} s"
        errors.append(abs(error))
        by_source.setdefault(source, []).append(abs(error))
        name = f"{source} {params}B on {gpus} GPUs"
        if abs(error) > bound:
            failures.append(f"{name}: error {error:+.1f}% exceeds its bound {bound:g}%")
        note = "" if plan["fits"] else " (predicted out of memory)"
        if not plan["fits"]:
            failures.append(f"{name}: it ran, and is predicted out of memory")
        if schedule == "?":
            strategy = f"planner's: {plan['plan'].split(',', 3)[3]}"
        else:
            strategy = (f"{schedule}{',v=' + v if v not in ('?', '1') else ''}, "
                        f"recompute={recompute}{', sp' if sp == '1' else ''}"
                        f"{', zero=' + zero if zero not in ('?', '0') else ''}")
        if cp > 1:
            strategy += f", cp={cp}"
        print(f"| {source} | {params} | {gpus} | {tp} | {pp} | {dp} | "
              f"{batch} | {mbs} | {strategy} | {shown}{note} | "
              f"{error:+.1f}% |")
    print()
    for source, source_errors in by_source.items():
        median = statistics.median(source_errors)
        print(f"{source}: median absolute error {median:.1f}% over {len(source_errors)} runs")
        if median > args.max_median_error:
            failures.append(f"{source}: median absolute error {median:.1f}% exceeds "
                            f"{args.max_median_error:g}%")
    median = statistics.median(errors)
    print(f"median absolute error: {median:.1f}% over {len(errors)} runs "
          f"(limit {args.max_median_error:.0f}%)")
    if median > args.max_median_error:
        failures.append(f"the median absolute error exceeds {args.max_median_error:g}%")
    for failure in failures:
        print(f"FAIL: {failure}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
