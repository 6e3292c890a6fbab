"""Regenerate docs/example-users.txt: the live screen of `mysqlio top --group user --mysql`
(and of --group query, key g) on a sandbox MariaDB 10.11 where alice sorts through tmpdir
and bob runs sysbench (devtools.two_users), captured from tmux at 120 columns. Run as root:
.venv/bin/python tools/capture_users.py"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from mysqlio.devtools import two_users
from mysqlio.devtools.mariadb import MariaDB

OUT = Path(__file__).resolve().parent.parent / "docs" / "example-users.txt"
SESSION = "mysqlio-capture-users"


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def _screen() -> str:
    lines = _tmux("capture-pane", "-p", "-t", SESSION).rstrip().splitlines()
    return "\n".join(line.rstrip() for line in lines) + "\n"


def main() -> int:
    if not shutil.which("tmux"):
        print("tmux is needed", file=sys.stderr)
        return 1
    with MariaDB(two_users.options()) as db:
        bench = two_users.setup(db)
        db.wait_clean()
        cmd = f"COLUMNS=120 LINES=16 {sys.executable} -m mysqlio top -p {db.pid} --mysql --group user -i 2"
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
        _tmux("new-session", "-d", "-s", SESSION, "-x", "120", "-y", "16", cmd)
        spill = two_users.Spiller(db)
        try:
            bench.start(30, rate=300)
            time.sleep(9)
            by_user = _screen()
            _tmux("send-keys", "-t", SESSION, "g")  # user -> connection
            time.sleep(4.5)
            by_connection = _screen()
            _tmux("send-keys", "-t", SESSION, "g")  # connection -> query
            time.sleep(4.5)
            by_query = _screen()
            _tmux("send-keys", "-t", SESSION, "q")
        finally:
            spill.stop()
            bench.stop()
            subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
    text = "\n".join((by_user, by_connection, by_query))
    text = re.sub(r"/tmp/mysqlio-mariadb-\w+", "/tmp/mysqlio-mariadb-XXXX", text)
    OUT.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
