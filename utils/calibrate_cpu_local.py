#!/usr/bin/env python3
"""Calibrates the planner's cpu-local cluster for R ranks on this machine.

1. `mpiexec -n R weft-calibrate` measures one rank alone (GEMM rate, memory
   and cache bandwidth) and MPI (collective latency and bandwidth, sends).
2. Weft's compiled loops do not stream at the measured bandwidth, and its
   layers' many small loops reach less of it than the optimizer's one long
   update loop. Two reference GPT training steps, one mostly layers and
   one mostly update, are compiled for one rank, run with the threads a
   rank of R gets, and timed in turns. The planner prices their GEMMs at
   the measured rate; what each step takes beyond them is its elementwise
   work and its update, two equations that set efficiency.elementwise and
   efficiency.update (printed).
Writes $WEFT_CPU_LOCAL (else ~/.cache/weft/cpu-local.json).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from weft import tool


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"calibrate_cpu_local: error: {' '.join(command)} failed: "
                 f"{result.stderr.strip()}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--attempts", type=int, default=1,
                        help="measure again when the fit finds no positive "
                             "efficiencies (the machine's speed changed)")
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    output = os.environ.get("WEFT_CPU_LOCAL") or os.path.join(
        os.environ.get("XDG_CACHE_HOME",
                       os.path.join(os.path.expanduser("~"), ".cache")),
        "weft", "cpu-local.json")
    os.makedirs(os.path.dirname(output), exist_ok=True)
    # Bound to cores as weft-run binds the ranks of a model.
    bind = (["-bind-to", "core"]
            if args.ranks > len(os.sched_getaffinity(0)) else [])
    print(run(["mpiexec"] + bind + ["-n", str(args.ranks),
               str(tool("weft-calibrate")), "-o", output]).strip())
    cluster = json.load(open(output))

    # Two reference steps, one rank with a rank's threads: a GPT whose step
    # is mostly layers (3 layers, hidden 96, seq 48, batch 4), and one whose
    # step is mostly its optimizer update (1 layer, hidden 256, vocab 2048,
    # seq 8, batch 1). Neither is a model the validation bench trains.
    work = tempfile.mkdtemp(prefix="weft-calibrate-")
    references = {
        "layers": dict(layers=3, hidden=96, heads=4, vocab=256, seq=48,
                       batch=4),
        "update": dict(layers=1, hidden=256, heads=4, vocab=2048, seq=8,
                       batch=1),
    }
    env = dict(os.environ,
               OMP_NUM_THREADS=str(cluster["threads_per_rank"]))
    models, programs = {}, {}
    for name, shape in references.items():
        models[name] = os.path.join(work, name + ".onnx")
        run([sys.executable, os.path.join(here, "utils", "gen_gpt2.py")] +
            [arg for key, value in shape.items()
             for arg in (f"--{key}", str(value))] + ["-o", models[name]])
        programs[name] = os.path.join(work, name)
        run([str(tool("weftc")), models[name], "--train", "-o",
             programs[name]])

    def measure():
        """Each reference step's median time; the references take turns,
        as this machine's speed drifts over seconds."""
        times = {name: [] for name in references}
        for _ in range(args.rounds):
            for name in references:
                log = os.path.join(work, name + ".jsonl")
                run([str(tool("weft-run")), "-n", "1",
                     programs[name], "--data",
                     os.path.join(here, "data", "tinyshakespeare.tokens"),
                     "--steps", str(args.steps), "--print-every",
                     str(args.steps), "--log", log], env=env)
                steps = [json.loads(line) for line in open(log)]
                tokens = references[name]["batch"] * references[name]["seq"]
                times[name] += [tokens / s["tokens_per_s"] for s in steps[4:]]
        return {name: statistics.median(t) for name, t in times.items()}

    def predict(name, elementwise, update):
        """A reference step's predicted time at these efficiencies."""
        one = dict(cluster, gpus_per_node=1, cores_per_node=0)
        one["efficiency"] = dict(cluster["efficiency"],
                                 elementwise=elementwise, update=update)
        single = os.path.join(work, "one-rank.json")
        json.dump(one, open(single, "w"))
        prediction = json.loads(run(
            [str(tool("weft-plan")), models[name], "--cluster",
             single, "--precision", "f32", "--fix",
             "dp=1,tp=1,pp=1,m=1,recompute=none", "--json", "--top", "1"]))
        return prediction["plans"][0]["step_time"]

    # Elementwise and update time fall as 1/efficiency; at a vanishing
    # share the prediction is the GEMMs alone. Each step is
    #   measured = GEMMs + elementwise / e_elementwise + update / e_update,
    # two equations for the two efficiencies.
    vanishing = 1e9
    shares = {}
    for name in references:
        gemms = predict(name, vanishing, vanishing)
        shares[name] = (predict(name, 1.0, vanishing) - gemms,
                        predict(name, vanishing, 1.0) - gemms, gemms)
    # A speed change between the two references can leave no positive
    # solution: measure again, up to --attempts times.
    for attempt in range(args.attempts):
        measured = measure()
        rows = {name: (e, u, measured[name] - gemms, gemms)
                for name, (e, u, gemms) in shares.items()}
        (e1, u1, r1, _), (e2, u2, r2, _) = rows["layers"], rows["update"]
        det = e1 * u2 - e2 * u1
        inverse_elementwise = (r1 * u2 - r2 * u1) / det
        inverse_update = (e1 * r2 - e2 * r1) / det
        if inverse_elementwise > 0 and inverse_update > 0:
            break
    for name, (e, u, r, gemms) in rows.items():
        print(f"reference step '{name}': measured "
              f"{measured[name] * 1e3:.1f} ms; its GEMMs {gemms * 1e3:.1f} "
              f"ms at the measured rate, elementwise {e * 1e3:.1f} ms and "
              f"update {u * 1e3:.1f} ms at the measured bandwidth")
    if inverse_elementwise <= 0 or inverse_update <= 0:
        sys.exit("calibrate_cpu_local: error: the reference steps fit no "
                 "positive efficiencies (1/elementwise "
                 f"{inverse_elementwise:.3g}, 1/update {inverse_update:.3g})"
                 f" in {args.attempts} attempt(s): the machine's speed "
                 "changed between them; run again")
    cluster["efficiency"]["elementwise"] = 1 / inverse_elementwise
    cluster["efficiency"]["update"] = 1 / inverse_update
    json.dump(cluster, open(output, "w"), indent=1)
    print(f"efficiency.elementwise {1 / inverse_elementwise:.3f}, "
          f"efficiency.update {1 / inverse_update:.3f}\nwrote {output}")

if __name__ == "__main__":
    main()
