"""Acceptance of the package as users get it: `pip install ./python` in a
fresh virtual environment (Debian's python3 with its torch and numpy
visible), then docs/tutorial.py runs to the end there."""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPOSITORY

SYSTEM_PYTHON = "/usr/bin/python3"


def system_python_has_torch() -> bool:
    return os.path.exists(SYSTEM_PYTHON) and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


@pytest.mark.skipif(not system_python_has_torch(),
                    reason="/usr/bin/python3 has no torch (apt install python3-torch)")
def test_pip_install_then_the_tutorial(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    # The build tree the package is built in: the one these tests import.
    import weft
    build = Path(weft.__file__).resolve().parents[2]
    env = dict(os.environ, WEFT_BUILD_DIR=str(build), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    install = subprocess.run([str(python), "-m", "pip", "install", "-q",
                              str(REPOSITORY / "python")],
                             env=env, capture_output=True, text=True, cwd=tmp_path)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    # The installed package, not the build tree's.
    where = subprocess.run([str(python), "-c", "import weft; print(weft.__file__)"],
                           env=env, capture_output=True, text=True, cwd=tmp_path)
    assert str(venv) in where.stdout, where.stdout + where.stderr
    work = tmp_path / "tutorial"
    run = subprocess.run([str(python), str(REPOSITORY / "docs" / "tutorial.py"),
                          "--work", str(work)],
                         env=env, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "one-rank logits match PyTorch" in run.stdout
    assert (work / "report.html").stat().st_size > 10000


def test_tutorial_page_shows_the_script():
    """docs/tutorial.md quotes the script: every code block is in it."""
    page = (REPOSITORY / "docs" / "tutorial.md").read_text()
    script = (REPOSITORY / "docs" / "tutorial.py").read_text()
    blocks = page.split("```python\n")[1:]
    assert blocks
    for block in blocks:
        code = block.split("```")[0]
        assert code in script, code[:200]
