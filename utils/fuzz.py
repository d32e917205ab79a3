#!/usr/bin/env python3
"""Runs Weft's libFuzzer targets (tools/weft-fuzz, built with -DWEFT_FUZZ=ON)
for --seconds each (--seconds TARGET=N for one of them; --runs TARGET=N
for a number of executions instead), --jobs at a time,
and prints, per target, the executions, the coverage (libFuzzer's cov:
edges and ft: features) and whether anything crashed.

Seed corpora are made first, in --work: the shared models with their large
weights dropped and their batch and sequence dims bound, the ONNX
node-test models and the test suite's text models for the importer; the .mlir tests (split at `// -----`) for the parser; a
small checkpoint, a compiled model's manifest and weights, the planner's
cluster files and data files of each kind for the others. Each target's
inputs from test/Fuzz/Inputs (the regression corpus `make check` replays)
are seeds too. A crash leaves its input in --work/crashes/TARGET: copy it
into test/Fuzz/Inputs/TARGET with the fix. Corpora grow from run to run;
a run reports the crashes it found itself."""

import argparse
import concurrent.futures
import glob
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED_MODELS = os.path.join(os.path.dirname(ROOT), "shared", "models")
NODE_TESTS = "/usr/share/libonnx-testdata/data/node"
SEPARATOR = b"\n--weft-fuzz-file--\n"
TARGETS = ["onnx-import", "mlir-parse", "checkpoint", "model-open", "cluster",
           "data-files"]


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def onnx_seeds(out):
    import onnx
    count = 0
    for path in sorted(glob.glob(os.path.join(SHARED_MODELS, "**", "*.onnx"),
                                 recursive=True)):
        try:
            model = onnx.load(path, load_external_data=False)
        except Exception:
            continue
        # The graph is the interesting part; the weights only make it big.
        # Small initializers stay: they are the shapes and indices the
        # importer reads.
        for tensor in model.graph.initializer:
            if tensor.ByteSize() <= 1024 and \
                    tensor.data_location == onnx.TensorProto.DEFAULT:
                continue
            for field in ("raw_data", "float_data", "int32_data", "int64_data"):
                tensor.ClearField(field)
            tensor.ClearField("external_data")
            tensor.data_location = onnx.TensorProto.DEFAULT
        # Exports leave batch and sequence symbolic; a seed binds them (as
        # --dim would) so that mutations reach past the graph inputs.
        for value in list(model.graph.input) + list(model.graph.output):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param"):
                    dim.dim_value = 2
        write(out, f"shared-{count}.onnx", model.SerializeToString())
        count += 1
    node_models = sorted(glob.glob(os.path.join(NODE_TESTS, "*", "model.onnx")))
    for path in node_models[::4]:
        shutil.copy(path, os.path.join(out, f"node-{os.path.basename(os.path.dirname(path))}.onnx"))
    # Test files hold several text models (split-file sections, or one
    # after another); each is a seed of its own.
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.onnxtxt"),
                                 recursive=True)):
        with open(path) as f:
            lines = [line for line in f if not line.lstrip().startswith(("#", "//"))]
        models = re.split(r"^(?=<\s*ir_version)", "".join(lines), flags=re.M)
        stem = os.path.splitext(os.path.basename(path))[0]
        for number, text in enumerate(m for m in models if m.startswith("<")):
            write(out, f"{stem}-{number}.onnxtxt", text.encode())


def mlir_seeds(out):
    count = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "**", "*.mlir"),
                                 recursive=True)):
        with open(path) as f:
            text = f.read()
        for case in re.split(r"^// -----$", text, flags=re.M):
            case = "\n".join(line for line in case.splitlines()
                             if not line.startswith("// RUN"))
            if case.strip():
                write(out, f"{count:04d}.mlir", case.encode())
                count += 1


