"""Regenerate the real-server examples in docs/: a trace of MariaDB under sysbench,
its report and its plot. Run as root: .venv/bin/python tools/capture_docs.py"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench

DOCS = Path(__file__).resolve().parent.parent / "docs"


def main() -> int:
    options = MariaDBOptions(extra={"innodb_max_dirty_pages_pct": "0", "innodb_max_dirty_pages_pct_lwm": "0"})
    with MariaDB(options) as db, tempfile.TemporaryDirectory() as tmp:
        bench = Sysbench(db, tables=4, table_size=10000, threads=2)
        bench.prepare()
        bench.start(25, rate=200)
        trace = f"{tmp}/mariadb.trace"
        mysqlio = [sys.executable, "-m", "mysqlio"]
        subprocess.run([*mysqlio, "record", "-p", str(db.pid), "-o", trace, "-d", "20", "-q"], check=True)
        bench.wait(timeout_s=60)
        report = subprocess.run([*mysqlio, "report", trace], check=True, capture_output=True, text=True).stdout
        report = report.replace(trace, "mariadb.trace").replace(db.base_dir, "/tmp/mysqlio-mariadb-XXXX")
        (DOCS / "example-report.txt").write_text(report)
        subprocess.run([*mysqlio, "plot", trace, "-o", str(DOCS / "img" / "mariadb-sysbench.png")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
