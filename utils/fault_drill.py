#!/usr/bin/env python3
"""Fault drills for a multi-rank training run. Each drill runs a training
step compiled with `weftc --train` under weft-run, commits one fault and
checks three things: the run ends within --bound seconds with an error that
names the rank at fault (and what it was doing), the newest checkpoint that
survived is the one expected, and resuming from it (from that step: the
trainer's "resuming from" line says which) repeats an uninterrupted run's
losses bit for bit.

Faults (--faults, default all but disk-full):
  kill, segv, stop  that signal, to a random rank at the start of a random
                    step (WEFT_FAULT=ACTION@RANK:STEP, runtime/lib/core/Trainer.cpp)
  exit0             the rank calls exit(0) in mid-run
  quit0             the rank calls _exit(0), past its exit handlers
  truncate, flip    the newest checkpoint damaged: a rank file cut short,
                    or one bit of a random file flipped
  disk-full         the checkpoint directory on a tmpfs too small for the
                    third save (a private mount namespace: needs root or
                    unprivileged user namespaces)
  shrink            the token file truncated under the run

Prints a seed (--seed repeats a drill), one line per fault, and with
--markdown FILE the table of docs/reliability.md."""

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

import weft

ALL_FAULTS = ["kill", "segv", "stop", "exit0", "quit0", "truncate", "flip",
              "disk-full", "shrink"]
# The watchdog's deadline in the drills: long enough for any collective of
# the small models they run, short enough to keep a stopped rank's drill
# well inside the bound.
COLLECTIVE_TIMEOUT = 8


