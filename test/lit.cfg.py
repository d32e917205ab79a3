# -*- Python -*-
# lit configuration for Weft's IR, importer and model tests.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "WEFT"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.weft_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
# utils/ scripts find the tools through the weft package the build
# assembles: PYTHONPATH set on each command, because lit overwrites it in
# the shell environment once it runs a builtin (cat) out of process.
config.weft_python_path = os.path.join(config.weft_obj_root, "python")
config.substitutions.append(
    ("%python", "env PYTHONPATH=%s %s" % (config.weft_python_path,
                                          config.python_executable)))
config.substitutions.append(("%weft_src", config.weft_src_root))
config.substitutions.append(("%weft_tools", config.weft_tools_dir))
config.substitutions.append(("%weft_obj", config.weft_obj_root))
# Third-party models shipped beside the repository (../shared/models).
config.substitutions.append(
    ("%models", os.path.join(os.path.dirname(config.weft_src_root), "shared", "models"))
)

if os.path.isdir(os.path.join(os.path.dirname(config.weft_src_root), "shared", "models")):
    config.available_features.add("shared-models")

# PyTorch (Debian's python3-torch, for the system python) is the independent
# reference for gradients.
import subprocess
if subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                  capture_output=True).returncode == 0:
    config.available_features.add("torch")

# A CUDA GPU, through its driver: the GPU tests (REQUIRES: cuda-device) run
# only where there is one, and say why they do not elsewhere.
def cuda_device_missing():
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "the CUDA driver (libcuda.so.1) cannot be loaded"
    if cuda.cuInit(0) != 0:
        return "cuInit fails"
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "the CUDA driver sees no GPU"
    return None

cuda_missing = cuda_device_missing()
if cuda_missing is None:
    config.available_features.add("cuda-device")
else:
    lit_config.note("no CUDA device (%s): the GPU tests (REQUIRES: "
                    "cuda-device) are UNSUPPORTED" % cuda_missing)

llvm_config.with_system_environment(["HOME", "TMPDIR", "CUDA_HOME"])
llvm_config.use_default_substitutions()

tool_dirs = [config.weft_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["weft-opt", "weft-translate", "weft-eval", "weftc", "weft-run",
     "weft-plan", "weft-calibrate"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
