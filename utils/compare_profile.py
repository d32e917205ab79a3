#!/usr/bin/env python3
"""Each launch's measured time beside the kernel report's prediction.

  compare_profile.py --report R.json --profile P --steps N [--skip K]
      [--device WHAT] [--top T]

R.json is `weftc --target=cuda --report=kernels --report-file` of the
program; P is what one run of it wrote under $WEFT_PROFILE_LAUNCHES (one
line per run of a numbered launch: its id and seconds; CUDA events on a
GPU, the CPU's wall time under the emulation). The run trained N steps;
the first K (default 1 when N > 1: module loads, cuBLASLt's first plans)
are left out. Every launch of the report must have run its `runs` per step
times the steps, and nothing else: else one line names the first launch
that did not, and the exit status is 1. Times include each launch's
latency (a profiling build waits for the GPU before each launch); under the
emulation the last run is timed up to the process's exit.

Prints the launches that took longest (per step: measured, predicted, their
ratio, what the launch is), then the step's totals. `--device` names what
measured the times (a GPU's name, or "emulation (CPU)"): the figures are a
GPU's only when a GPU ran them.
"""

import argparse
import collections
import json
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--skip", type=int)
    parser.add_argument("--device", default="GPU")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    skip = args.skip if args.skip is not None else (1 if args.steps > 1 else 0)
    if not 0 <= skip < args.steps:
        sys.exit(f"error: --skip {skip} leaves no step of {args.steps}")

    report = json.load(open(args.report))
    launches = {launch["id"]: launch for launch in report["launches"]}
    runs = collections.defaultdict(list)
    for number, line in enumerate(open(args.profile), 1):
        fields = line.split()
        if len(fields) != 2:
            sys.exit(f"error: {args.profile}:{number}: expected 'id seconds'")
        launch_id, seconds = int(fields[0]), float(fields[1])
        if launch_id not in launches:
            sys.exit(f"error: {args.profile}:{number}: launch {launch_id} is not "
                     f"in the report")
        runs[launch_id].append(seconds)

    measured = {}
    for launch_id, launch in sorted(launches.items()):
        expected = launch["runs"] * args.steps
        got = len(runs.get(launch_id, []))
        if got != expected:
            sys.exit(f"error: launch {launch_id} ({launch['kind']} "
                     f"{launch.get('node', '')}) ran {got} times in {args.steps} "
                     f"steps; the report says {launch['runs']} per step")
        kept = runs[launch_id][launch["runs"] * skip:]
        measured[launch_id] = sum(kept) / (args.steps - skip)

    steps = args.steps - skip
    print(f"every launch of the report ran its runs per step, {args.steps} steps "
          f"({len(launches)} launches)")
    print(f"measured on {args.device} (mean of {steps} steps) against the "
          f"report's prediction on {report['gpu']['name']}:")
    print(f"{'id':>5} {'runs':>5} {'measured us':>12} {'predicted us':>13} "
          f"{'ratio':>7}  what")
    order = sorted(launches, key=lambda i: measured[i], reverse=True)
    for launch_id in order[:args.top]:
        launch = launches[launch_id]
        predicted = launch["predicted_seconds"] * launch["runs"]
        ratio = measured[launch_id] / predicted if predicted else float("inf")
        what = f"{launch['kind']} {launch.get('library', '')} {launch.get('node', '')}"
        print(f"{launch_id:5d} {launch['runs']:5d} {measured[launch_id] * 1e6:12.1f} "
              f"{predicted * 1e6:13.1f} {ratio:7.2f}  {' '.join(what.split())}")
    total = sum(measured.values())
    predicted_step = report["totals"]["predicted_step_seconds"]
    ratio = f": {total / predicted_step:.2f}x" if predicted_step > 0 else ""
    print(f"step: measured {total * 1e3:.3f} ms in launches, predicted "
          f"{predicted_step * 1e3:.3f} ms{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
