"""sysbench OLTP load against a sandbox MariaDB."""

from __future__ import annotations

import math
import subprocess
import tempfile
from typing import IO

from .mariadb import MariaDB
from .processes import find_binary, wait_or_kill


class Sysbench:
    """sysbench 1.0 OLTP load against a `MariaDB` sandbox (database sbtest)."""

    DB = "sbtest"

    def __init__(
        self,
        db: MariaDB,
        tables: int = 2,
        table_size: int = 10000,
        threads: int = 2,
        user: str = "root",
        password: str = "",
    ) -> None:
        self.db = db
        self.user = user  # another account needs ALL on sbtest (root has no password here)
        self.password = password
        self.tables = tables
        self.table_size = table_size
        self.threads = threads
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None

    def _cmd(self, script: str, *args: str) -> list[str]:
        """Build the sysbench command line for `script`."""
        return [
            find_binary("sysbench"),
            script,
            "--db-driver=mysql",
            f"--mysql-socket={self.db.socket}",
            f"--mysql-user={self.user}",
            f"--mysql-password={self.password}",
            f"--mysql-db={self.DB}",
            f"--tables={self.tables}",
            f"--table-size={self.table_size}",
            f"--threads={self.threads}",
            *args,
        ]

    def prepare(self) -> None:
        """Create the sbtest database and its tables (oltp_write_only prepare)."""
        self.db.sql(f"CREATE DATABASE IF NOT EXISTS {self.DB}")
        res = subprocess.run(
            self._cmd("oltp_write_only", "prepare"),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(f"sysbench prepare failed:\n{res.stdout}\n{res.stderr}")

    def start(self, seconds: float, rate: int = 0, script: str = "oltp_write_only") -> None:
        """Run `script` in the background for ceil(seconds) s (rate=0: unlimited)."""
        if self._proc is not None and self._proc.poll() is None:
            raise RuntimeError("sysbench is already running")
        self._close_output()
        run_s = max(1, math.ceil(seconds))
        self._out = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()/next start()
        self._proc = subprocess.Popen(
            self._cmd(script, f"--time={run_s}", f"--rate={rate}", "--events=0", "run"),
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout_s: float | None = None) -> str:
        """Wait for the run to finish; return its output, raise if it failed."""
        if self._proc is None or self._out is None:
            raise RuntimeError("no sysbench run to wait for (not started, or stopped)")
        self._proc.wait(timeout=timeout_s)
        output = self._read_output()
        if self._proc.returncode != 0:
            raise RuntimeError(f"sysbench exited with {self._proc.returncode}:\n{output}")
        return output

    def running(self) -> bool:
        """Whether the load started last is still running."""
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        """What the load started last printed so far ("" once stopped)."""
        return self._read_output() if self._out is not None else ""

    def stop(self) -> None:
        """Terminate a running load (no-op if none)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            wait_or_kill(proc, 10, group=False)
        self._close_output()

    def _read_output(self) -> str:
        """Everything sysbench printed so far."""
        assert self._out is not None
        self._out.seek(0)
        return self._out.read().decode(errors="replace")

    def _close_output(self) -> None:
        """Drop the output file of the previous run."""
        if self._out is not None:
            self._out.close()
            self._out = None
