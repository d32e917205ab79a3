"""weft.compile and the Program it returns: a compiled model to run in this
process (one rank), to launch on its ranks (weft-run), and to report on."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _weft
from .errors import CompileError, LaunchError, RunError
from .models import dims_list, model_file
from .planner import Plan
from .executables import error_line, run_executable
from .report import Report, report_of
from .tools import runtime_directory, tool

# What each mesh axis is split by unless `parallel` says otherwise.
_AXIS_STRATEGIES = {"dp": "dp", "tp": "megatron", "cp": "cp", "ep": "ep"}


def _key_values(value, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    raise CompileError(f"{what} is a dict or 'key=value,...', not {type(value).__name__}")


def _patterns(value) -> list:
    """Glob patterns given as one string or a sequence of them."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(p) for p in value]


def compile(model, *, dims=None, mesh=None, parallel: Optional[Sequence[str]] = None,
            sequence_parallel: bool = False, pad_uneven: bool = False,
            train: bool = False, program: Optional[str] = None,
            optimizer: str = "adamw", weight_decay: float = 0.1, clip_norm: float = 1.0,
            precision: str = "f32", allow_tf32: bool = False, profile_launches: bool = False,
            recompute: str = "none",
            grad_accum: int = 1,
            zero: int = 0, schedule: str = "1f1b", microbatches: int = 1,
            virtual_stages: int = 1, stage_boundaries: Optional[Sequence[int]] = None,
            bucket_mb: float = 25.0, grad_sync: str = "library", dp_sync_every: int = 1,
            cp_attention: str = "ring",
            token_input: Optional[str] = None,
            freeze: Union[None, str, Sequence[str]] = None,
            train_only: Union[None, str, Sequence[str]] = None,
            plan: Union[None, str, Plan] = None, cluster: Optional[str] = None,
            nodes: int = 1, target: str = "cpu", opt_level: int = 2,
            output: Union[None, str, os.PathLike] = None,
            example_inputs: Optional[Sequence] = None,
            input_names: Optional[Sequence[str]] = None,
            output_names: Optional[Sequence[str]] = None) -> "Program":
    """Compiles `model` (a path, an onnx.ModelProto, or a torch.nn.Module
    with `example_inputs`) as weftc does, through the compiler library.

    dims binds symbolic dimensions ({"batch": 8}); mesh partitions
    ({"dp": 2, "tp": 2} or "dp=2,tp=2"), each axis split by its usual
    strategy (dp: data parallel, tp: Megatron, cp: context, ep: experts;
    pp: pipeline stages) unless
    `parallel` names them; cp_attention is "ring" (each rank a head and a
    tail chunk of the sequence), "ring-contiguous" or "all-to-all". train=True compiles a training step (or
    program="gradients" its loss and gradients); freeze and train_only
    are glob patterns (a string or a list) on parameter names: those that
    do not train, or the only ones that do. allow_tf32 lets a GPU target
    multiply f32 GEMMs as TF32 on tensor cores; profile_launches makes a
    CUDA executable that times each launch of the kernel report under
    $WEFT_PROFILE_LAUNCHES (utils/compare_profile.py). plan is a Plan from
    weft.plan (compiled exactly), "auto", or pinned choices ("dp=2,pp=2")
    for the planner to complete on `cluster`. The files go to `output`
    (a path stem) or to a temporary directory the Program owns.
    A torch module is exported with `input_names` and `output_names`.
    Raises CompileError with the compiler's one-line message."""
    program_kind = program or ("train" if train else "forward")
    workdir = None
    if output is None:
        workdir = tempfile.mkdtemp(prefix="weft-")
        output_path = Path(workdir) / "model"
    else:
        output_path = Path(output)
    try:
        with tempfile.TemporaryDirectory(prefix="weft-model-") as exported:
            path = model_file(model, Path(exported), example_inputs=example_inputs,
                              input_names=input_names, output_names=output_names)
            mesh_text = _key_values(mesh, "mesh")
            search = plan.search if isinstance(plan, Plan) else None
            if isinstance(plan, Plan):
                if cluster is not None and cluster != plan.cluster:
                    raise CompileError(f"the plan is for cluster '{plan.cluster}', "
                                       f"not '{cluster}'")
                plan_text, cluster, nodes = plan.spec, plan.cluster, plan.nodes
            else:
                plan_text = plan or ""
            if parallel is None and mesh_text:
                axes = [item.split("=")[0].strip() for item in mesh_text.split(",")]
                parallel = [_AXIS_STRATEGIES[a] for a in axes if a in _AXIS_STRATEGIES]
            options = {
                "model": path, "dims": dims_list(dims), "program": program_kind,
                "optimizer": optimizer, "token_input": token_input or "",
                "weight_decay": float(weight_decay), "clip_norm": float(clip_norm),
                "freeze": _patterns(freeze), "train_only": _patterns(train_only),
                "precision": precision, "allow_tf32": bool(allow_tf32),
                "profile_launches": bool(profile_launches), "recompute": recompute,
                "grad_accum": int(grad_accum), "zero": int(zero), "mesh": mesh_text,
                "parallel": list(parallel or []), "sequence_parallel": sequence_parallel,
                "pad_uneven": pad_uneven, "bucket_mb": float(bucket_mb),
                "grad_sync": grad_sync, "dp_sync_every": int(dp_sync_every),
                "cp_attention": cp_attention,
                "microbatches": int(microbatches), "schedule": schedule,
                "virtual_stages": int(virtual_stages),
                "stage_boundaries": [int(b) for b in stage_boundaries or []],
                "plan": plan_text, "cluster": cluster or "cpu-local", "nodes": int(nodes),
                "target": target, "opt_level": int(opt_level), "emit": "exe",
                "output": str(output_path),
                "runtime_directory": str(runtime_directory()),
                # Program.run loads a one-rank model into this process.
                "shared_library": not mesh_text and not plan_text
                                  and program_kind != "train",
            }
            try:
                result, messages = _weft.compile(options)
            except _weft.Error as error:
                raise CompileError(str(error)) from None
    except BaseException:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Program(result, messages, workdir, search)


