"""Regenerate docs/example-pagecache.txt: MariaDB 11.8 (Debian 13's, in its own root, with
its datadir on an ext4 loop device) under sysbench, as `mysqlio top --batch` shows it at 160
columns: the memory-mapped redo log's dirtied bytes while the load runs, then what `sync`
wrote back, and the device's view. Run as root: .venv/bin/python tools/capture_pagecache.py
(tools/server_roots.py builds the trixie root when the cache has none)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.rooted_mariadb import RootedMariaDB
from mysqlio.devtools.sysbench import Sysbench

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "example-pagecache.txt"


def main() -> int:
    roots = subprocess.run(
        [sys.executable, str(REPO / "tools" / "server_roots.py"), "--json", "trixie"],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    root = json.loads(roots.stdout)["trixie"]
    db = RootedMariaDB(root, MariaDBOptions(), on_loop_disk_mb=512)
    db.start()
    try:
        bench = Sysbench(db, tables=2, table_size=10000, threads=2)
        bench.prepare()
        subprocess.run(["sync", "-f", db.base_dir], check=True, timeout=120)
        env = {**os.environ, "COLUMNS": "160"}
        top = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "top", "-p", str(db.pid), "--batch", "-i", "3", "-n", "4"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        time.sleep(1.0)
        bench.start(5, rate=1000)
        bench.wait(timeout_s=60)
        time.sleep(2.0)
        subprocess.run(["sync", "-f", db.base_dir], check=True, timeout=120)
        out, _ = top.communicate(timeout=120)
    finally:
        db.stop()
    # the sandbox's paths, shortened as a reader's would be
    out = re.sub(r"/\S*/srv/mysqlio-\d+-[0-9a-f]+", "/srv/mysql", out)
    OUT.write_text(out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
