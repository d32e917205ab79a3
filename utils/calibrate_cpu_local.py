#!/usr/bin/env python3
"""Calibrates the planner's cpu-local cluster for R ranks on this machine.

1. `mpiexec -n R weft-calibrate` measures one rank alone (GEMM rate, memory
   and cache bandwidth) and MPI (collective latency and bandwidth, sends).
2. Weft's compiled loops do not stream at the measured bandwidth: a
   reference GPT training step is compiled for one rank, run with the
   threads a rank of R gets, and timed. The planner prices the step's GEMMs
   at the measured rate; what the step takes beyond them is its elementwise
   ops and reductions, which sets efficiency.elementwise (printed).
Writes $WEFT_CPU_LOCAL (else ~/.cache/weft/cpu-local.json).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"calibrate_cpu_local: error: {' '.join(command)} failed: "
                 f"{result.stderr.strip()}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bin_dir = os.path.join(args.build, "bin")
    output = os.environ.get("WEFT_CPU_LOCAL") or os.path.join(
        os.environ.get("XDG_CACHE_HOME",
                       os.path.join(os.path.expanduser("~"), ".cache")),
        "weft", "cpu-local.json")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    # Bound to cores as weft-run binds the ranks of a model.
    bind = (["-bind-to", "core"]
            if args.ranks > len(os.sched_getaffinity(0)) else [])
    print(run(["mpiexec"] + bind + ["-n", str(args.ranks),
               os.path.join(bin_dir, "weft-calibrate"), "-o", output]).strip())
    cluster = json.load(open(output))

    # The reference step: a 4-layer GPT (hidden 128, seq 64), batch 2, one
    # rank with a rank's threads.
    work = tempfile.mkdtemp(prefix="weft-calibrate-")
    model = os.path.join(work, "gpt.onnx")
    run([sys.executable, os.path.join(here, "utils", "gen_gpt2.py"),
         "--layers", "4", "--hidden", "128", "--heads", "4", "--vocab", "256",
         "--seq", "64", "--batch", "2", "-o", model])
    exe = os.path.join(work, "step")
    run([os.path.join(bin_dir, "weftc"), model, "--train", "-o", exe])
    env = dict(os.environ,
               OMP_NUM_THREADS=str(cluster["threads_per_rank"]))
    log = os.path.join(work, "train.jsonl")
    run([os.path.join(bin_dir, "weft-run"), "-n", "1", exe, "--data",
         os.path.join(here, "data", "tinyshakespeare.tokens"), "--steps",
         str(args.steps), "--print-every", str(args.steps), "--log", log],
        env=env)
    steps = [json.loads(line) for line in open(log)]
    measured = statistics.median(2 * 64 / s["tokens_per_s"]
                                 for s in steps[4:])

    def predict(elementwise):
        """The reference step's predicted time at this efficiency."""
        one = dict(cluster, gpus_per_node=1, cores_per_node=0)
        one["efficiency"] = dict(cluster["efficiency"],
                                 elementwise=elementwise)
        single = os.path.join(work, "one-rank.json")
        json.dump(one, open(single, "w"))
        prediction = json.loads(run(
            [os.path.join(bin_dir, "weft-plan"), model, "--cluster", single,
             "--precision", "f32", "--fix",
             "dp=1,tp=1,pp=1,m=1,recompute=none", "--json", "--top", "1"]))
        return prediction["plans"][0]["step_time"]

    # Elementwise time falls as 1/efficiency: with a vanishing share the
    # prediction is the GEMMs alone.
    contractions = predict(1e9)
    elementwise = predict(1.0) - contractions
    if measured <= contractions or elementwise <= 0:
        sys.exit(f"calibrate_cpu_local: error: the reference step took "
                 f"{measured * 1e3:.1f} ms, no more than its GEMMs at the "
                 f"measured rate ({contractions * 1e3:.1f} ms)")
    efficiency = elementwise / (measured - contractions)
    cluster["efficiency"]["elementwise"] = efficiency
    json.dump(cluster, open(output, "w"), indent=1)
    print(f"reference step: measured {measured * 1e3:.1f} ms; its GEMMs "
          f"{contractions * 1e3:.1f} ms at the measured rate, the rest "
          f"{elementwise * 1e3:.1f} ms at the measured bandwidth: "
          f"efficiency.elementwise {efficiency:.3f}\nwrote {output}")

if __name__ == "__main__":
    main()
