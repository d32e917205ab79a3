#!/usr/bin/env python3
"""Starts `weft-run PROGRAM ARGS...`, kills one rank with SIGKILL (or stops
it with --signal STOP) once the ranks are running, and reports how weft-run
ended: its error output, its exit status and how long it took to exit after
the signal (it must be within --limit seconds). Exits 1 if weft-run
succeeded or took too long."""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weft-run", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--after", type=float, default=1.0,
                        help="seconds to let the ranks run before the kill")
    parser.add_argument("--limit", type=float, default=30.0)
    parser.add_argument("--signal", default="KILL",
                        help="the signal's name without SIG: KILL, STOP, SEGV...")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as run_dir:
        env = dict(os.environ, WEFT_RUN_DIR=run_dir)
        launcher = subprocess.Popen([args.weft_run] + args.command, env=env,
                                    stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
        pid_file = os.path.join(run_dir, f"rank{args.rank}.pid")
        deadline = time.monotonic() + 60
        while not os.path.exists(pid_file) and launcher.poll() is None:
            if time.monotonic() > deadline:
                launcher.kill()
                print("FAIL: the ranks did not start")
                return 1
            time.sleep(0.05)
        time.sleep(args.after)
        with open(pid_file) as f:
            pid = int(f.read())
        os.kill(pid, getattr(signal, "SIG" + args.signal))
        killed = time.monotonic()
        try:
            _, errors = launcher.communicate(timeout=args.limit)
        except subprocess.TimeoutExpired:
            launcher.kill()
            os.kill(pid, signal.SIGKILL)
            print(f"FAIL: weft-run still running {args.limit:g} s after SIG{args.signal}")
            return 1
        elapsed = time.monotonic() - killed
    sys.stdout.write(errors)
    print(f"weft-run exited with status {launcher.returncode} "
          f"{elapsed:.1f} s after SIG{args.signal}")
    return 0 if launcher.returncode != 0 and elapsed < args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
