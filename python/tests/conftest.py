"""Fixtures of the package's tests: the bundled GPT-2-style model
(utils/gen_gpt2.py) and the build's tools. Run with the package importable
(PYTHONPATH=<build>/python, as `make check-python` does)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


def generate_gpt(path: Path, **shape) -> Path:
    args = [sys.executable, str(REPOSITORY / "utils" / "gen_gpt2.py"), "-o", str(path)]
    for key, value in shape.items():
        args += [f"--{key}", str(value)]
    subprocess.run(args, check=True, capture_output=True)
    return path


@pytest.fixture(scope="session")
def gpt(tmp_path_factory) -> Path:
    """The bundled model: 2 layers, hidden 64, 4 heads, bytes, seq 16."""
    return generate_gpt(tmp_path_factory.mktemp("gpt") / "gpt.onnx", seq=16)


@pytest.fixture(scope="session")
def gpt_batch8(tmp_path_factory) -> Path:
    """The same with batch 8, for training on a mesh."""
    return generate_gpt(tmp_path_factory.mktemp("gpt8") / "gpt.onnx", seq=16, batch=8)


@pytest.fixture(scope="session")
def tokens() -> Path:
    return REPOSITORY / "data" / "tinyshakespeare.tokens"


CPU_RANK = {"model": "CPU core", "peak_bf16_tflops": 0.02, "peak_fp32_tflops": 0.02,
            "memory_gb": 4, "memory_bandwidth_gbps": 6, "op_overhead_us": 5}


def cpu_cluster(path: Path, ranks: int) -> Path:
    """A cluster file describing `ranks` CPU ranks of one machine (what
    weft-calibrate measures for cpu-local, with fixed numbers)."""
    import json
    path.write_text(json.dumps({
        "name": f"cpu{ranks}", "nodes": 1, "gpus_per_node": ranks, "gpu": CPU_RANK,
        "intra_node": {"bandwidth_gbps": 2, "latency_us": 50},
        "inter_node": {"fabric": "infiniband", "nics_per_node": 1,
                       "nic_bandwidth_gbps": 2, "latency_us": 50},
        "overlap_gradient_reduction": False,
        "efficiency": {"contraction": 1, "memory": 1, "usable_memory": 0.8}}))
    return path


@pytest.fixture(scope="session")
def cluster4(tmp_path_factory) -> str:
    return str(cpu_cluster(tmp_path_factory.mktemp("cluster") / "cpu4.json", 4))


@pytest.fixture(scope="session")
def cluster8(tmp_path_factory) -> str:
    return str(cpu_cluster(tmp_path_factory.mktemp("cluster") / "cpu8.json", 8))
