"""Running a compiled executable (or weft-run with one) on NumPy arrays:
inputs and outputs pass through .npy files in a temporary directory."""

import subprocess
import tempfile
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

import numpy as np

from .errors import RunError


def error_line(stderr: str, status: int) -> str:
    """The line that says why a run failed: the first rank's own error
    (`error: rank 3: ...`), else the last `error:` line, else the last."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line[line.index("error:") + len("error:"):].strip()
              for line in lines if "error:" in line]
    for error in errors:
        if error.startswith("rank "):
            return error
    if errors:
        return errors[-1]
    return lines[-1] if lines else f"exited with status {status}"


def run_executable(command: Sequence[str], inputs: Mapping[str, np.ndarray],
                   outputs: Sequence[str], *, timeout: Optional[float] = None,
                   error_class=RunError) -> List[np.ndarray]:
    """Runs `command` (an executable weftc built, behind weft-run or another
    launcher if any) with `inputs` and returns the `outputs` named, in
    order. A failed run raises `error_class` (RunError) with its error line."""
    with tempfile.TemporaryDirectory(prefix="weft-run-") as scratch:
        scratch = Path(scratch)
        args = [str(part) for part in command]
        for index, (name, array) in enumerate(inputs.items()):
            path = scratch / f"input{index}.npy"
            np.save(path, np.asarray(array))
            args += ["--input", f"{name}={path}"]
        for index, name in enumerate(outputs):
            args += ["--output", f"{name}={scratch / f'output{index}.npy'}"]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise error_class(f"{args[0]} did not finish in {timeout} s") from None
        if done.returncode != 0:
            raise error_class(error_line(done.stderr, done.returncode))
        return [np.load(scratch / f"output{index}.npy") for index in range(len(outputs))]
