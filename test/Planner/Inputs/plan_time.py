"""Runs a command and fails if it takes longer than the given seconds."""
import subprocess
import sys
import time

limit = float(sys.argv[1])
start = time.monotonic()
result = subprocess.run(sys.argv[2:])
elapsed = time.monotonic() - start
print(f"planned in {elapsed:.2f} s (limit {limit:g} s)")
sys.exit(result.returncode or (elapsed > limit))
