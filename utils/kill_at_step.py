#!/usr/bin/env python3
"""Runs a training command and kills it, every rank at once with SIGKILL,
as soon as its JSONL log reports step --step: a machine failure in the
middle of a run. Prints the last step logged before the kill."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def last_step(path):
    try:
        with open(path) as f:
            lines = [line for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return 0
    return json.loads(lines[-1])["step"] if lines else 0


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # The parent pid follows the ")" that ends the name.
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", required=True)
    parser.add_argument("--step", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    while process.poll() is None and last_step(args.log) < args.step:
        time.sleep(0.005)
    if process.poll() is not None:
        print(f"error: the run ended (exit {process.returncode}) before "
              f"step {args.step}", file=sys.stderr)
        return 1
    # The launcher and every rank at once (mpiexec puts its ranks in
    # process groups of their own, so the tree is walked), as a power cut
    # would.
    victims = descendants(process.pid) + [process.pid]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()
    deadline = time.time() + 10
    while any(alive(pid) for pid in victims):
        if time.time() > deadline:
            print("error: ranks survived the kill", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print(f"killed after step {last_step(args.log)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
