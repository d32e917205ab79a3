#!/usr/bin/env python3
"""Starts a world the way torchrun does: N processes of `weft-run PROGRAM
ARGS...`, each with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (a
free local port). With --kill-rank R, kills rank R's model process once it
runs. Prints each weft-run's error output and exit status, and, after a
kill, how long the world took to exit. Exits 1 if a weft-run failed without
a kill, or if the world outlived the kill by --limit seconds."""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def model_pid(launcher_pid, program, deadline):
    """The pid of the model process weft-run (launcher_pid) started."""
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{launcher_pid}/task/{launcher_pid}/children") as f:
                children = f.read().split()
            for child in children:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                # The model itself: not weft-run's --print-manifest query, nor
                # a child caught between fork and exec (still weft-run).
                if (os.path.basename(argv[0]) == os.fsencode(os.path.basename(program))
                        and b"--print-manifest" not in argv):
                    return int(child)
        except OSError:
            pass
        time.sleep(0.05)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weft-run", required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--kill-rank", type=int)
    parser.add_argument("--after", type=float, default=1.0)
    parser.add_argument("--limit", type=float, default=30.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    port = free_port()
    launchers = []
    for rank in range(args.world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        launchers.append(subprocess.Popen([args.weft_run] + args.command, env=env,
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
    killed_at = None
    if args.kill_rank is not None:
        pid = model_pid(launchers[args.kill_rank].pid, args.command[0],
                        time.monotonic() + 60)
        if pid is None:
            print("FAIL: the rank to kill never started")
            return 1
        time.sleep(args.after)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
    failed = False
    for rank, launcher in enumerate(launchers):
        try:
            _, errors = launcher.communicate(timeout=args.limit + 60)
        except subprocess.TimeoutExpired:
            launcher.kill()
            print(f"FAIL: rank {rank}'s weft-run did not exit")
            return 1
        for line in errors.splitlines():
            print(f"[{rank}] {line}")
        print(f"[{rank}] exit status {launcher.returncode}")
        failed |= launcher.returncode != 0
    if killed_at is not None:
        elapsed = time.monotonic() - killed_at
        print(f"the world exited {elapsed:.1f} s after the kill")
        return 0 if failed and elapsed < args.limit else 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
