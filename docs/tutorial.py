#!/usr/bin/env python3
"""Weft tutorial: a PyTorch GPT, exported to ONNX, planned, compiled for
pp=2 x dp=2 x tp=2 and trained on 8 CPU ranks, then reported on.
docs/tutorial.md walks through it; python/tests/test_tutorial.py runs it
in a fresh virtual environment after `pip install ./python`.

    python3 -m venv --system-site-packages /tmp/weft-venv   # Debian's torch
    /tmp/weft-venv/bin/pip install ./python
    /tmp/weft-venv/bin/python docs/tutorial.py --work /tmp/weft-tutorial
"""

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import weft


# 1. A model as people write it: nanoGPT's shape, bias-free linears, a
#    packed QKV projection, a causal mask buffer, tanh GELU.
class Block(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.heads, self.scale = heads, 1.0 / math.sqrt(dim // heads)
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim, bias=False)
        self.c_proj = nn.Linear(dim, dim, bias=False)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim, bias=False)
        self.mlp_proj = nn.Linear(4 * dim, dim, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=256, dim=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.h = nn.ModuleList(Block(dim, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/weft-tutorial", help="where files go")
    parser.add_argument("--text", default=str(here.parent / "data" / "tinyshakespeare.txt"))
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    # 2. Export it to ONNX, batch 8 of 32 tokens (bytes: a vocabulary of 256).
    torch.manual_seed(0)
    model = GPT().eval()
    batch, seq = 8, 32
    example = torch.randint(0, 256, (batch, seq))
    torch.onnx.export(model, (example,), str(work / "gpt.onnx"), opset_version=14,
                      input_names=["idx"], output_names=["logits"])

    # 3. The machine: 8 CPU ranks. `weft-calibrate` measures it as the
    #    cluster "cpu-local"; here it is described with fixed numbers.
    cluster = work / "cpu8.json"
    cluster.write_text(json.dumps({
        "name": "cpu8", "nodes": 1, "gpus_per_node": 8,
        "gpu": {"model": "CPU core", "peak_bf16_tflops": 0.02, "peak_fp32_tflops": 0.02,
                "memory_gb": 4, "memory_bandwidth_gbps": 6, "op_overhead_us": 5},
        "intra_node": {"bandwidth_gbps": 2, "latency_us": 50},
        "inter_node": {"fabric": "infiniband", "nics_per_node": 1,
                       "nic_bandwidth_gbps": 2, "latency_us": 50},
        "overlap_gradient_reduction": False,
        "efficiency": {"contraction": 1, "memory": 1, "usable_memory": 0.8}}))

    # 4. Plan: every way to train it on those ranks, fastest first; then
    #    the best plan with 3D parallelism pinned (pp=2 x dp=2 x tp=2).
    plans = weft.plan(work / "gpt.onnx", cluster=str(cluster), global_batch=batch)
    for p in plans[:3]:
        print(f"{p.spec}: {p.step_time * 1e3:.1f} ms per step, "
              f"{p.tokens_per_second:.0f} tokens/s")
    plan = weft.plan(work / "gpt.onnx", cluster=str(cluster), global_batch=batch,
                     fix={"pp": 2, "dp": 2, "tp": 2})[0]
    print(plan.explain())

    # 5. Compile the training step for that plan: loss, gradients, AdamW,
    #    partitioned with explicit collectives, one program per pp rank.
    program = weft.compile(work / "gpt.onnx", train=True, plan=plan)
    print(f"compiled for {program.ranks} ranks, mesh {program.mesh}: {program.executable}")

    # 6. Train on tiny Shakespeare (one token per byte) over MPI, traced.
    tokens = np.frombuffer(Path(args.text).read_bytes(), dtype=np.uint8).astype(np.uint16)
    trace = work / "trace.json"
    run = program.launch(data=tokens, steps=args.steps, lr=3e-3, warmup=5, trace=trace)
    losses = [m["loss"] for m in run.metrics]
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses)} steps")
    assert losses[-1] < losses[0] - 0.5, "training did not learn"

    # 7. The report: mesh, sharding, collectives per layer, memory per rank,
    #    the pipeline timeline, the planner's ranking and the trace.
    report = program.report(trace=trace)
    report.save_html(work / "report.html")
    for track in report.trace.tracks:
        print(f"{track.name}: {track.compute_seconds:.2f} s compute, "
              f"{track.communication_seconds:.2f} s communication")
    print(f"report: {work / 'report.html'}")

    # 8. The same model for inference, one rank, run in this process, and
    #    checked against PyTorch.
    forward = weft.compile(model, example_inputs=(example,), input_names=["idx"],
                           output_names=["logits"])
    logits = forward.run({"idx": example.numpy()})["logits"]
    with torch.no_grad():
        expected = model(example).numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)
    print("one-rank logits match PyTorch")


if __name__ == "__main__":
    main()
