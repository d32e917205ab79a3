"""Weft: ONNX transformers to distributed training programs.

    import weft
    plans = weft.plan("gpt.onnx", cluster="cpu-local", global_batch=8)
    program = weft.compile("gpt.onnx", train=True, plan=plans[0])
    program.launch(data="tokens", steps=100, lr=3e-3)
    program.report().save_html("report.html")

The compiler runs in this process (weft._weft, over the C++ library that
weftc is a command line of); a one-rank program runs here too
(Program.run), a partitioned one on its ranks over MPI (Program.launch).
"""

from .compiler import LaunchResult, Program, compile
from .executables import run_executable
from .errors import CompileError, LaunchError, PlanError, RunError, WeftError
from .planner import Memory, Plan, Search, plan
from .report import Report, summarize_trace
from .tools import runtime_directory, tool

__all__ = ["compile", "plan", "Program", "Plan", "Search", "Memory", "Report", "LaunchResult",
           "summarize_trace", "run_executable", "tool", "runtime_directory", "WeftError", "CompileError",
           "PlanError", "RunError", "LaunchError"]
