#!/usr/bin/env python3
"""The planner's predicted step time against the data-parallel degree for
each gradient sync (weftc --grad-sync: library, ring, tree, ps,
hierarchical) on four fabrics: one NVLink domain, rail-optimized
InfiniBand, oversubscribed RoCE and a DDC (docs/clusters/*.yaml). Weak
scaling: a GPT of 1.3B parameters, one sequence of 2048 tokens per GPU,
pure data parallelism without ZeRO, each point `weft-plan --fix
dp=N,tp=1,pp=1,zero=0,sync=S --json` on the fabric's cluster grown to N
GPUs. Prints a table per fabric (step time, and the all-reduce time before
the backward pass hides it); --svg writes the chart of docs/planner.md."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import weft

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTERS = os.path.join(os.path.dirname(HERE), "docs", "clusters")
FABRICS = [("NVLink domain", "nvlink-domain.yaml"),
           ("InfiniBand (rail-optimized)", "infiniband.yaml"),
           ("RoCE (2:1 oversubscribed)", "roce.yaml"),
           ("DDC", "ddc.yaml")]
SYNCS = ["library", "ring", "tree", "ps", "hierarchical"]
COLOURS = {"library": "#444444", "ring": "#1f77b4", "tree": "#ff7f0e",
           "ps": "#2ca02c", "hierarchical": "#d62728"}
MODEL = "gpt:layers=24,hidden=2048,heads=16,vocab=51200,seq=2048"
SEQUENCES_PER_GPU = 1


def cluster_of(path, gpus, scratch):
    """The fabric's cluster file with `gpus` GPUs: more nodes of the same
    size, or one NVLink domain of `gpus`."""
    with open(path) as f:
        text = f.read()
    per_node = int(re.search(r"^gpus_per_node: (\d+)", text, re.M).group(1))
    if gpus < per_node or per_node > 8:
        per_node = gpus
    text = re.sub(r"^nodes: \d+", f"nodes: {gpus // per_node}", text, flags=re.M)
    text = re.sub(r"^gpus_per_node: \d+", f"gpus_per_node: {per_node}", text,
                  flags=re.M)
    out = os.path.join(scratch, f"{gpus}-{os.path.basename(path)}")
    with open(out, "w") as f:
        f.write(text)
    return out


def predict(plan_tool, cluster, dp, sync):
    result = subprocess.run(
        [plan_tool, "--synthetic", MODEL, "--cluster", cluster,
         "--global-batch", str(SEQUENCES_PER_GPU * dp), "--top", "1", "--json",
         "--fix", f"dp={dp},tp=1,pp=1,zero=0,sync={sync}"],
        capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: weft-plan on {cluster}: {result.stderr.strip()}")
    plan = json.loads(result.stdout)["plans"][0]
    seconds = plan["grad_sync_seconds"].get(sync, 0.0)
    return plan["step_time"], seconds


def svg(results, degrees):
    width, height, pad = 340, 260, 48
    panels = []
    for index, (fabric, rows) in enumerate(results):
        left = index % 2 * (width + 20) + 10
        top = index // 2 * (height + 30) + 30
        times = [rows[d][s][0] for d in degrees for s in SYNCS]
        low, high = min(times), max(times)
        span = (high - low) or 1.0
        def x(i):
            return left + pad + i * (width - pad - 10) / (len(degrees) - 1)
        def y(t):
            return top + height - pad - (t - low) / span * (height - pad - 20)
        parts = [f'<rect x="{left}" y="{top}" width="{width}" height="{height}" '
                 'fill="white" stroke="#bbb"/>',
                 f'<text x="{left + width / 2}" y="{top + 16}" text-anchor="middle" '
                 f'font-size="13">{fabric}</text>']
        for i, d in enumerate(degrees):
            parts.append(f'<text x="{x(i):.1f}" y="{top + height - pad + 16}" '
                         f'text-anchor="middle" font-size="10">{d}</text>')
        for t in (low, (low + high) / 2, high):
            parts.append(f'<text x="{left + pad - 4}" y="{y(t) + 3:.1f}" '
                         f'text-anchor="end" font-size="10">{t * 1e3:.0f}</text>')
        parts.append(f'<text x="{left + width / 2}" y="{top + height - 10}" '
                     'text-anchor="middle" font-size="10">data-parallel degree</text>')
        parts.append(f'<text x="{left + 12}" y="{top + height / 2}" font-size="10" '
                     f'transform="rotate(-90 {left + 12} {top + height / 2})" '
                     'text-anchor="middle">step time (ms)</text>')
        for s in SYNCS:
            points = " ".join(f"{x(i):.1f},{y(rows[d][s][0]):.1f}"
                              for i, d in enumerate(degrees))
            dash = ' stroke-dasharray="4 3"' if s == "library" else ""
            parts.append(f'<polyline points="{points}" fill="none" '
                         f'stroke="{COLOURS[s]}" stroke-width="2"{dash}/>')
        panels.append("\n".join(parts))
    legend = " ".join(
        f'<rect x="{10 + i * 120}" y="8" width="12" height="12" fill="{COLOURS[s]}"/>'
        f'<text x="{26 + i * 120}" y="18" font-size="12">{s}</text>'
        for i, s in enumerate(SYNCS))
    total_width, total_height = 2 * (width + 20), 2 * (height + 30) + 20
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_width}" '
            f'height="{total_height}" font-family="sans-serif">\n{legend}\n'
            + "\n".join(panels) + "\n</svg>\n")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--degrees", default="8,16,32,64,128,256")
    parser.add_argument("--svg", help="write the chart here")
    args = parser.parse_args()
    degrees = [int(d) for d in args.degrees.split(",")]
    plan_tool = weft.tool("weft-plan")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for fabric, name in FABRICS:
            rows = {}
            for dp in degrees:
                cluster = cluster_of(os.path.join(CLUSTERS, name), dp, scratch)
                rows[dp] = {s: predict(plan_tool, cluster, dp, s) for s in SYNCS}
            results.append((fabric, rows))
    for fabric, rows in results:
        print(f"== {fabric}: step time ms (all-reduce ms)")
        print("   dp " + "".join(f"{s:>20}" for s in SYNCS))
        for dp in degrees:
            cells = "".join(f"{rows[dp][s][0] * 1e3:>11.1f} ({rows[dp][s][1] * 1e3:>6.1f})"
                            for s in SYNCS)
            print(f"{dp:>5} {cells}")
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(results, degrees))
    return 0


if __name__ == "__main__":
    sys.exit(main())
