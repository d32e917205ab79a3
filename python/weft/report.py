"""What a compiled program holds, per rank, as data (Program.report()),
and the same as one self-contained HTML page (Report.to_html())."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from . import _weft
from .errors import WeftError


@dataclass(frozen=True)
class Buffer:
    """One buffer of a program's entry: an input, a parameter, optimizer
    state or an output, whole and as one rank holds it."""
    role: str  # input, param, state, output
    name: str
    shape: Tuple[int, ...]
    local_shape: Tuple[int, ...]
    sharding: str  # the mesh axis splitting each dim, "-" where whole
    local_bytes: int
    trains: bool = False  # a parameter the training step updates


@dataclass(frozen=True)
class Collective:
    kind: str  # all_reduce, all_gather, reduce_scatter, all_to_all, send, recv
    axes: str  # the mesh axes it runs over
    input_type: str
    result_type: str
    bytes_in: int
    bytes_moved_per_rank: int  # per run, ring algorithms
    location: str  # the ONNX node it comes from, when known
    runs: int  # per step


@dataclass(frozen=True)
class ProgramReport:
    """One program: the only one, or a pp rank's."""
    pipeline_rank: int  # -1: not a pipeline
    mesh: Dict[str, int]
    parameter_bytes: int
    whole_model_parameter_bytes: int
    optimizer_state_bytes: int
    input_bytes: int
    output_bytes: int
    temporary_peak_bytes: Optional[int]
    microbatches_in_flight: int
    buffers: Tuple[Buffer, ...]
    collectives: Tuple[Collective, ...]

    @property
    def parameters(self) -> Tuple[Buffer, ...]:
        return tuple(b for b in self.buffers if b.role == "param")

    @property
    def trained_parameters(self) -> Tuple[Buffer, ...]:
        """The parameters the training step updates (none in a forward
        program; frozen ones excluded)."""
        return tuple(b for b in self.parameters if b.trains)

    def buffers_of(self, role: str) -> Tuple[Buffer, ...]:
        return tuple(b for b in self.buffers if b.role == role)


@dataclass(frozen=True)
class PipelineReport:
    schedule: str
    stages: int
    microbatches: int
    virtual_stages: int
    timeline: Tuple[str, ...]  # per pp rank: F, B or '.' per time unit
    idle_fraction: Tuple[float, ...]


@dataclass(frozen=True)
class TraceTrack:
    name: str
    steps: int
    step_seconds: float
    communication_seconds: float

    @property
    def compute_seconds(self) -> float:
        return self.step_seconds - min(self.step_seconds, self.communication_seconds)


@dataclass(frozen=True)
class TraceSummary:
    path: str
    tracks: Tuple[TraceTrack, ...]


def summarize_trace(path) -> TraceSummary:
    """Compute and communication per rank of a `weft-run --trace` file."""
    try:
        data = _weft.trace_summary(str(path))
    except _weft.Error as error:
        raise WeftError(str(error)) from None
    return TraceSummary(data["path"], tuple(TraceTrack(**t) for t in data["tracks"]))


@dataclass
class Report:
    options: Dict[str, object]
    programs: List[ProgramReport]
    pipeline: Optional[PipelineReport]
    plan: Optional[Dict[str, object]]  # the plan chosen, with a plan
    top_plans: List[Dict[str, object]]
    plan_explanation: List[str]
    stage_times: List[Tuple[str, float]]
    trace: Optional[TraceSummary] = None
    _result: object = field(default=None, repr=False, compare=False)

    @property
    def ranks(self) -> int:
        count = 1
        for size in self.programs[0].mesh.values():
            count *= size
        return count

    def to_html(self) -> str:
        """The report as one HTML document: inline SVG, nothing fetched."""
        try:
            return self._result.html(self.trace.path if self.trace else None,
                                     self.top_plans, self.plan_explanation)
        except _weft.Error as error:
            raise WeftError(str(error)) from None

    def save_html(self, path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            out.write(self.to_html())


def _program(data) -> ProgramReport:
    return ProgramReport(
        pipeline_rank=data["pipeline_rank"],
        mesh=dict(zip(data["mesh_names"], data["mesh_sizes"])),
        parameter_bytes=data["parameter_bytes"],
        whole_model_parameter_bytes=data["whole_model_parameter_bytes"],
        optimizer_state_bytes=data["optimizer_state_bytes"],
        input_bytes=data["input_bytes"],
        output_bytes=data["output_bytes"],
        temporary_peak_bytes=data["temporary_peak_bytes"],
        microbatches_in_flight=data["microbatches_in_flight"],
        buffers=tuple(Buffer(b["role"], b["name"], tuple(b["shape"]),
                             tuple(b["local_shape"]), b["sharding"], b["local_bytes"],
                             b["trains"])
                      for b in data["buffers"]),
        collectives=tuple(Collective(**c) for c in data["collectives"]))


# Plans of a weft.plan search the report lists, besides the one compiled.
_REPORTED_PLANS = 5


def report_of(result, trace=None, search=None) -> Report:
    """The report of a compile; `search`, the weft.plan search its plan
    came from, stands for the compiler's own (which priced only that
    plan)."""
    data = result.to_dict()
    if search is not None and data["plan"] is not None:
        plans = list(search.plans[:_REPORTED_PLANS])
        plans += [p for p in search.plans[_REPORTED_PLANS:] if p.spec == data["plan"]["plan"]]
        data["top_plans"] = [p.report_row() for p in plans]
        data["plan_explanation"] = list(search.ranking)
    pipeline = data["pipeline"]
    return Report(
        options=data["options"],
        programs=[_program(p) for p in data["programs"]],
        pipeline=PipelineReport(pipeline["schedule"], pipeline["stages"],
                                pipeline["microbatches"], pipeline["virtual_stages"],
                                tuple(pipeline["timeline"]),
                                tuple(pipeline["idle_fraction"])) if pipeline else None,
        plan=data["plan"],
        top_plans=data["top_plans"],
        plan_explanation=data["plan_explanation"],
        stage_times=data["stage_times"],
        trace=summarize_trace(trace) if trace is not None else None,
        _result=result)
