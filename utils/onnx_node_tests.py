#!/usr/bin/env python3
"""Import every ONNX backend node test with weft-translate; report outcomes.

The tests are the ``test_*/model.onnx`` files shipped by Debian's
libonnx-testdata.  A test is *claimed* when every default-domain op type in
its graph (subgraphs included) is listed by ``weft-translate
--list-supported-ops``; any op from another domain makes it *unclaimed*.

Each test is imported with ``weft-translate --import-onnx MODEL -o OUT.mlir``.
The importer contract: exit 0 on success (and OUT.mlir written); exit 1 with a
diagnostic line ``error: ...`` or ``<file>:...: error: ...`` on stderr on a
rejection.  Anything else is a crash: death by a signal, an exit status above
1, exit 1 without such a diagnostic (e.g. ``LLVM ERROR:`` or a sanitizer
report), exit 0 without an output file, or running past the timeout.

Outcomes, and whether they count as passed or failed:

  claimed, imported                  passed
  claimed, rejected, expected        passed  (listed in the expectations file)
  claimed, rejected, unexpected      FAILED
  unclaimed, rejected                passed  (the reason is recorded)
  unclaimed, imported                passed
  crash or timeout                   FAILED

The expectations file has lines ``test_name: reason``; ``#`` starts a comment.
The report groups the rejection messages, lists the failures, prints the count
of each outcome and ends with the line ``N passed, M failed``.  The exit
status is 1 when something failed.

Example:
    python3 utils/onnx_node_tests.py [--weft-translate PATH]
"""

import argparse
import collections
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import tempfile

import onnx

from weft import tool

DEFAULT_TESTDATA = "/usr/share/libonnx-testdata/data/node"
DEFAULT_EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "onnx_node_tests.expected")
DEFAULT_DOMAINS = ("", "ai.onnx")
REASON_WIDTH = 60
# A diagnostic line: "error: ..." or "<location>: error: ...".
DIAGNOSTIC = re.compile(r"^(?:\S.*?: )?error: (.*)$")

OUTCOMES = collections.OrderedDict([
    ("claimed_imported", ("claimed+imported", True)),
    ("claimed_rejected_expected", ("claimed+rejected (expected)", True)),
    ("claimed_rejected", ("claimed+rejected (unexpected)", False)),
    ("unclaimed_rejected", ("unclaimed+rejected", True)),
    ("unclaimed_imported", ("unclaimed+imported", True)),
    ("crash", ("crash", False)),
    ("timeout", ("timeout", False)),
])

Result = collections.namedtuple("Result", "name outcome reason stderr")


def graph_ops(graph):
    """Yields (domain, op_type) of every node, including subgraph nodes."""
    for node in graph.node:
        yield node.domain, node.op_type
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from graph_ops(attr.g)
            for sub in attr.graphs:
                yield from graph_ops(sub)


def is_claimed(model_path, supported):
    """True when all ops of the model are default-domain and supported."""
    model = onnx.load(model_path, load_external_data=False)
    return all(domain in DEFAULT_DOMAINS and op_type in supported
               for domain, op_type in graph_ops(model.graph))


def read_expectations(path):
    """Parses ``test_name: reason`` lines into a dict."""
    expected = {}
    if not os.path.exists(path):
        return expected
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, reason = line.partition(":")
            if not sep or not name.strip():
                sys.exit(f"{path}:{number}: expected 'test_name: reason'")
            expected[name.strip()] = reason.strip()
    return expected


