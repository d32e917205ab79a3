#!/usr/bin/env python3
"""weft-run: launch the ranks of a partitioned Weft executable.

    weft-run [-np N] [--timeout SECONDS] ./model [model arguments...]

The number of ranks defaults to the model's mesh size (the "mesh" of
`./model --print-manifest`); another -np is an error before anything runs. How the ranks
start depends on where weft-run runs:

- on a machine or in a batch job: `mpiexec -n N` (MPICH's Hydra, which
  binds the ranks to cores in turn when there are more ranks than cores;
  with Open MPI, `mpirun --oversubscribe`);
- as one task of `srun` (SLURM_PROCID is set): this process is one rank,
  and weft-run checks the world size and runs the model in place;
- as one process of a torchrun-style launch (RANK, WORLD_SIZE,
  MASTER_ADDR, MASTER_PORT): weft-run is the process manager; rank 0's
  serves PMI at MASTER_ADDR:MASTER_PORT for the ranks to join;
- inside a SLURM allocation but not in a task (SLURM_JOB_ID without
  SLURM_PROCID): `srun -n N --mpi=pmi2`.

If a rank dies, exits before the run finishes or stays stopped (SIGSTOP)
until its peers' collective timeout, the others are stopped and weft-run
exits with status 1 and one line naming the rank (under mpiexec, from the
pid and exit files the ranks write into WEFT_RUN_DIR, a per-rank wrapper
that sees its death, and the ranks' process states). --timeout bounds the
whole run, so a wedged rank never hangs the caller.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def fail(message):
    print(f"weft-run: error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def mesh_of(program):
    """The mesh text and rank count the executable was partitioned for, from
    its manifest (the schema of weft/runtime/Contract.h; the executable
    checks the version itself when it starts)."""
    try:
        result = subprocess.run([program, "--print-manifest"],
                                capture_output=True, text=True, timeout=60)
    except OSError as error:
        fail(f"cannot run '{program}': {error.strerror}")
    except subprocess.TimeoutExpired:
        fail(f"'{program} --print-manifest' did not answer")
    try:
        manifest = json.loads(result.stdout) if result.returncode == 0 else {}
    except ValueError:
        manifest = {}
    if manifest.get("format") != "weft-manifest":
        fail(f"'{program}' is not a Weft executable (--print-manifest failed)")
    axes = manifest["mesh"]
    ranks = 1
    for axis in axes:
        ranks *= axis["size"]
    text = ",".join(f"{axis['name']}={axis['size']}" for axis in axes)
    return text or "-", ranks


def check_world(world, ranks, mesh, program):
    if world != ranks:
        fail(f"the launcher started {world} ranks, but '{program}' was "
             f"partitioned for mesh {mesh} ({ranks} ranks)")


class PmiServer:
    """A PMI-1 server (the wire protocol of MPICH's simple PMI client, which
    connects to PMI_PORT) for ranks started by another launcher. It also
    watches the world: each weft-run keeps a watch connection and reports
    its rank's exit. A rank whose PMI or watch connection closes before it
    finishes has died, and every weft-run of the world is told so."""

    def __init__(self, world, port):
        self.world = world
        self.kvs = {}
        self.condition = threading.Condition()
        self.arrived = 0
        self.generation = 0
        self.watchers = []
        self.finished = set()
        self.dead = None
        self.listener = socket.create_server(("", port))
        self.listener.listen(2 * world)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            connection, _ = self.listener.accept()
            threading.Thread(target=self.serve, args=(connection,),
                             daemon=True).start()

    def serve(self, connection):
        # Replies go out through the socket itself, under a lock of the
        # connection's: report_death writes to a watcher from another
        # thread while this one reads, which one buffered text stream
        # shared by both threads cannot be trusted with (a death notice
        # was lost that way under load).
        stream = connection.makefile("r")
        writing = threading.Lock()
        pmi_rank = watch_rank = None
        finalized = False

        def send(line):
            with writing:
                connection.sendall((line + "\n").encode())

        try:
            for line in stream:
                fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
                command = fields.get("cmd")
                if command == "weft_watch":
                    watch_rank = int(fields["rank"])
                    with self.condition:
                        self.watchers.append(send)
                        if self.dead is not None:
                            send(f"cmd=weft_dead rank={self.dead}")
                elif command == "weft_exit":
                    if int(fields["status"]) != 0:
                        self.report_death(watch_rank)
                    with self.condition:
                        self.finished.add(watch_rank)
                        self.condition.notify_all()
                elif command == "initack":
                    pmi_rank = int(fields["pmiid"])
                    for reply in ("cmd=initack", f"cmd=set size={self.world}",
                                  f"cmd=set rank={pmi_rank}", "cmd=set debug=0"):
                        send(reply)
                elif command == "init":
                    send("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
                elif command == "get_maxes":
                    send("cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024")
                elif command == "get_appnum":
                    send("cmd=appnum appnum=0")
                elif command == "get_my_kvsname":
                    send("cmd=my_kvsname kvsname=weft")
                elif command == "get_universe_size":
                    send(f"cmd=universe_size size={self.world}")
                elif command == "put":
                    with self.condition:
                        self.kvs[fields["key"]] = fields.get("value", "")
                    send("cmd=put_result rc=0")
                elif command == "get":
                    with self.condition:
                        value = self.kvs.get(fields.get("key"))
                    send("cmd=get_result rc=-1 msg=key_not_found" if value is None
                         else f"cmd=get_result rc=0 value={value}")
                elif command == "barrier_in":
                    with self.condition:
                        generation = self.generation
                        self.arrived += 1
                        if self.arrived == self.world:
                            self.arrived = 0
                            self.generation += 1
                            self.condition.notify_all()
                        while self.generation == generation and self.dead is None:
                            self.condition.wait()
                    send("cmd=barrier_out")
                elif command == "finalize":
                    finalized = True
                    send("cmd=finalize_ack")
                else:
                    send(f"cmd={command} rc=-1 msg=unsupported")
        except OSError:
            pass
        if pmi_rank is not None and not finalized:
            self.report_death(pmi_rank)
        if watch_rank is not None:
            with self.condition:
                if watch_rank not in self.finished:
                    self.finished.add(watch_rank)
                    self.condition.notify_all()
                    died = True
                else:
                    died = False
            if died:
                self.report_death(watch_rank)

    def report_death(self, rank):
        with self.condition:
            if self.dead is not None:
                return
            self.dead = rank
            self.condition.notify_all()
            for send in self.watchers:
                try:
                    send(f"cmd=weft_dead rank={rank}")
                except OSError:
                    pass

    def wait_for_all(self):
        with self.condition:
            while len(self.finished) < self.world and self.dead is None:
                self.condition.wait()


def run_rank_of_world(program, args, rank, world):
    """Runs rank `rank` of a world started by another launcher (torchrun-
    style RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Rank 0's weft-run
    serves PMI at MASTER_ADDR:MASTER_PORT; every weft-run watches it and
    stops its rank, naming the dead one, if any rank dies."""
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    try:
        port = int(os.environ.get("MASTER_PORT", "29500"))
    except ValueError:
        fail(f"MASTER_PORT '{os.environ['MASTER_PORT']}' is not a port")
    server = None
    if rank == 0:
        try:
            server = PmiServer(world, port)
        except OSError as error:
            fail(f"rank 0 cannot serve PMI on port {port}: {error.strerror}")
    deadline = time.monotonic() + 60
    while True:
        try:
            watch = socket.create_connection((address, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                fail(f"cannot reach rank 0 at {address}:{port} (MASTER_ADDR,"
                     " MASTER_PORT)")
            time.sleep(0.2)
    watch.settimeout(None)
    stream = watch.makefile("rw")
    stream.write(f"cmd=weft_watch rank={rank}\n")
    stream.flush()
    env = dict(os.environ, PMI_PORT=f"{address}:{port}", PMI_ID=str(rank))
    child = subprocess.Popen([program] + args, env=env)
    dead = {}

    def listen():
        for line in stream:
            match = re.search(r"cmd=weft_dead rank=(\d+)", line)
            if match:
                dead["rank"] = int(match.group(1))
                break
        else:
            dead.setdefault("rank", None)  # rank 0's weft-run is gone
        if child.poll() is None:
            child.kill()

    threading.Thread(target=listen, daemon=True).start()
    status = child.wait()
    try:
        stream.write(f"cmd=weft_exit status={status}\n")
        stream.flush()
    except OSError:
        pass
    other = dead.get("rank", rank)
    if status != 0 and other != rank:
        who = "rank 0's weft-run" if other is None else f"rank {other}"
        fail(f"{who} died; rank {rank} was stopped")
    if status < 0:
        fail(f"rank {rank} (pid {child.pid}) died ({signal_name(-status)}); "
             "the other ranks are being stopped")
    if status != 0:
        fail(f"rank {rank} exited with status {status}")
    if server:
        server.wait_for_all()  # serve the others until they are done
        if server.dead is not None:
            fail(f"rank {server.dead} died; the other ranks were stopped")
    return 0


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
    # More ranks than cores: Hydra binds them to the cores in turn. Unbound,
    # the scheduler moves ranks between cores, and a rank that waits in a
    # collective keeps taking time from the ranks it waits for; bound, the
    # ranks of one core take turns (the runtime yields while it waits).
    if ranks > len(os.sched_getaffinity(0)):
        return [mpiexec, "-bind-to", "core", "-n", str(ranks)]
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

    # One task of srun: SLURM's PMI connects the ranks; run in place.
    if os.environ.get("SLURM_PROCID") is not None:
        check_world(int(os.environ.get("SLURM_NTASKS", "1")), ranks, mesh,
                    options.program)
        os.execv(program, [program] + options.args)
    # One process of a torchrun-style launch: weft-run is the process
    # manager, with rank 0 serving the PMI that MPICH joins through.
    if os.environ.get("RANK") is not None and os.environ.get(
            "WORLD_SIZE") is not None and os.environ.get("PMI_FD") is None:
        check_world(int(os.environ["WORLD_SIZE"]), ranks, mesh,
                    options.program)
        return run_rank_of_world(program, options.args,
                                 int(os.environ["RANK"]), ranks)

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


# A rank's exit status when it stopped only because another failed
# (kExitPeerFailed of runtime/include/weft/runtime/Contract.h).
PEER_FAILED = 2

# Hydra's report of a failed rank; weft-run says it in one line instead.
BANNER = re.compile(r"^(=+$|=   |YOUR APPLICATION TERMINATED|This typically "
                    r"refers|Please see the FAQ)")
# What UCX prints in a rank whose peer has died mid-transfer: a fatal
# transport error ("[host:pid:tid:n] cma_ep.c:81 process_vm_readv(...)")
# and its backtrace. They follow from the death weft-run reports, so they
# are held back: dropped when a rank was killed or failed with an error of
# its own, shown otherwise (a crash's own backtrace looks the same) and
# always with WEFT_RUN_VERBOSE=1.
TRANSPORT_NOISE = re.compile(r"^(\[\S+:\d+:\d+:\d+\]|==== backtrace|\s*\d+\s+\S+"
                             r"\(.*\) \[0x[0-9a-f]+\]$|\s*\d+\s+\S+\(\+0x[0-9a-f]+\) "
                             r"\[0x[0-9a-f]+\]$|={10,}$)")


def supervise(command, env, run_dir, timeout):
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    report = {}
    held = []
    forwarded_errors = set()
    verbose = os.environ.get("WEFT_RUN_VERBOSE") == "1"

    def forward(stream, sink):
        blank_lines = 0  # held back: Hydra's report starts with one
        for line in stream:
            if line.startswith("error: rank "):
                forwarded_errors.add(line.rstrip("\n"))
            pid = re.search(r"PID (\d+) RUNNING AT", line)
            if pid:
                report.setdefault("pid", int(pid.group(1)))
            signal_text = re.search(r"\(signal (\d+)\)", line)
            if signal_text and "TERMINATED" in line:
                report.setdefault("signal", int(signal_text.group(1)))
            if BANNER.match(line):
                blank_lines = 0
                continue
            if not verbose and sink is sys.stderr and TRANSPORT_NOISE.match(line):
                held.append(line)
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
    # A stopped rank (SIGSTOP, a debugger) cannot say so; its peers' watchdog
    # only knows that someone is missing. Watched here, it can be named.
    stopped_since = {}
    next_look = started
    while process.poll() is None:
        now = time.monotonic()
        if timeout and now - started > timeout:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            fail(f"the ranks did not finish within {timeout:g} s; all were "
                 "stopped")
        if now >= next_look:
            next_look = now + 0.5
            for rank, pid in rank_pids(run_dir).items():
                if process_state(pid) == "T":
                    stopped_since.setdefault(rank, now)
                else:
                    stopped_since.pop(rank, None)
        time.sleep(0.05)
    for reader in readers:
        reader.join(timeout=5)
    if process.returncode == 0:
        sys.stderr.write("".join(held))
        return 0
    pids = rank_pids(run_dir)
    # The launcher can lose what a rank printed as the job came down: its
    # errors are in the run directory too.
    for rank in sorted(pids):
        try:
            with open(os.path.join(run_dir, f"rank{rank}.error")) as f:
                recorded = f.read().splitlines()
        except FileNotFoundError:
            continue
        for line in recorded:
            if line not in forwarded_errors:
                print(line, file=sys.stderr, flush=True)

    def show_held(number):
        if number not in (signal.SIGKILL, signal.SIGTERM):
            sys.stderr.write("".join(held))

    ended = time.monotonic()
    for rank, since in sorted(stopped_since.items(), key=lambda item: item[1]):
        if ended - since >= 1:
            fail(f"rank {rank} (pid {pids.get(rank)}) was stopped (state T) "
                 f"for {ended - since:.0f} s, and the others gave up waiting "
                 "for it; every rank was stopped")
    for rank in sorted(pids):
        if os.path.exists(os.path.join(run_dir, f"early.{pids[rank]}")):
            fail(f"rank {rank} (pid {pids[rank]}) exited with status 0 before "
                 "the run finished; the other ranks were stopped")
    # A rank that failed with an error has said so, and recorded it; one
    # that stopped only because another failed exited with PEER_FAILED.
    statuses = {rank: read_exit(run_dir, rank) for rank in pids}
    for rank in sorted(pids, key=lambda r: (statuses[r] == PEER_FAILED, r)):
        if statuses[rank]:
            fail(f"rank {rank} exited with status {statuses[rank]}; the other "
                 "ranks were stopped")
    for rank in sorted(pids):
        code = read_status(os.path.join(run_dir, f"exited.{pids[rank]}"))
        if code:
            fail(f"rank {rank} (pid {pids[rank]}) exited with status {code} "
                 "without an error of Weft's; the other ranks were stopped")
    # The wrapper of a rank that died by a signal recorded it; the ranks
    # the launcher stopped afterwards took their wrappers with them.
    # The first to die is named: a killed rank's peers may abort after it
    # (their transport loses the peer).
    by_pid = {pid: rank for rank, pid in pids.items()}
    deaths = []
    for name in os.listdir(run_dir):
        match = re.fullmatch(r"died\.(\d+)", name)
        if match and int(match.group(1)) in by_pid:
            path = os.path.join(run_dir, name)
            with open(path) as f:
                number = int(f.read().strip() or 0)
            deaths.append((os.stat(path).st_mtime_ns, int(match.group(1)),
                           number))
    # A peer's transport error names the rank it lost: that one died first,
    # whatever the order the wrappers recorded the deaths in.
    lost = {int(found.group(1)) for line in held
            for found in [re.search(r"\(pid=(\d+) ", line)] if found}
    first = [d for d in deaths if d[1] in lost]
    if not first and lost & set(by_pid):
        # Its wrapper was stopped before it could record how it died.
        pid = min(lost & set(by_pid))
        fail(f"rank {by_pid[pid]} (pid {pid}) died; the other ranks were "
             "stopped")
    deaths = first or deaths
    if deaths:
        _, pid, number = min(deaths)
        show_held(number)
        fail(f"rank {by_pid[pid]} (pid {pid}) died ({signal_name(number)});"
             " the other ranks were stopped")
    # Hydra's report names a pid, though not always the first to die.
    rank = by_pid.get(report.get("pid"))
    who = f"rank {rank} (pid {pids[rank]})" if rank is not None else "a rank"
    cause = f" ({signal_name(report['signal'])})" if "signal" in report else ""
    show_held(report.get("signal"))
    fail(f"{who} died{cause}; the other ranks were stopped")


def process_state(pid):
    """The state letter of /proc/PID/stat (R, S, T...), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


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
    # A rank that joined the world (it wrote its pid) and exited 0 without
    # saying it finished (_exit in mid-run) would leave its peers waiting:
    # failing here makes the launcher stop them.
    # One that failed without the runtime's record (exit(1) in a library, a
    # sanitizer's report) is the rank at fault, not the peers the launcher
    # kills after it.
    ranks = {found: rank for rank, found in rank_pids(run_dir).items()}
    code = os.WEXITSTATUS(status)
    if pid in ranks and read_exit(run_dir, ranks[pid]) is None:
        with open(os.path.join(run_dir, f"{'exited' if code else 'early'}.{pid}"),
                  "w") as f:
            f.write(f"{code}\n")
        return code or 1
    return code


def exit_file(run_dir, rank):
    return os.path.join(run_dir, f"rank{rank}.exit")


def read_exit(run_dir, rank):
    return read_status(exit_file(run_dir, rank))


def read_status(path):
    try:
        with open(path) as f:
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