class Drill:
    def __init__(self, args):
        self.args = args
        self.weft_run = weft.tool("weft-run")
        self.random = random.Random(args.seed)
        manifest = json.loads(subprocess.run(
            [args.program, "--print-manifest"], check=True,
            capture_output=True, text=True).stdout)
        self.ranks = 1
        for axis in manifest["mesh"]:
            self.ranks *= axis["size"]
        self.work = os.path.abspath(args.work)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.reference = self.path("reference.jsonl")
        self.train(["--log", self.reference], data=args.data).check("reference")
        self.rows = []

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def train(self, extra, data, env=None, prefix=(), watch=None):
        """Runs the training under weft-run; `watch(process)` is called
        every few milliseconds while it runs."""
        command = list(prefix) + [self.weft_run, self.args.program,
                                  "--data", data, "--steps", str(self.args.steps),
                                  "--lr", "3e-3", "--warmup", "5",
                                  "--print-every", "1000"] + extra
        run_env = dict(os.environ, WEFT_COLLECTIVE_TIMEOUT=str(COLLECTIVE_TIMEOUT))
        run_env.update(env or {})
        started = time.monotonic()
        process = subprocess.Popen(command, env=run_env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        limit = started + self.args.bound + 60
        while process.poll() is None:
            if watch:
                watch(process)
            if time.monotonic() > limit:
                os.killpg(process.pid, 9)
                break
            time.sleep(0.01)
        stdout, stderr = process.communicate()
        return Run(process.returncode, stdout, stderr,
                   time.monotonic() - started)

    def checkpoint_run(self, name, env=None):
        """A run that saves every --save-every steps into its own directory,
        with its log; returns the directory, the log and the run."""
        ckpt, log = self.path(name, "ckpt"), self.path(name, "run.jsonl")
        os.makedirs(self.path(name))
        run = self.train(["--ckpt-dir", ckpt, "--save-every",
                          str(self.args.save_every), "--log", log],
                         data=self.args.data, env=env)
        return ckpt, log, run

    def resume(self, ckpt, log, data=None):
        """--resume from `ckpt`: the step it resumed from, and whether the
        log now equals the uninterrupted run's, loss for loss."""
        run = self.train(["--ckpt-dir", ckpt, "--resume", "--log", log],
                         data=data or self.args.data)
        run.check("the resumed run")
        resumed = next((int(line.rsplit("step ", 1)[1].rstrip(")"))
                        for line in run.stdout.splitlines()
                        if line.startswith("resuming from")), 0)
        return resumed, losses(log) == losses(self.reference), run

    def latest(self, ckpt):
        with open(os.path.join(ckpt, "latest")) as f:
            return int(f.read().strip().split("-")[1])

    def fault_step(self):
        # After the first save, before the last step.
        return self.random.randint(self.args.save_every + 1, self.args.steps - 1)

    def last_save_before(self, step):
        return (step - 1) // self.args.save_every * self.args.save_every

    def record(self, fault, how, run, expected, ckpt, log, good_step,
               data=None):
        """Checks a faulted run and its resumption; one row."""
        problems = []
        if run.status == 0:
            problems.append("the run succeeded")
        if run.seconds > self.args.bound:
            problems.append(f"it took {run.seconds:.1f} s")
        message = run.message()
        if not all(part in run.stderr for part in expected):
            problems.append(f"no {' ... '.join(expected)!r} in its errors")
        leftovers = [name for name in os.listdir(ckpt) if name.endswith(".tmp")]
        if leftovers:
            problems.append(f"it left {', '.join(leftovers)}")
        latest = self.latest(ckpt)
        if latest != good_step:
            problems.append(f"latest is step {latest}, not {good_step}")
        resumed, identical, _ = self.resume(ckpt, log, data)
        # A resume that silently restarts from step 0 repeats the losses
        # too: the step it resumed from must be the last good checkpoint's.
        if resumed != good_step:
            problems.append(f"--resume resumed from step {resumed}, not {good_step}")
        if not identical:
            problems.append("the resumed losses differ")
        self.row(fault, how, run.seconds, message, good_step, resumed,
                 identical, problems)

    def row(self, fault, how, seconds, message, good_step, resumed, identical,
            problems):
        message = message.replace(self.work + "/", "")
        verdict = "FAIL" if problems else "PASS"
        print(f"{verdict} {fault}: {how}; exit after {seconds:.1f} s: {message}"
              f" | last good checkpoint step {good_step}, resumed from step "
              f"{resumed}, losses {'identical' if identical else 'DIFFER'}"
              + (f" | {'; '.join(problems)}" if problems else ""), flush=True)
        self.rows.append((fault, how, f"{seconds:.1f}", message,
                          str(good_step), str(resumed),
                          "bit-identical" if identical else "differ", verdict))

    # The faults.

    def injected(self, action):
        rank = self.random.randrange(self.ranks)
        step = self.fault_step()
        ckpt, log, run = self.checkpoint_run(
            action, env={"WEFT_FAULT": f"{action}@{rank}:{step}"})
        expected = {
            "kill": [f"rank {rank} (pid", "died (SIGKILL)"],
            # Under ASan the rank reports the SEGV and exits with status 1.
            "segv": [f"rank {rank} (pid", "died (SIGSEGV)"
                     if "AddressSanitizer: SEGV" not in run.stderr else
                     "exited with status 1 without an error of Weft's"],
            "stop": [f"rank {rank} (pid", "was stopped"],
            "exit0": [f"error: rank {rank}: the process exited in step {step}"],
            "quit0": [f"rank {rank} (pid", "exited with status 0 before the run "
                      "finished"],
        }[action]
        self.record(action, f"rank {rank}, step {step}", run, expected, ckpt,
                    log, self.last_save_before(step))

    def damaged(self, kind):
        ckpt, log, run = self.checkpoint_run(kind)
        run.check("the run to damage")
        newest = self.latest(ckpt)
        step_dir = os.path.join(ckpt, f"step-{newest:07d}")
        # The files that hold shards (a rank that owns none writes a file of
        # no tensors, which no load reads), and for a flip the index too.
        with open(os.path.join(step_dir, "index.json")) as f:
            index = json.load(f)
        files = sorted({shard["file"] for entry in index["tensors"].values()
                        for shard in entry["shards"]})
        if kind == "flip":
            files.append("index.json")
        victim = self.random.choice(files)
        path = os.path.join(step_dir, victim)
        size = os.path.getsize(path)
        if kind == "truncate":
            cut = self.random.randrange(size)
            os.truncate(path, cut)
            how = f"{victim} of step {newest} cut to {cut} of {size} bytes"
        else:
            offset, bit = self.random.randrange(size), self.random.randrange(8)
            with open(path, "r+b") as f:
                f.seek(offset)
                byte = f.read(1)[0]
                f.seek(offset)
                f.write(bytes([byte ^ (1 << bit)]))
            how = f"bit {bit} of byte {offset} of {victim} (step {newest}) flipped"
        # Loading exactly that checkpoint is an error naming the file.
        strict = self.train(["--resume-from", step_dir], data=self.args.data)
        problems = []
        if strict.status == 0 or victim not in strict.message():
            problems.append(f"--resume-from said {strict.message()!r}")
        good = newest - self.args.save_every
        resumed, identical, run = self.resume(ckpt, log)
        if victim not in run.stderr or "trying the checkpoint before it" not in run.stderr:
            problems.append("--resume did not name the damaged file")
        if resumed != good:
            problems.append(f"--resume resumed from step {resumed}, not {good}")
        if not identical:
            problems.append("the resumed losses differ")
        self.row(kind, how, strict.seconds, strict.message(), good, resumed,
                 identical, problems)

    def disk_full(self):
        # The size of one checkpoint on disk, from a run of one save.
        probe = self.path("disk-probe")
        self.train(["--steps", str(self.args.save_every), "--ckpt-dir", probe],
                   data=self.args.data).check("the probe run")
        step_dir = os.path.join(probe, f"step-{self.args.save_every:07d}")
        used = sum(4096 * -(-os.path.getsize(os.path.join(step_dir, name)) // 4096)
                   for name in os.listdir(step_dir)) + 4096
        # Room for two checkpoints, the third's save fails part-way.
        size = 2 * used + used // 2
        mount, ckpt = self.path("disk-full", "mount"), self.path("disk-full", "ckpt")
        log = self.path("disk-full", "run.jsonl")
        os.makedirs(mount)
        os.makedirs(ckpt)
        script = (f"mount -t tmpfs -o size={size} weft-drill {shlex.quote(mount)}"
                  ' || exit 99; "$@"; status=$?; '
                  f"cp -a {shlex.quote(mount)}/. {shlex.quote(ckpt)}/; "
                  "exit $status")
        prefix = unshare_prefix() + ["sh", "-c", script, "sh"]
        run = self.train(["--ckpt-dir", mount, "--save-every",
                          str(self.args.save_every), "--log", log],
                         data=self.args.data, prefix=prefix)
        if run.status == 99:
            sys.exit("error: cannot mount a tmpfs in a private mount namespace")
        self.record("disk-full", f"a {size // 1024} KiB tmpfs: room for two "
                    "checkpoints", run, ["No space left on device"], ckpt, log,
                    2 * self.args.save_every)

    def shrink(self):
        tokens = self.path("shrink", "tokens.bin")
        os.makedirs(self.path("shrink"))
        shutil.copy(self.args.data, tokens)
        # Early enough that the run is still going when the watcher sees it.
        step = self.random.randint(self.args.save_every + 1,
                                   self.args.steps - 2 * self.args.save_every)
        ckpt, log = self.path("shrink", "ckpt"), self.path("shrink", "run.jsonl")
        done = []

        def truncate_at_step(process):
            if not done and logged_steps(log) >= step:
                os.truncate(tokens, 2 * 64)
                done.append(True)

        run = self.train(["--ckpt-dir", ckpt, "--save-every",
                          str(self.args.save_every), "--log", log],
                         data=tokens, watch=truncate_at_step)
        shutil.copy(self.args.data, tokens)
        # The file shrank once step `step` was logged: the run stops in a
        # later step, after the saves before it.
        failed_step = logged_steps(log) + 1
        self.record("shrink", f"to 64 tokens after step {step}", run,
                    ["shrank to 64 tokens"], ckpt, log,
                    self.last_save_before(failed_step), data=tokens)

    def run_all(self, faults):
        for fault in faults:
            if fault in ("kill", "segv", "stop", "exit0", "quit0"):
                self.injected(fault)
            elif fault in ("truncate", "flip"):
                self.damaged(fault)
            elif fault == "disk-full":
                self.disk_full()
            else:
                self.shrink()
        passed = sum(row[-1] == "PASS" for row in self.rows)
        print(f"{len(self.rows)} faults, {passed} passed")
        return passed == len(self.rows)


class Run:
    def __init__(self, status, stdout, stderr, seconds):
        self.status, self.stdout, self.stderr, self.seconds = (
            status, stdout, stderr, seconds)

    def message(self):
        """What the run said of why it ended: the first rank's own error
        and weft-run's line."""
        lines = [line.strip() for line in self.stderr.splitlines()
                 if "error:" in line]
        launcher = [line for line in lines if line.startswith("weft-run:")]
        ranks = [line for line in lines if line.startswith("error: rank")]
        said = ranks[:1] + launcher[-1:]
        return " / ".join(said or lines[-1:] or ["(no error)"])

    def check(self, what):
        if self.status != 0:
            sys.exit(f"error: {what} failed: {self.message()}")
        return self


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f]


def logged_steps(path):
    try:
        with open(path) as f:
            return sum(1 for line in f if line.endswith("\n"))
    except FileNotFoundError:
        return 0


def unshare_prefix():
    """A private mount namespace: as root, or mapped to root in a user
    namespace of its own."""
    if os.geteuid() == 0:
        return ["unshare", "--mount", "--propagation", "private"]
    return ["unshare", "--mount", "--map-root-user", "--propagation", "private"]


def write_markdown(path, rows):
    header = ("| Fault | Injected | Exit after (s) | Error line | Last good "
              "checkpoint | Resumed from | Losses | Result |")
    lines = [header, "|" + "---|" * 8]
    for row in rows:
        cells = [cell.replace("|", "\\|") for cell in row]
        cells[3] = f"`{cells[3]}`"
        lines.append("| " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("program", help="a training step (weftc --train)")
    parser.add_argument("--data", required=True, help="the token file")
    parser.add_argument("--work", required=True,
                        help="a scratch directory (emptied first)")
    parser.add_argument("--faults", default=",".join(
        fault for fault in ALL_FAULTS if fault != "disk-full"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--save-every", type=int, default=5)
    parser.add_argument("--bound", type=float, default=30,
                        help="seconds within which a faulted run must end")
    parser.add_argument("--seed", type=int,
                        default=random.SystemRandom().randrange(1 << 31))
    parser.add_argument("--markdown", help="write the table here")
    args = parser.parse_args()
    faults = args.faults.split(",")
    unknown = [fault for fault in faults if fault not in ALL_FAULTS]
    if unknown:
        parser.error(f"unknown fault '{unknown[0]}' (known: {', '.join(ALL_FAULTS)})")
    if args.steps < 3 * args.save_every + 2:
        parser.error("--steps must leave room for three saves and a fault")
    print(f"seed {args.seed}", flush=True)
    drill = Drill(args)
    ok = drill.run_all(faults)
    if args.markdown:
        write_markdown(args.markdown, drill.rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