def safetensors(tensors):
    header, offset, data = {}, 0, b""
    for name, array in tensors.items():
        raw = array.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def checkpoint_seeds(out):
    # The harness's model: w f32 [4, 6] split over tp on dim 1, b f32 [6].
    w = np.arange(24, dtype=np.float32).reshape(4, 6)
    b = np.linspace(-1, 1, 6, dtype=np.float32)
    files = [safetensors({"w": w[:, :3], "b": b}), safetensors({"w": w[:, 3:]})]
    index = ('{\n  "format": "weft-checkpoint/2",\n  "step": 7,\n  "seed": 1,\n'
             '  "mesh": "tp=2",\n  "files": {\n'
             '    "rank-00000.safetensors": {"bytes": @BYTES0@, "crc32": "@CRC0@"},\n'
             '    "rank-00001.safetensors": {"bytes": @BYTES1@, "crc32": "@CRC1@"}\n'
             '  },\n  "tensors": {\n'
             '    "w": {"role": "param", "dtype": "F32", "shape": [4, 6], '
             '"sharding": "-,0", "shards": [{"file": "rank-00000.safetensors", '
             '"shard": 0}, {"file": "rank-00001.safetensors", "shard": 1}]},\n'
             '    "b": {"role": "param", "dtype": "F32", "shape": [6], '
             '"sharding": "-", "shards": [{"file": "rank-00000.safetensors", '
             '"shard": 0}]}\n  },\n  "index_crc32": "00000000"\n}\n')
    write(out, "tp2", SEPARATOR.join([index.encode()] + files))
    write(out, "tp2-unchecked", SEPARATOR.join(
        [index.replace("@CRC0@", "00000000").encode()] + files))


def model_open_seeds(out, scratch, bin_dir):
    os.makedirs(scratch, exist_ok=True)
    onnx_path = os.path.join(scratch, "tiny.onnx")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_gpt2.py"), "--layers", "1",
                    "--hidden", "16", "--heads", "2", "--vocab", "32", "--seq", "8",
                    "-o", onnx_path], check=True, stdout=subprocess.DEVNULL)
    for name, extra in [("one-rank", []), ("tp2", ["--mesh", "tp=2", "--parallel", "megatron"])]:
        exe = os.path.join(scratch, name)
        subprocess.run([os.path.join(bin_dir, "weftc"), onnx_path, "-o", exe] + extra, check=True)
        manifest = subprocess.run([exe, "--print-manifest"], check=True,
                                  capture_output=True).stdout.strip()
        with open(exe + ".weights", "rb") as f:
            weights = f.read()
        write(out, name, manifest + SEPARATOR + weights)


def cluster_seeds(out):
    paths = glob.glob(os.path.join(ROOT, "test", "Planner", "Inputs", "*.json")) + \
        glob.glob(os.path.join(ROOT, "test", "Planner", "Inputs", "*.yaml")) + \
        glob.glob(os.path.join(ROOT, "docs", "examples", "*.json")) + \
        glob.glob(os.path.join(ROOT, "docs", "examples", "*.yaml"))
    for path in sorted(paths):
        with open(path, "rb") as f:
            data = f.read()
        selector = b"\x01" if path.endswith(".yaml") else b"\x00"
        write(out, os.path.basename(path), selector + data)


def data_file_seeds(out):
    from onnx import numpy_helper
    arrays = {"f32": np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4),
              "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
              "f16": np.ones(5, dtype=np.float16),
              "bool": np.array([[True, False]]),
              "scalar": np.float64(2.5)}
    for name, array in arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, array)
        write(out, f"{name}.npy", b"\x00" + buffer.getvalue())
        write(out, f"{name}.pb", b"\x01" +
              numpy_helper.from_array(np.asarray(array)).SerializeToString())
    with open(os.path.join(ROOT, "data", "tinyshakespeare.tokens"), "rb") as f:
        write(out, "tokens", b"\x02" + f.read(256))


def make_seeds(work, bin_dir):
    seeds = os.path.join(work, "seeds")
    shutil.rmtree(seeds, ignore_errors=True)
    onnx_seeds(os.path.join(seeds, "onnx-import"))
    mlir_seeds(os.path.join(seeds, "mlir-parse"))
    checkpoint_seeds(os.path.join(seeds, "checkpoint"))
    model_open_seeds(os.path.join(seeds, "model-open"), os.path.join(work, "models"),
                     bin_dir)
    cluster_seeds(os.path.join(seeds, "cluster"))
    data_file_seeds(os.path.join(seeds, "data-files"))
    return seeds


STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)
DONE = re.compile(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)")