@dataclass
class LaunchResult:
    """What a launch returned: the outputs of a forward or gradients
    program, or the metrics a training run logged (one dict per step)."""
    outputs: Dict[str, np.ndarray] = field(default_factory=dict)
    metrics: List[Dict[str, object]] = field(default_factory=list)
    trace: Optional[str] = None
    stdout: str = ""


class Program:
    """A compiled model: its executable (+ weights files), and for a
    one-rank program a shared library that runs it in this process."""

    def __init__(self, result, messages: List[str], workdir: Optional[str],
                 search=None):
        self._result = result
        self._search = search
        self._report = report_of(result, search=search)
        self.messages = list(messages)
        files = [Path(f) for f in self._report_files()]
        self.executable = files[0]
        self.library = next((f for f in files if f.suffix == ".so"), None)
        self.weights = [f for f in files[1:] if f.suffix == ".weights"]
        self._loaded = None
        self._workdir = workdir
        if workdir:
            self._cleanup = weakref.finalize(self, shutil.rmtree, workdir, True)

    def _report_files(self) -> List[str]:
        return self._result.to_dict()["files"]

    @property
    def kind(self) -> str:
        """forward, train or gradients."""
        return self._report.options["program"]

    @property
    def mesh(self) -> Dict[str, int]:
        return dict(self._report.programs[0].mesh)

    @property
    def ranks(self) -> int:
        return self._report.ranks

    @property
    def plan(self) -> Optional[str]:
        """The plan compiled, when the planner chose or completed it."""
        chosen = self._report.plan
        return chosen["plan"] if chosen else None

    def inputs(self) -> Dict[str, tuple]:
        """Each input's name and whole shape."""
        return {b.name: b.shape for b in self._report.programs[0].buffers_of("input")}

    def outputs(self) -> Dict[str, tuple]:
        return {b.name: b.shape for b in self._report.programs[-1].buffers_of("output")}

    def run(self, inputs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Runs a one-rank forward or gradients program here, on NumPy
        arrays of exactly the inputs' dtypes and shapes; returns every
        output. The same code as the executable, loaded in-process."""
        if self.ranks > 1:
            raise RunError(f"this program runs on {self.ranks} ranks (mesh "
                           f"{_mesh_text(self.mesh)}): use Program.launch")
        if self.kind == "train":
            raise RunError("a training step updates its weights between steps: "
                           "train with Program.launch(data=...)")
        try:
            if self._loaded is None:
                self._loaded = _weft.LoadedModel(str(self.library), str(self.weights[0]))
            return self._loaded.run(dict(inputs))
        except _weft.Error as error:
            raise RunError(str(error)) from None

    def launch(self, inputs: Optional[Mapping[str, np.ndarray]] = None, *,
               data: Union[None, str, os.PathLike, np.ndarray] = None,
               steps: Optional[int] = None, lr: Optional[float] = None,
               warmup: Optional[int] = None, init_seed: Optional[int] = None,
               trace: Union[None, str, os.PathLike] = None,
               args: Sequence[str] = (), ranks: Optional[int] = None,
               timeout: Optional[float] = None) -> LaunchResult:
        """Runs the executable on its ranks with weft-run (MPI). A forward
        or gradients program takes `inputs` and returns its outputs; a
        training step trains on `data` (a token file, or an array of token
        ids) for `steps` and returns the metrics it logged. `trace` writes
        a Chrome trace of every rank (weft-run --trace). Raises LaunchError
        with the line that says which rank failed and why."""
        command = [sys.executable, str(tool("weft-run"))]
        if ranks is not None:
            command += ["-np", str(ranks)]
        if timeout is not None:
            command += ["--timeout", str(timeout)]
        command.append(str(self.executable))
        if trace is not None:
            command += ["--trace", str(trace)]
        traced = str(trace) if trace is not None else None
        if self.kind != "train":
            names = list(self.outputs())
            arrays = run_executable(command + list(args), inputs or {}, names,
                                    error_class=LaunchError)
            return LaunchResult(outputs=dict(zip(names, arrays)), trace=traced)
        if inputs is not None:
            raise LaunchError("a training step reads batches from data=..., not inputs")
        if data is None:
            raise LaunchError("a training step needs data=... (token ids)")
        with tempfile.TemporaryDirectory(prefix="weft-launch-") as scratch:
            scratch = Path(scratch)
            if isinstance(data, np.ndarray):
                (scratch / "tokens").write_bytes(data.astype("<u2").tobytes())
                data = scratch / "tokens"
            command += ["--data", str(data), "--log", str(scratch / "metrics.jsonl")]
            for flag, value in (("--steps", steps), ("--lr", lr),
                                ("--warmup", warmup), ("--init-seed", init_seed)):
                if value is not None:
                    command += [flag, str(value)]
            command += list(args)
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise LaunchError(error_line(done.stderr, done.returncode))
            log = scratch / "metrics.jsonl"
            metrics = [json.loads(line) for line in log.read_text().splitlines()
                       if line.strip()] if log.exists() else []
            return LaunchResult(metrics=metrics, stdout=done.stdout, trace=traced)

    def report(self, trace: Union[None, str, os.PathLike] = None) -> Report:
        """Memory, sharding, collectives, the pipeline schedule and the
        planner's choices, as data; with the Chrome trace of a run, each
        rank's compute and communication too. .to_html() renders it."""
        if trace is None:
            return self._report
        return report_of(self._result, trace, self._search)


def _mesh_text(mesh: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in mesh.items())
