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
# No bytecode caches next to the scripts: runs write nothing into the repo.
python_env = "PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=%s" % config.weft_python_path
if config.weft_sanitizer_runtime:
    config.available_features.add("asan")
    # CPython's own allocations are not for LeakSanitizer to judge.
    python_env += " LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0" % (
        config.weft_sanitizer_runtime)
    # The fuzz targets load libstdc++ before the runtime (libFuzzer's
    # link line), which is harmless but makes ASan refuse to start.
    config.environment["ASAN_OPTIONS"] = "verify_asan_link_order=0"
    # MPI_Init loads hwloc's discovery plugins (PCI, OpenCL, GL), which
    # leak and are unloaded before LeakSanitizer can name them; no rank
    # needs them.
    config.environment["HWLOC_PLUGINS_PATH"] = "/nonexistent"
config.substitutions.append(
    ("%python", "env %s %s" % (python_env, config.python_executable)))
config.substitutions.append(("%weft_src", config.weft_src_root))
# A C++ program linked with the runtime links as weftc links executables.
config.substitutions.append(("%cxx", config.weft_link_command.strip()))
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

# Hugging Face transformers (with Debian's torch) in the virtual environment
# `make hf-venv` makes beside the build: the real model families of
# test/Models/hf-exports.test.
hf_python = os.path.join(config.weft_obj_root, "hf-venv", "bin", "python")
config.substitutions.append(("%hf_python", hf_python))
if os.access(hf_python, os.X_OK) and subprocess.run(
        [hf_python, "-c", "import transformers"], capture_output=True).returncode == 0:
    config.available_features.add("transformers")
else:
    lit_config.note("no transformers in %s (make hf-venv): the Hugging Face "
                    "exports (REQUIRES: transformers) are UNSUPPORTED" % hf_python)

# A tmpfs in a private mount namespace (root, or unprivileged user
# namespaces), for the full-disk drill.
import shutil
import tempfile
with tempfile.TemporaryDirectory() as probe:
    unshare = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        unshare.insert(2, "--map-root-user")
    if subprocess.run(unshare + ["mount", "-t", "tmpfs", "-o", "size=64k",
                                 "weft-probe", probe],
                      capture_output=True).returncode == 0:
        config.available_features.add("tmpfs-mount")
    else:
        lit_config.note("no tmpfs can be mounted in a private mount namespace: "
                        "the full-disk drill (REQUIRES: tmpfs-mount) is UNSUPPORTED")

# Network namespaces (root) and MPICH's Hydra, for utils/multihost.sh.
netns_probe = f"weft-probe-{os.getpid()}"
if os.geteuid() == 0 and shutil.which("tc") and shutil.which("mpiexec") and \
        subprocess.run(["ip", "netns", "add", netns_probe],
                       capture_output=True).returncode == 0:
    subprocess.run(["ip", "netns", "del", netns_probe], capture_output=True)
    hydra = subprocess.run(["mpiexec", "--version"], capture_output=True, text=True)
    if "HYDRA" in hydra.stdout:
        config.available_features.add("netns")
if "netns" not in config.available_features:
    lit_config.note("no network namespaces (root, ip, tc) or no MPICH Hydra: "
                    "the multi-host run (REQUIRES: netns) is UNSUPPORTED")

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
     "weft-plan", "weft-calibrate", "weft-fuzz-onnx-import",
     "weft-fuzz-mlir-parse", "weft-fuzz-checkpoint", "weft-fuzz-model-open",
     "weft-fuzz-cluster", "weft-fuzz-data-files"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# The reliability drills time their runs and the multi-host run packs eight
# ranks onto the two cores: one of them at a time, so that neither's
# deadlines are measured against the other's load.
lit_config.parallelism_groups["reliability"] = 1
