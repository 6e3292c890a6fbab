"""Capture the ibdata1-regions examples of docs/usage.md from a real MariaDB sandbox under
sysbench: a `top` text excerpt and a `report` of the system tablespace. Prints them; run
as root: .venv/bin/python tools/capture_regions.py"""

from __future__ import annotations

import subprocess
import sys
import tempfile

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench


def main() -> int:
    with MariaDB(MariaDBOptions()) as db, tempfile.TemporaryDirectory() as tmp:
        bench = Sysbench(db, tables=4, table_size=10000, threads=2)
        bench.prepare()
        bench.start(25)
        trace = f"{tmp}/mariadb.trace"
        mysqlio = [sys.executable, "-m", "mysqlio"]
        rec = subprocess.Popen([*mysqlio, "record", "-p", str(db.pid), "-o", trace, "-d", "20", "-q"])
        top = subprocess.run(
            [*mysqlio, "top", "-p", str(db.pid), "--batch", "-i", "5", "-n", "3", "--kind", "system,redo,binlog"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rec.wait(timeout=60)
        bench.wait(timeout_s=60)
        report = subprocess.run(
            [*mysqlio, "report", trace, "--kind", "system"], check=True, capture_output=True, text=True
        ).stdout
        for text in (top, report):
            print(text.replace(trace, "mariadb.trace").replace(db.base_dir, "/tmp/mysqlio-mariadb-XXXX"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
