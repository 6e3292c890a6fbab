"""`mysqlio stap-build` runs in build roots whose Python has its standard library and numpy
only (tools/build_roots.py): the CLI must get to it without any other third-party module.
A module-level `import psutil` reached from tracer/cli.py once failed every root build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
THIRD_PARTY = ("psutil", "rich", "pyarrow", "prometheus_client", "matplotlib", "pymysql")
RUN = (
    "import runpy, sys\n"
    f"for name in {THIRD_PARTY!r}:\n"
    "    sys.modules[name] = None  # import of it raises ImportError\n"
    "sys.argv = ['mysqlio', 'stap-build', '--help']\n"
    "runpy.run_module('mysqlio', run_name='__main__')\n"
)


def test_stap_build_needs_no_module_a_build_root_lacks() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", RUN], capture_output=True, text=True, timeout=60, check=False, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage: mysqlio stap-build" in proc.stdout
