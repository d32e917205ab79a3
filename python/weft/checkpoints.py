"""Sharded training checkpoints (a step-NNNNNNN directory: index.json and
rank-NNNNN.safetensors files, as `--ckpt-dir` writes them) read back as
whole tensors. Needs the safetensors package."""

import json
import os
from typing import Dict, Tuple

import numpy as np

from . import _weft
from .errors import WeftError


def insert_shard(whole: np.ndarray, local: np.ndarray, sharding: str, mesh: str,
                 shard: int) -> None:
    """Writes shard `shard` of a tensor split as `sharding` over `mesh`
    ("dp=2,tp=2") into `whole`, as the runtime lays shards out."""
    try:
        _weft.insert_shard(whole, local, sharding, mesh, int(shard))
    except _weft.Error as error:
        raise WeftError(str(error)) from None


def merge_checkpoint(path) -> Tuple[dict, Dict[str, np.ndarray]]:
    """The checkpoint's index and every tensor, whole."""
    from safetensors.numpy import load_file
    with open(os.path.join(path, "index.json")) as f:
        index = json.load(f)
    files: Dict[str, Dict[str, np.ndarray]] = {}
    merged: Dict[str, np.ndarray] = {}
    for name, entry in index["tensors"].items():
        whole = None
        for shard in entry["shards"]:
            if shard["file"] not in files:
                files[shard["file"]] = load_file(os.path.join(path, shard["file"]))
            local = files[shard["file"]][name]
            if whole is None:
                whole = np.zeros(entry["shape"], dtype=local.dtype)
            try:
                insert_shard(whole, local, entry["sharding"], index["mesh"], shard["shard"])
            except WeftError as error:
                raise WeftError(f"{path}: tensor '{name}': {error}") from None
        merged[name] = whole
    return index, merged
