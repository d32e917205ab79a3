"""The HTML report of the bundled GPT at pp=2 x dp=2 x tp=2, opened in
headless Chromium (Debian's): its sections render with the expected
number of bars and rows, and the browser logs no console message."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import weft

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="no chromium on PATH (apt install chromium)")


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", *args, page.as_uri()], capture_output=True, text=True, timeout=120)


def console_messages(page: Path, tmp_path: Path):
    done = chromium(page, f"--screenshot={tmp_path / 'console.png'}")
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def png_pixels(path: Path):
    """(width, height, set of RGB colours) of a screenshot."""
    from PIL import Image
    with Image.open(path) as image:
        rgb = image.convert("RGB")
        colours = {bytes(colour) for _, colour in rgb.getcolors(maxcolors=1 << 24)}
        return rgb.width, rgb.height, colours


def hex_colour(text: str) -> bytes:
    return bytes.fromhex(text.lstrip("#"))


def test_console_check_sees_errors(tmp_path):
    # The harness itself: a page that logs an error is caught.
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('boom')</script>"
                    "</body></html>")
    assert console_messages(page, tmp_path)


@pytest.fixture(scope="module")
def report_3d(gpt_batch8, tokens, cluster8, tmp_path_factory):
    """The bundled GPT trained 2 steps at pp=2 x dp=2 x tp=2 with a trace,
    and its report."""
    work = tmp_path_factory.mktemp("report")
    plans = weft.plan(gpt_batch8, cluster=cluster8, global_batch=8,
                      fix={"dp": 2, "tp": 2, "pp": 2})
    program = weft.compile(gpt_batch8, train=True, plan=plans[0])
    trace = work / "trace.json"
    program.launch(data=tokens, steps=2, lr=1e-3, trace=trace, timeout=300)
    report = program.report(trace=trace)
    page = work / "report.html"
    report.save_html(page)
    return report, page


def test_report_sections_render(report_3d, tmp_path):
    report, page = report_3d
    assert report.ranks == 8
    html = page.read_text()
    assert "http://" not in html and "https://" not in html and "<script" not in html
    dom = chromium(page, "--dump-dom").stdout
    for section in ["mesh", "memory", "parameters", "collectives", "pipeline", "planner",
                    "trace"]:
        assert f'id="{section}"' in dom, section

    def count(cls):
        return len(re.findall(rf'class="{cls}"', dom))

    assert count("mesh-rank") == 8
    assert count("memory-bar") == 8  # one per rank
    assert count("memory-bar-predicted") == 1
    assert count("timeline-row") == 2  # one per pp rank
    parameters = sum(len(p.parameters) for p in report.programs)
    assert count("param-row") == parameters > 0
    layers = {c.location for p in report.programs for c in p.collectives}
    assert count("collective-bar") >= 2 and count("collective-row") == count("collective-bar")
    # weft.plan's search, not only the plan compiled, with the reasons.
    assert count("plan-row") == len(report.top_plans) > 1
    assert count("plan-why") == len(report.plan_explanation) > 0
    assert dom.count("(compiled)") == 1
    assert count("trace-bar") == 8 == len(report.trace.tracks)
    assert report.trace.tracks[0].steps == 2
    assert layers

    shot = tmp_path / "report.png"
    done = chromium(page, f"--screenshot={shot}", "--window-size=1280,4200")
    assert shot.exists(), done.stderr[-2000:]
    assert not [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    width, height, colours = png_pixels(shot)
    assert (width, height) == (1280, 4200)
    # Each chart drew: weights and temporaries (memory), forward and
    # backward (pipeline), the collectives' bars, compute and
    # communication (trace).
    for colour in ["#4e79a7", "#edc948", "#f28e2b", "#b07aa1", "#e15759"]:
        assert hex_colour(colour) in colours, colour
