#!/usr/bin/env python3
"""weft-run: launch the ranks of a partitioned Weft executable.

    weft-run [-np N] [--timeout SECONDS] ./model [model arguments...]

The number of ranks defaults to the model's mesh size (`./model
--print-mesh`); another -np is an error before anything runs. How the ranks
start depends on where weft-run runs:

- on a machine or in a batch job: `mpiexec -n N` (MPICH's Hydra; with Open
  MPI, `mpirun --oversubscribe`);
- as one task of `srun` (SLURM_PROCID is set) or of a launcher that sets
  torchrun-style variables with an MPI process manager behind them (RANK,
  WORLD_SIZE): this process is one rank, and weft-run checks the world size
  and runs the model in place;
- inside a SLURM allocation but not in a task (SLURM_JOB_ID without
  SLURM_PROCID): `srun -n N --mpi=pmi2`.

If a rank dies, the MPI launcher stops the others; weft-run then exits with
status 1 and one line naming the rank (found from the pid files the ranks
write into WEFT_RUN_DIR). --timeout bounds the whole run, so a wedged rank
never hangs the caller.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


def fail(message):
    print(f"weft-run: error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def mesh_of(program):
    """The mesh text and rank count the executable was partitioned for."""
    try:
        result = subprocess.run([program, "--print-mesh"], capture_output=True,
                                text=True, timeout=60)
    except OSError as error:
        fail(f"cannot run '{program}': {error.strerror}")
    except subprocess.TimeoutExpired:
        fail(f"'{program} --print-mesh' did not answer")
    fields = result.stdout.split()
    if result.returncode != 0 or len(fields) != 2 or not fields[1].isdigit():
        fail(f"'{program}' is not a Weft executable (--print-mesh failed)")
    return fields[0], int(fields[1])


def launcher_command(ranks):
    """The command prefix that starts `ranks` processes."""
    if os.environ.get("SLURM_JOB_ID") and shutil.which("srun"):
        return ["srun", "-n", str(ranks), "--mpi=pmi2"]
    mpiexec = shutil.which("mpiexec")
    if not mpiexec:
        fail("no 'mpiexec' on PATH (install mpich)")
    version = subprocess.run([mpiexec, "--version"], capture_output=True,
                             text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        return [mpiexec, "--oversubscribe", "-n", str(ranks)]
    return [mpiexec, "-n", str(ranks)]


def main():
    if len(sys.argv) > 3 and sys.argv[1] == "--rank-wrapper":
        return rank_wrapper(sys.argv[2], sys.argv[3:])
    parser = argparse.ArgumentParser(
        prog="weft-run", usage="weft-run [-np N] [--timeout S] PROGRAM [ARGS...]")
    parser.add_argument("-np", "-n", type=int, dest="ranks",
                        help="number of ranks (default: the model's mesh size)")
    parser.add_argument("--timeout", type=float, default=0,
                        help="stop every rank after this many seconds")
    parser.add_argument("program")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()

    program = options.program
    if os.sep not in program and not os.path.exists(program):
        program = shutil.which(program) or program
    if not os.path.exists(program):
        fail(f"no such executable '{options.program}'")
    mesh, ranks = mesh_of(program)
    if options.ranks is not None and options.ranks != ranks:
        what = f"mesh {mesh}" if mesh != "-" else "one rank"
        fail(f"-np {options.ranks}, but '{options.program}' was partitioned "
             f"for {what} ({ranks} ranks)")

    # Already one rank of a launched world: run in place.
    task_world = os.environ.get("SLURM_NTASKS") if os.environ.get(
        "SLURM_PROCID") else os.environ.get("WORLD_SIZE")
    if task_world is not None and os.environ.get("PMI_RANK") is None and (
            os.environ.get("SLURM_PROCID") or os.environ.get("RANK")):
        if int(task_world) != ranks:
            fail(f"the launcher started {task_world} ranks, but "
                 f"'{options.program}' was partitioned for mesh {mesh} "
                 f"({ranks} ranks)")
        os.execv(program, [program] + options.args)

    # The ranks leave their pids (and exit statuses) in WEFT_RUN_DIR: a
    # fresh directory unless the caller chose one.
    given = os.environ.get("WEFT_RUN_DIR")
    run_dir = given or tempfile.mkdtemp(prefix="weft-run-")
    env = dict(os.environ, WEFT_RUN_DIR=run_dir)
    command = launcher_command(ranks) + [
        sys.executable, os.path.abspath(__file__), "--rank-wrapper", run_dir,
        program] + options.args
    try:
        return supervise(command, env, run_dir, options.timeout)
    finally:
        if not given:
            shutil.rmtree(run_dir, ignore_errors=True)


# Hydra's report of a failed rank; weft-run says it in one line instead.
BANNER = re.compile(r"^(=+$|=   |YOUR APPLICATION TERMINATED|This typically "
                    r"refers|Please see the FAQ)")


def supervise(command, env, run_dir, timeout):
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    report = {}

    def forward(stream, sink):
        blank_lines = 0  # held back: Hydra's report starts with one
        for line in stream:
            pid = re.search(r"PID (\d+) RUNNING AT", line)
            if pid:
                report.setdefault("pid", int(pid.group(1)))
            signal_text = re.search(r"\(signal (\d+)\)", line)
            if signal_text and "TERMINATED" in line:
                report.setdefault("signal", int(signal_text.group(1)))
            if BANNER.match(line):
                blank_lines = 0
                continue
            if not line.strip():
                blank_lines += 1
                continue
            sink.write("\n" * blank_lines + line)
            blank_lines = 0
            sink.flush()

    readers = [threading.Thread(target=forward, args=(process.stdout, sys.stdout),
                                daemon=True),
               threading.Thread(target=forward, args=(process.stderr, sys.stderr),
                                daemon=True)]
    for reader in readers:
        reader.start()
    started = time.monotonic()
    while process.poll() is None:
        if timeout and time.monotonic() - started > timeout:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            fail(f"the ranks did not finish within {timeout:g} s; all were "
                 "stopped")
        time.sleep(0.05)
    for reader in readers:
        reader.join(timeout=5)
    if process.returncode == 0:
        return 0
    pids = rank_pids(run_dir)
    # A rank that failed with an error has said so, and recorded it.
    for rank in sorted(pids):
        status = read_exit(run_dir, rank)
        if status:
            fail(f"rank {rank} exited with status {status}; the other ranks "
                 "were stopped")
    # The wrapper of a rank that died by a signal recorded it; the ranks
    # the launcher stopped afterwards took their wrappers with them.
    by_pid = {pid: rank for rank, pid in pids.items()}
    for name in sorted(os.listdir(run_dir)):
        match = re.fullmatch(r"died\.(\d+)", name)
        if match and int(match.group(1)) in by_pid:
            with open(os.path.join(run_dir, name)) as f:
                number = int(f.read().strip() or 0)
            pid = int(match.group(1))
            fail(f"rank {by_pid[pid]} (pid {pid}) died ({signal_name(number)});"
                 " the other ranks were stopped")
    # Hydra's report names a pid, though not always the first to die.
    rank = by_pid.get(report.get("pid"))
    who = f"rank {rank} (pid {pids[rank]})" if rank is not None else "a rank"
    cause = f" ({signal_name(report['signal'])})" if "signal" in report else ""
    fail(f"{who} died{cause}; the other ranks were stopped")


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def rank_wrapper(run_dir, argv):
    """Runs one rank as a child and records a death by signal, which only a
    parent can see. The child dies with the wrapper (PR_SET_PDEATHSIG), so
    a launcher that stops the wrappers stops the ranks."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    for forwarded in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(forwarded, lambda number, _: os.kill(pid, number))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with open(os.path.join(run_dir, f"died.{pid}"), "w") as f:
            f.write(f"{number}\n")
        os._exit(128 + number)
    return os.WEXITSTATUS(status)


def exit_file(run_dir, rank):
    return os.path.join(run_dir, f"rank{rank}.exit")


def read_exit(run_dir, rank):
    try:
        with open(exit_file(run_dir, rank)) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None


def rank_pids(run_dir):
    pids = {}
    for name in os.listdir(run_dir):
        match = re.fullmatch(r"rank(\d+)\.pid", name)
        if match:
            try:
                with open(os.path.join(run_dir, name)) as f:
                    pids[int(match.group(1))] = int(f.read().strip())
            except (OSError, ValueError):
                pass  # being written
    return pids


if __name__ == "__main__":
    sys.exit(main())