def supported_ops(translate):
    """Runs ``--list-supported-ops`` and returns the set of op types."""
    try:
        proc = subprocess.run([translate, "--list-supported-ops"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        sys.exit(f"error: cannot run {translate} --list-supported-ops: {err}")
    if proc.returncode != 0:
        sys.exit(f"error: {translate} --list-supported-ops exited with "
                 f"{proc.returncode}:\n{proc.stderr}")
    return {line.strip() for line in proc.stdout.splitlines() if line.strip()}


def describe_status(returncode):
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def run_test(name, model_path, claimed, args, expected, out_dir):
    """Imports one model and classifies the outcome."""
    out_path = os.path.join(out_dir, name + ".mlir")
    try:
        proc = subprocess.run(
            [args.weft_translate, "--import-onnx", model_path, "-o", out_path],
            capture_output=True, text=True, errors="replace",
            timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return Result(name, "timeout",
                      f"no result after {args.timeout:g} s", "")
    stderr = proc.stderr
    if proc.returncode == 0:
        if not os.path.exists(out_path):
            return Result(name, "crash", "exit status 0 but no output file",
                          stderr)
        os.remove(out_path)
        return Result(name, "claimed_imported" if claimed
                      else "unclaimed_imported", "", stderr)
    if proc.returncode != 1:
        return Result(name, "crash", describe_status(proc.returncode), stderr)
    messages = [m.group(1) for m in map(DIAGNOSTIC.match, stderr.splitlines())
                if m]
    if not messages:
        return Result(name, "crash", "exit status 1 without an 'error:' line",
                      stderr)
    reason = messages[0].strip()
    if not claimed:
        return Result(name, "unclaimed_rejected", reason, stderr)
    if name in expected:
        return Result(name, "claimed_rejected_expected", reason, stderr)
    return Result(name, "claimed_rejected", reason, stderr)


def print_reasons(title, results):
    """Prints rejection messages grouped by their first characters."""
    groups = collections.Counter(r.reason[:REASON_WIDTH] for r in results)
    if not groups:
        return
    print(f"{title} ({len(results)}):")
    for reason, count in sorted(groups.items(), key=lambda kv: (-kv[1],
                                                                 kv[0])):
        print(f"  {count:5d}  {reason}")
    print()


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Outcomes and the importer contract are described in the "
               "module docstring.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--weft-translate", help="importer binary (default: "
                        "the weft package's, weft.tool)")
    parser.add_argument("--testdata", default=DEFAULT_TESTDATA,
                        help="directory holding the test_* folders")
    parser.add_argument("--expected", default=DEFAULT_EXPECTED,
                        help="expectations file of 'test_name: reason' lines")
    parser.add_argument("--filter", type=re.compile, default=None,
                        help="only run tests whose name matches this regular "
                             "expression (re.search)")
    parser.add_argument("--jobs", "-j", type=int, default=2,
                        help="tests imported in parallel")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds per test before it counts as failed")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show the stderr of every failure")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return args


def main(argv):
    args = parse_args(argv)
    args.weft_translate = args.weft_translate or str(tool("weft-translate"))
    all_tests = sorted(
        entry for entry in os.listdir(args.testdata)
        if entry.startswith("test_")
        and os.path.isfile(os.path.join(args.testdata, entry, "model.onnx")))
    tests = [name for name in all_tests
             if args.filter is None or args.filter.search(name)]
    if not tests:
        sys.exit(f"error: no tests selected under {args.testdata}")
    supported = supported_ops(args.weft_translate)
    expected = read_expectations(args.expected)

    with tempfile.TemporaryDirectory(prefix="weft-node-tests-") as out_dir, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = []
        for name in tests:
            model_path = os.path.join(args.testdata, name, "model.onnx")
            futures.append(pool.submit(
                run_test, name, model_path, is_claimed(model_path, supported),
                args, expected, out_dir))
        results = [future.result() for future in futures]

    by_outcome = collections.defaultdict(list)
    for result in results:
        by_outcome[result.outcome].append(result)

    print_reasons("Rejections of unclaimed tests",
                  by_outcome["unclaimed_rejected"])
    print_reasons("Expected rejections of claimed tests",
                  by_outcome["claimed_rejected_expected"])
    rejected_as_expected = {r.name
                            for r in by_outcome["claimed_rejected_expected"]}
    for name in sorted(expected):
        if name not in all_tests:
            print(f"note: {args.expected} lists {name}, which does not exist")
        elif name in tests and name not in rejected_as_expected:
            print(f"note: {args.expected} lists {name}, which was not a "
                  "rejected claimed test")

    failures = [r for r in results if not OUTCOMES[r.outcome][1]]
    for result in failures:
        print(f"FAIL {result.name}: {OUTCOMES[result.outcome][0]}: "
              f"{result.reason}")
        if args.verbose and result.stderr.strip():
            print("    " + result.stderr.rstrip().replace("\n", "\n    "))
    if failures:
        print()

    print(", ".join(f"{label}: {len(by_outcome[key])}"
                    for key, (label, _) in OUTCOMES.items()))
    print(f"{len(results) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
