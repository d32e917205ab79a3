#!/usr/bin/env python3
"""Checks a kernel report (weftc --target=cuda --report=kernels --report-file).

Each check is computed here from the report's launches and buffers, not read
from its totals, and prints one PASS or FAIL line; the exit status is 1 when
any fails.

  --counts FILE --runs-per-launch-run N
      the bytes the emulation counted (WEFT_EMULATION_COUNTS: one line per
      run of a launch: id, bytes read, bytes written) against the report's:
      within --tolerance for an exact launch, at most the report's for an
      inexact one (its indices come from memory); every launch of the report
      ran runs x N times.
  --tensor-core-matmuls F   at least F of the step's contraction FLOPs in
                            tensor-core library calls
  --max-launches N          at most N launches per step
  --no-undersized           no launch of more than 64 K elements of work on
                            fewer blocks than the GPU has multiprocessors
  --min-mfu F               predicted MFU at least F
  --max-hbm-bytes N         at most N bytes read and written per step
  --forbid-elements N       no buffer of N elements (b*h*s*s scores)
  --at-most N:K             at most K buffers of N elements (tokens*vocab:
                            the logits alone)
  --epilogue NAME:K         at least K GEMM calls per step whose epilogue is
                            NAME ("bias + GELU", "GELU gradient", ...)
"""

import argparse
import collections
import json
import sys

LARGE_LAUNCH_ELEMENTS = 64 * 1024


def check(name, ok, detail):
    print(f"{name}: {'PASS' if ok else 'FAIL'}: {detail}")
    return ok


def compare_counts(report, path, runs_per_launch_run, tolerance):
    launches = {launch["id"]: launch for launch in report["launches"]}
    measured = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            launch_id, read, written = (int(x) for x in line.split())
            measured[launch_id].append((read, written))
    ok = True
    worst = (0.0, None)
    unknown = sorted(set(measured) - set(launches))
    if unknown:
        ok = check("counted launches", False,
                   f"the emulation ran launches the report does not list: {unknown[:5]}")
    for launch_id, launch in sorted(launches.items()):
        runs = measured.get(launch_id, [])
        expected_runs = launch["runs"] * runs_per_launch_run
        if len(runs) != expected_runs:
            ok = check(f"launch #{launch_id} runs", False,
                       f"{launch['kind']} in {launch['function']} ran {len(runs)} "
                       f"times, the report says {expected_runs}")
            continue
        for read, written in runs:
            for what, predicted, counted in (("read", launch["bytes_read"], read),
                                             ("written", launch["bytes_written"], written)):
                if launch["exact"]:
                    error = abs(predicted - counted) / max(counted, 1)
                    if error > worst[0]:
                        worst = (error, launch_id)
                    if error > tolerance:
                        ok = check(f"launch #{launch_id} bytes {what}", False,
                                   f"{launch['kind']} in {launch['function']} "
                                   f"({launch['node']}): report {predicted}, "
                                   f"emulation {counted}")
                        break
                elif predicted < counted:
                    ok = check(f"launch #{launch_id} bytes {what}", False,
                               f"inexact {launch['kind']} in {launch['function']}: "
                               f"report {predicted} is below the emulation's {counted}")
                    break
    exact = sum(1 for l in launches.values() if l["exact"])
    detail = (f"{len(launches)} launches ({exact} exact), "
              f"{sum(len(r) for r in measured.values())} runs; worst exact "
              f"error {worst[0]:.2%}")
    if worst[1] is not None:
        detail += f" (launch #{worst[1]})"
    return check(f"bytes per launch within {tolerance:.0%} of the emulation", ok, detail)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", required=True)
    parser.add_argument("--counts")
    parser.add_argument("--runs-per-launch-run", type=int, default=1)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--tensor-core-matmuls", type=float)
    parser.add_argument("--max-launches", type=int)
    parser.add_argument("--no-undersized", action="store_true")
    parser.add_argument("--min-mfu", type=float)
    parser.add_argument("--max-hbm-bytes", type=float)
    parser.add_argument("--forbid-elements", type=int, action="append", default=[])
    parser.add_argument("--at-most", action="append", default=[])
    parser.add_argument("--epilogue", action="append", default=[])
    args = parser.parse_args()

    with open(args.report) as f:
        report = json.load(f)
    launches = report["launches"]
    gpu = report["gpu"]
    ok = True
    if args.counts:
        ok &= compare_counts(report, args.counts, args.runs_per_launch_run,
                             args.tolerance)
    if args.tensor_core_matmuls is not None:
        gemms = [l for l in launches if l["kind"] in ("gemm", "attention")]
        # A training step's contractions all count: a GEMM left as a kernel
        # is matmul work off the tensor cores.
        total = report["step"]["flops"] or sum(l["flops"] * l["runs"] for l in gemms)
        tensor = sum(l["flops"] * l["runs"] for l in gemms if l["tensor_cores"])
        fraction = tensor / total if total else 1.0
        ok &= check("matmul FLOPs on tensor cores", fraction >= args.tensor_core_matmuls,
                    f"{fraction:.1%} of {total:.4g} (at least {args.tensor_core_matmuls:.0%})")
    if args.max_launches is not None:
        count = sum(l["runs"] for l in launches)
        ok &= check("launches per step", count <= args.max_launches,
                    f"{count} (at most {args.max_launches})")
    if args.no_undersized:
        small = [l for l in launches if l["kind"] == "kernel"
                 and l["elements"] > LARGE_LAUNCH_ELEMENTS
                 and l["grid"][0] * l["grid"][1] * l["grid"][2] < gpu["multiprocessors"]]
        detail = f"{len(small)} launches of more than 64 K elements on fewer than {gpu['multiprocessors']} blocks"
        if small:
            l = small[0]
            detail += f", first #{l['id']} in {l['function']} ({l['node']}): grid {l['grid']}, {l['elements']} elements"
        ok &= check("every large launch fills the GPU", not small, detail)
    if args.min_mfu is not None:
        seconds = sum(l["predicted_seconds"] * l["runs"] for l in launches)
        mfu = report["step"]["flops"] / seconds / gpu["peak_bf16_flops"] if seconds else 0
        ok &= check(f"predicted MFU on {gpu['name']}", mfu >= args.min_mfu,
                    f"{mfu:.2%} (at least {args.min_mfu:.0%}); step {seconds * 1e3:.4g} ms")
    if args.max_hbm_bytes is not None:
        moved = sum((l["bytes_read"] + l["bytes_written"]) * l["runs"] for l in launches)
        ok &= check("HBM bytes per step", moved <= args.max_hbm_bytes,
                    f"{moved / 1e9:.4g} GB (at most {args.max_hbm_bytes / 1e9:.4g} GB)")
    for elements in args.forbid_elements:
        found = [b["type"] for b in report["buffers"] if b["elements"] == elements]
        ok &= check(f"no buffer of {elements} elements", not found,
                    ", ".join(found) if found else "none")
    for limit in args.at_most:
        elements, most = (int(x) for x in limit.split(":"))
        found = [b for b in report["buffers"] if b["elements"] == elements]
        count = sum(b["count"] for b in found)
        ok &= check(f"at most {most} buffers of {elements} elements", count <= most,
                    f"{count}: " + ", ".join(b["type"] for b in found))
    for expected in args.epilogue:
        name, least = expected.rsplit(":", 1)
        count = sum(l["runs"] for l in launches
                    if l["kind"] == "gemm" and l.get("epilogue") == name)
        ok &= check(f"GEMMs with the {name} epilogue", count >= int(least),
                    f"{count} per step (at least {least})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