def fuzz(target, seconds, runs, work, seeds, bin_dir):
    corpus = os.path.join(work, "corpus", target)
    crashes = os.path.join(work, "crashes", target)
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    earlier = set(os.listdir(crashes))
    regression = os.path.join(ROOT, "test", "Fuzz", "Inputs", target)
    command = [os.path.join(bin_dir, f"weft-fuzz-{target}"), corpus,
               os.path.join(seeds, target)]
    if os.path.isdir(regression):
        command.append(regression)
    # The importer's inputs stay under 64 KiB: every importable seed fits,
    # and larger mutants of the biggest exports cost more than they cover.
    max_len = 65536 if target == "onnx-import" else 262144
    limit = [f"-runs={runs}", "-max_total_time=86400"] if runs else \
        [f"-max_total_time={seconds}"]
    command += limit + ["-rss_limit_mb=3072",
                f"-max_len={max_len}", "-timeout=30", "-print_final_stats=1",
                f"-artifact_prefix={crashes}/"]
    # verify_asan_link_order=0: libFuzzer's link line loads libstdc++ before
    # the shared ASan runtime, which is harmless.
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:verify_asan_link_order=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    log_path = os.path.join(work, f"{target}.log")
    started = time.monotonic()
    with open(log_path, "w") as log:
        status = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    elapsed = round(time.monotonic() - started)
    with open(log_path) as f:
        text = f.read()
    stats = {key: int(value) for key, value in STAT.findall(text)}
    done = DONE.search(text)
    found = sorted(set(os.listdir(crashes)) - earlier)
    return {"target": target, "status": status, "seconds": elapsed,
            "execs": stats.get("number_of_executed_units", 0),
            "per_second": stats.get("average_exec_per_sec", 0),
            "cov": int(done.group(2)) if done else 0,
            "ft": int(done.group(3)) if done else 0,
            "corpus": int(done.group(4)) if done else 0,
            "crashes": found, "log": log_path}


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", action="append", default=[],
                        help="how long each target runs (default 60), or "
                             "TARGET=SECONDS for one (repeatable)")
    parser.add_argument("--runs", action="append", default=[],
                        help="TARGET=N: run TARGET for N executions instead "
                             "of a time (repeatable)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="targets that run at once (one core each)")
    parser.add_argument("--work", required=True,
                        help="corpora, crashes and logs (kept between runs)")
    parser.add_argument("--bin", required=True,
                        help="the bin/ of a -DWEFT_FUZZ=ON build")
    parser.add_argument("--targets", default=",".join(TARGETS))
    args = parser.parse_args()
    targets = args.targets.split(",")
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target '{unknown[0]}' (known: {', '.join(TARGETS)})")
    seconds = {target: 60 for target in targets}
    for value in args.seconds:
        target, _, number = value.rpartition("=")
        if not number.isdigit() or int(number) < 1 or (target and target not in TARGETS):
            parser.error(f"--seconds takes SECONDS or TARGET=SECONDS, not '{value}'")
        for name in ([target] if target else targets):
            seconds[name] = int(number)
    runs = {}
    for value in args.runs:
        target, _, number = value.partition("=")
        if target not in TARGETS or not number.isdigit() or int(number) < 1:
            parser.error(f"--runs takes TARGET=EXECUTIONS, not '{value}'")
        runs[target] = int(number)
    os.makedirs(args.work, exist_ok=True)
    seeds = make_seeds(args.work, args.bin)
    print(f"{'target':<12} {'seconds':>7} {'executions':>11} {'exec/s':>7} "
          f"{'cov':>6} {'ft':>7} {'corpus':>6}  result", flush=True)
    failed = False
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        runs = {pool.submit(fuzz, target, seconds[target], runs.get(target), args.work,
                            seeds, args.bin): target
                for target in targets}
        for run in concurrent.futures.as_completed(runs):
            result = run.result()
            target = result["target"]
            verdict = "no crash" if not result["crashes"] and result["status"] == 0 else \
                f"FAILED (exit {result['status']}; {', '.join(result['crashes']) or 'see ' + result['log']})"
            failed |= verdict != "no crash"
            print(f"{target:<12} {result['seconds']:>7} {result['execs']:>11} "
                  f"{result['per_second']:>7} {result['cov']:>6} {result['ft']:>7} "
                  f"{result['corpus']:>6}  {verdict}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
