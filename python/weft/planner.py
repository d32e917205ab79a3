"""weft.plan: the planner's ranking of the parallel plans of a training
step on a cluster (what `weft-plan` prints), as data."""

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _weft
from .errors import PlanError, WeftError
from .models import dims_list, model_file

GIB = float(1 << 30)


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU of the rank that holds the most."""
    weights: float
    gradients: float
    optimizer: float
    activations: float
    total: float
    capacity: float


@dataclass
class Search:
    """One call of weft.plan: every plan that fits, fastest first, and
    why the best plan of each other choice lost."""
    plans: List["Plan"]
    ranking: Tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """One priced plan. `spec` pins every choice, so passing the plan to
    weft.compile compiles exactly it."""
    spec: str  # "dp=2,tp=2,pp=2,mbs=1,m=4,schedule=1f1b,v=1,zero=0,recompute=none,sp=0"
    dp: int
    tp: int
    pp: int
    microbatch_size: int
    microbatches: int
    schedule: str
    virtual_stages: int
    zero: int
    recompute: str
    sequence_parallel: bool
    cp: int  # context parallelism (1: none)
    cp_attention: str  # "ring" or "all-to-all", when cp > 1
    ep: int  # expert parallelism (1: none), a divisor of dp
    step_time: float  # seconds
    tokens_per_second: float
    mfu: float
    model_tflops_per_gpu: float
    memory: Memory
    time: Dict[str, float]  # seconds per part of the step
    placement: str
    cluster: str  # as given to weft.plan: a preset or a cluster file
    nodes: int
    rank: int  # 0: the fastest
    search: Optional[Search] = field(default=None, repr=False, compare=False)

    def explain(self) -> str:
        """Why this plan: its step time by part, its memory by category,
        where its ranks lie, and (for the fastest) why the best plan of
        each other choice lost, or (for another) how far behind it is."""
        parts = ", ".join(f"{name.replace('_', ' ')} {seconds:.4g} s"
                          for name, seconds in self.time.items() if seconds > 0)
        m = self.memory
        lines = [
            f"{self.spec} on {self.cluster}: {self.step_time:.4g} s per step "
            f"({parts}), {self.tokens_per_second:.0f} tokens/s, MFU {self.mfu:.1%}",
            f"memory per GPU: weights {m.weights / GIB:.3g} GiB, gradients "
            f"{m.gradients / GIB:.3g} GiB, optimizer {m.optimizer / GIB:.3g} GiB, "
            f"activations {m.activations / GIB:.3g} GiB of {m.capacity / GIB:.3g} GiB",
            f"placement: {self.placement}",
        ]
        best = self.search.plans[0] if self.search else self
        if best is self:
            lines += ["why not the others:"] + [
                f"  {line}" for line in (self.search.ranking if self.search else ())]
        else:
            lines.append(f"{self.step_time / best.step_time:.2f}x the step time "
                         f"of the fastest plan ({best.spec})")
        return "\n".join(lines)

    def report_row(self) -> Dict[str, object]:
        """The plan as Report.top_plans lists it."""
        m = self.memory
        return {"plan": self.spec, "step_seconds": self.step_time,
                "tokens_per_second": self.tokens_per_second, "mfu": self.mfu,
                "memory_bytes": {"weights": m.weights, "gradients": m.gradients,
                                 "optimizer": m.optimizer, "activations": m.activations}}


def _fix_text(fix: Union[None, str, Mapping[str, object]]) -> str:
    if fix is None:
        return ""
    if isinstance(fix, str):
        return fix
    return ",".join(f"{key}={int(value) if isinstance(value, bool) else value}"
                    for key, value in fix.items())


def plan(model, *, cluster: str, nodes: int = 1, global_batch: Optional[int] = None,
         fix: Union[None, str, Mapping[str, object]] = None, dims=None,
         precision: str = "mixed", example_inputs: Optional[Sequence] = None,
         input_names: Optional[Sequence[str]] = None) -> List[Plan]:
    """Every plan of the training step that fits on `cluster` (a preset:
    cpu-local, dgx-a100-80g, dgx-h100, h200; or a JSON/YAML file), fastest
    first. `model` is anything weft.compile takes, or a synthetic model
    ("gpt:layers=96,hidden=12288,heads=96,vocab=51200,seq=2048").
    `fix` pins choices ({"dp": 2, "pp": 2} or "dp=2,pp=2"). Plans of a
    model are ones weft.compile can build (no selective recomputation of
    attention cores, which the CPU backend does not do); a synthetic
    model is priced for any backend. Raises PlanError when none fits."""
    options = {"cluster": cluster, "nodes": nodes, "global_batch": global_batch or 0,
               "fix": _fix_text(fix), "dims": dims_list(dims), "precision": precision}
    with tempfile.TemporaryDirectory(prefix="weft-plan-") as workdir:
        if isinstance(model, str) and model.split(":", 1)[0] in ("gpt", "llama") \
                and ":" in model and not Path(model).exists():
            options.update(synthetic=model, selective_recompute=True)
        else:
            try:
                path = model_file(model, Path(workdir), example_inputs=example_inputs,
                                  input_names=input_names)
            except WeftError as error:
                raise PlanError(str(error)) from None
            options.update(model=path, selective_recompute=False)
        try:
            text, placements, ranking = _weft.plan(options)
        except _weft.Error as error:
            raise PlanError(str(error)) from None
    data = json.loads(text)
    search = Search([], tuple(ranking))
    plans = search.plans
    for index, (p, placement) in enumerate(zip(data["plans"], placements)):
        plans.append(Plan(
            spec=p["plan"], dp=p["dp"], tp=p["tp"], pp=p["pp"],
            microbatch_size=p["mbs"], microbatches=p["microbatches"],
            schedule=p["schedule"], virtual_stages=p["virtual_stages"], zero=p["zero"],
            recompute=p["recompute"], sequence_parallel=p["sequence_parallel"],
            cp=p["cp"], cp_attention=p["cp_attention"], ep=p["ep"],
            step_time=p["step_time"], tokens_per_second=p["tokens_per_second"],
            mfu=p["mfu"], model_tflops_per_gpu=p["model_tflops_per_gpu"],
            memory=Memory(**p["memory_bytes"]), time=dict(p["time_seconds"]),
            placement=placement, cluster=cluster, nodes=nodes,
            rank=index, search=search))
    return plans
