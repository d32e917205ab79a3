"""Where Weft's executables are: the one place scripts look for them.

The package carries its runtime libraries and `weft-run` (in an installed
wheel, `weft/lib` and `weft/bin`; in the build tree, links to
`<build>/lib` and `<build>/bin`, where the other tools are too). A tool
not there is looked up in $WEFT_BIN, then on PATH.
"""

import os
import shutil
from pathlib import Path

from .errors import WeftError

PACKAGE_DIR = Path(__file__).resolve().parent


def runtime_directory() -> Path:
    """The runtime libraries executables link (libweft_runtime*.a)."""
    return PACKAGE_DIR / "lib"


def tool(name: str) -> Path:
    """The path of the Weft tool `name` (weftc, weft-run, weft-translate,
    ...); WeftError naming the places searched when it is nowhere."""
    candidates = [PACKAGE_DIR / "bin" / name]
    if os.environ.get("WEFT_BIN"):
        candidates.insert(0, Path(os.environ["WEFT_BIN"]) / name)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise WeftError(f"no Weft tool '{name}' in "
                    + ", ".join(str(c.parent) for c in candidates)
                    + " or on PATH (build it, or set WEFT_BIN)")
