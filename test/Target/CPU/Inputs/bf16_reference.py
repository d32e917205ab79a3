"""Writes DIR/x.npy (f32 values chosen to exercise bf16 rounding) and
DIR/expected.npy (their bits after torch's f32 -> bf16 -> f32), or with
--compare checks DIR/y.npy against them bit for bit (NaN: any NaN)."""

import sys

import numpy as np

directory = sys.argv[1]
if "--compare" in sys.argv:
    x = np.load(f"{directory}/x.npy")
    want = np.load(f"{directory}/expected.npy")
    got = np.load(f"{directory}/y.npy").view(np.uint32)
    nan_x = np.isnan(x)
    differ = (got != want) & ~nan_x
    differ |= nan_x & ~np.isnan(got.view(np.float32))
    for i in np.flatnonzero(differ)[:5]:
        print(f"x = {x.view(np.uint32)[i]:#010x}: got {got[i]:#010x}, torch {want[i]:#010x}")
    print(f"{x.size} values: {int(differ.sum())} differ from torch, "
          f"{int((nan_x & np.isnan(got.view(np.float32))).sum())} NaNs kept")
    sys.exit(1 if differ.any() else 0)

import torch

special = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
           0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF,          # NaNs, signalling too
           0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,  # ties to even, near ties
           0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF,          # round to infinity or not
           0x00000001, 0x00008000, 0x00018000, 0x807FFFFF]  # subnormals
rng = np.random.default_rng(0)
bits = rng.integers(0, 2**32, size=4096, dtype=np.uint64).astype(np.uint32)
bits[:len(special)] = special
x = bits.view(np.float32)
np.save(f"{directory}/x.npy", x)
rounded = torch.from_numpy(x.copy()).to(torch.bfloat16).to(torch.float32).numpy()
np.save(f"{directory}/expected.npy", rounded.view(np.uint32))
