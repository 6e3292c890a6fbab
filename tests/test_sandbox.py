"""Tests for mysqlio.devtools.mariadb: a real MariaDB per InnoDB AIO backend plus sysbench.

These never skip: a missing mariadbd/sysbench is a test failure (CI must run them).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.processes import find_binary
from mysqlio.devtools.sysbench import Sysbench

pytestmark = pytest.mark.mariadb

BINARIES = ("mariadbd", "mariadb-install-db", "mariadb", "sysbench")


def _require_binaries() -> None:
    """Fail (never skip) with a clear message if a needed binary is missing."""
    missing = []
    for name in BINARIES:
        try:
            find_binary(name)
        except RuntimeError as exc:
            missing.append(str(exc))
    if missing:
        pytest.fail("MariaDB sandbox tests need:\n" + "\n".join(missing), pytrace=False)


def _pid_alive(pid: int) -> bool:
    """Return True if a process with this pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("backend", ["io_uring", "aio", "pwrite"])
def test_backend_load_and_cleanup(backend: str) -> None:
    """Each backend is really used; sysbench writes show up per file; stop cleans up."""
    _require_binaries()
    db = MariaDB(MariaDBOptions(innodb_backend=backend))
    with db:
        assert db.innodb_backend_in_use() == backend
        assert "MariaDB" in db.version()
        assert f"--defaults-file={db.config_file}" in _cmdline(db.pid)

        bench = Sysbench(db, tables=1, table_size=1000, threads=2)
        bench.prepare()
        bench.start(3)
        output = bench.wait(timeout_s=60)
        assert "transactions:" in output
        db.wait_clean()

        summary = db.file_io_summary()
        ibd = os.path.join(db.datadir, "sbtest", "sbtest1.ibd")
        binlog = os.path.join(db.datadir, "mysql-bin.000001")
        assert summary[ibd][0] > 0, summary.get(ibd)
        assert summary[binlog][0] > 0, summary.get(binlog)
        assert all(os.path.isabs(name) for name in summary)
        pid, base = db.pid, db.base_dir

    assert not _pid_alive(pid)
    assert not os.path.exists(base)
    db.stop()  # idempotent


def _cmdline(pid: int) -> list[str]:
    """Return the argv of a running process."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode().split("\0")


def test_sql_escaping_and_stop_idempotent() -> None:
    """sql() unescapes batch output; stop() may be called any number of times."""
    _require_binaries()
    db = MariaDB(MariaDBOptions(log_bin=False, performance_schema=False))
    db.stop()  # before start: no-op
    db.start()
    try:
        rows = db.sql("SELECT 'a\\tb', 'x\\ny', NULL, 1")
        assert rows == [("a\tb", "x\ny", "NULL", "1")]
        assert db.sql("SELECT 1 FROM DUAL WHERE 0") == []
        assert db.sql("SELECT @@log_bin, @@skip_networking") == [("0", "1")]
        with pytest.raises(RuntimeError, match="SQL failed"):
            db.sql("SELEKT 1")
    finally:
        db.stop()
        db.stop()
    assert not _pid_alive(db.pid)
    assert not os.path.exists(db.base_dir)


def test_failed_start_cleans_up(tmp_path: Path) -> None:
    """A failing start raises with the error-log tail and leaves nothing behind."""
    _require_binaries()
    base = str(tmp_path / "sandbox")
    db = MariaDB(MariaDBOptions(extra={"no_such_option": "1"}), base_dir=base)
    with pytest.raises(RuntimeError, match="no_such_option"):
        db.start(timeout_s=30)
    assert db.pid == 0 or not _pid_alive(db.pid)
    assert not os.path.exists(base)
    db.stop()


def test_bad_backend_rejected() -> None:
    """Unknown backends are refused before anything is started."""
    with pytest.raises(ValueError):
        MariaDB(MariaDBOptions(innodb_backend="posix"))


def test_tcp_only_when_a_port_is_given() -> None:
    """The sandbox listens on the Unix socket only, unless MariaDBOptions.port asks for
    127.0.0.1:port (a replication pair, devtools/replication.py)."""
    default = MariaDB(MariaDBOptions()).config_settings()
    assert "skip_networking" in default and "port" not in default and default["server_id"] == "1"
    tcp = MariaDB(MariaDBOptions(port=33061, server_id=2)).config_settings()
    assert "skip_networking" not in tcp
    assert (tcp["port"], tcp["bind_address"], tcp["server_id"]) == ("33061", "127.0.0.1", "2")
