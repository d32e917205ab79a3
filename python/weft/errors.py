"""The package's exceptions: each carries the one-line message the tools
print after `error:` (naming the op, ONNX node, tensor, option or rank)."""


class WeftError(RuntimeError):
    """Anything Weft refuses or that fails."""


class CompileError(WeftError):
    """weft.compile failed: a bad model, mesh, option or sharding."""


class PlanError(WeftError):
    """weft.plan failed, or no plan fits."""


class RunError(WeftError):
    """A compiled program refused its inputs or failed while running."""


class LaunchError(RunError):
    """A multi-rank launch (weft-run) failed: a rank died, stalled or
    refused its arguments."""
