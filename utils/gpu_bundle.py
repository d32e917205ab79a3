"""What the GPU checks (utils/gpu_check.py) and the GPU bench
(bench/gpu_train.py) share: packing executables for a machine that has a GPU
but no Weft, and running them there."""

import pathlib
import shutil
import subprocess
import sys

# The executables' exit status when there is no GPU (kExitNoCudaDevice).
NO_CUDA_DEVICE = 69


def copy_host_libraries(executable, lib_dir):
    """Copies the libraries `executable` links from this machine that the
    GPU machine may lack (it has no LLVM): OpenBLAS and its Fortran
    runtime, LLVM's libomp."""
    ldd = subprocess.run(["ldd", str(executable)], capture_output=True, text=True).stdout
    for line in ldd.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and any(k in parts[0] for k in
                                   ("openblas", "gfortran", "quadmath", "libomp")):
            shutil.copy(parts[1].split()[0], lib_dir)


def ship(lib_dir):
    """Copies this module beside the scripts of a bundle."""
    shutil.copy(__file__, pathlib.Path(lib_dir).parent / "gpu_bundle.py")


def run_on_gpu(command, cwd, env=None):
    """Runs a CUDA executable: exits with its status (after its one line)
    when there is no GPU, raises RuntimeError with its last line when it
    fails."""
    run = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    if run.returncode == NO_CUDA_DEVICE:
        print(run.stderr.strip())
        sys.exit(NO_CUDA_DEVICE)
    if run.returncode != 0:
        lines = (run.stderr or run.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit status {run.returncode}")
    return run
