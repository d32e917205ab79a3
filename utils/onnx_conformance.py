#!/usr/bin/env python3
"""ONNX backend node-test conformance of the compiled CPU code.

For every node test of Debian's libonnx-testdata whose ops weft-translate
claims, compile the model with weftc, run the executable on the test's
inputs and compare every output with the expected one at the ONNX backend
tolerance (rtol 1e-3, atol 1e-7; integers and booleans exactly). Tests the
importer rejects by design (utils/onnx_node_tests.expected) and tests of
unclaimed ops are `unsupported`. A failure is expected only if
utils/onnx_conformance.expected lists it with a reason. Prints
`N passed, M failed, K unsupported` (M counts unexpected failures) and exits
non-zero if M > 0."""

import argparse
import concurrent.futures
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_node_tests import (DEFAULT_TESTDATA, is_claimed,  # noqa: E402
                             read_expectations, supported_ops)
from test_data import graph_inputs, load_pb  # noqa: E402
from weft import tool  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RTOL, ATOL = 1e-3, 1e-7


def close(actual, expected):
    if actual.shape != expected.shape:
        return False, f"shape {list(actual.shape)} != {list(expected.shape)}"
    if expected.dtype.kind in "biu":
        ok = np.array_equal(actual.astype(expected.dtype), expected)
        return ok, "" if ok else "values differ"
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    good = np.isclose(a, e, rtol=RTOL, atol=ATOL, equal_nan=True)
    if good.all():
        return True, ""
    worst = np.abs(a - e)[~good].max()
    return False, f"{(~good).sum()} of {good.size} values off (max error {worst:.3g})"


def run_test(test_dir, args):
    """Returns (outcome, detail) with outcome 'pass' or 'fail'."""
    model = onnx.load(str(test_dir / "model.onnx"), load_external_data=False)
    inputs = [i.name for i in graph_inputs(model)]
    data = test_dir / "test_data_set_0"
    with tempfile.TemporaryDirectory() as tmp:
        exe = pathlib.Path(tmp) / "model"
        try:
            proc = subprocess.run([args.weftc, str(test_dir / "model.onnx"), "-o", str(exe)],
                                  capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return "fail", "weftc timed out"
        if proc.returncode != 0:
            return "fail", "weftc: " + proc.stderr.strip().splitlines()[-1][:200]
        cmd = [str(exe)]
        for i, name in enumerate(inputs):
            cmd += ["--input", f"{name}={data / f'input_{i}.pb'}"]
        outputs = [o.name for o in model.graph.output]
        for i, name in enumerate(outputs):
            cmd += ["--output", f"{name}={pathlib.Path(tmp) / f'out{i}.npy'}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return "fail", "the executable timed out"
        if proc.returncode != 0:
            detail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            return "fail", "run: " + detail[:200]
        for i, name in enumerate(outputs):
            ok, why = close(np.load(pathlib.Path(tmp) / f"out{i}.npy"),
                            load_pb(data / f"output_{i}.pb"))
            if not ok:
                return "fail", f"output '{name}': {why}"
    return "pass", ""


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weftc", help="default: the weft package's (weft.tool)")
    parser.add_argument("--weft-translate", help="default: the weft package's")
    parser.add_argument("--testdata", default=DEFAULT_TESTDATA)
    parser.add_argument("--filter", help="only tests matching this regex")
    parser.add_argument("--jobs", "-j", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    args.weftc = args.weftc or str(tool("weftc"))
    args.weft_translate = args.weft_translate or str(tool("weft-translate"))
    supported = supported_ops(args.weft_translate)
    rejected = read_expectations(str(HERE / "onnx_node_tests.expected"))
    expected_failures = read_expectations(str(HERE / "onnx_conformance.expected"))
    tests, unsupported = [], 0
    for test_dir in sorted(pathlib.Path(args.testdata).glob("test_*")):
        if args.filter and not re.search(args.filter, test_dir.name):
            continue
        if test_dir.name in rejected or not is_claimed(str(test_dir / "model.onnx"), supported):
            unsupported += 1
        else:
            tests.append(test_dir)
    passed = failed = expected = 0
    unexpected_passes = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for test_dir, (outcome, detail) in zip(tests, pool.map(lambda t: run_test(t, args), tests)):
            name = test_dir.name
            if outcome == "pass":
                passed += 1
                if name in expected_failures:
                    unexpected_passes.append(name)
            elif name in expected_failures:
                expected += 1
                if args.verbose:
                    print(f"XFAIL {name}: {detail} ({expected_failures[name]})")
            else:
                failed += 1
                print(f"FAIL {name}: {detail}")
    for name in unexpected_passes:
        print(f"note: {name} passes but is listed in onnx_conformance.expected")
    print(f"{expected} expected failures (listed with reasons in utils/onnx_conformance.expected)")
    print(f"{passed} passed, {failed} failed, {unsupported} unsupported")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
