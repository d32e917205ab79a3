"""Sharded training checkpoints (a step-NNNNNNN directory: index.json and
rank-NNNNN.safetensors files, as `--ckpt-dir` writes them) read back as
whole tensors, each file checked against the index's CRC-32s. Needs the
safetensors package."""

import json
import os
import zlib
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


def read_index(path) -> dict:
    """The checkpoint's index, checked against its own CRC-32 (taken with
    the checksum's eight digits written as zeros)."""
    index_path = os.path.join(path, "index.json")
    with open(index_path, "rb") as f:
        text = f.read()
    key = b'"index_crc32": "'
    at = text.rfind(key)
    if at < 0:
        raise WeftError(f"{index_path}: no index_crc32: not a weft-checkpoint/2 index")
    digits = at + len(key)
    recorded = text[digits:digits + 8].decode("ascii", "replace")
    actual = f"{zlib.crc32(text[:digits] + b'00000000' + text[digits + 8:]):08x}"
    if actual != recorded:
        raise WeftError(f"{index_path} is corrupt: its CRC-32 is {actual}, it "
                        f"records {recorded}")
    return json.loads(text)


def read_rank_file(path, name, digest) -> bytes:
    """A rank file's bytes, checked against the index's size and CRC-32."""
    with open(os.path.join(path, name), "rb") as f:
        data = f.read()
    if len(data) != digest["bytes"]:
        raise WeftError(f"{path}/{name} has {len(data)} bytes, the index says "
                        f"{digest['bytes']}")
    actual = f"{zlib.crc32(data):08x}"
    if actual != digest["crc32"]:
        raise WeftError(f"{path}/{name} is corrupt: its CRC-32 is {actual}, the "
                        f"index says {digest['crc32']}")
    return data


def merge_checkpoint(path) -> Tuple[dict, Dict[str, np.ndarray]]:
    """The checkpoint's index and every tensor, whole; every file is checked
    against the index's checksums first."""
    from safetensors.numpy import load
    index = read_index(path)
    files: Dict[str, Dict[str, np.ndarray]] = {}
    merged: Dict[str, np.ndarray] = {}
    for name, entry in index["tensors"].items():
        whole = None
        for shard in entry["shards"]:
            if shard["file"] not in files:
                files[shard["file"]] = load(read_rank_file(
                    path, shard["file"], index["files"][shard["file"]]))
            local = files[shard["file"]][name]
            if whole is None:
                whole = np.zeros(entry["shape"], dtype=local.dtype)
            try:
                insert_shard(whole, local, entry["sharding"], index["mesh"], shard["shard"])
            except WeftError as error:
                raise WeftError(f"{path}: tensor '{name}': {error}") from None
        merged[name] = whole
    return index, merged
