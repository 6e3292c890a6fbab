"""A sandbox Oracle MySQL, run inside a Debian sid root (`mysql-server`, MySQL 9.7:
tools/server_roots.py sid-mysql) in its own mount and pid namespace, as RootedMariaDB
runs MariaDB: the same base directory, options, client and Sysbench work against it.

What differs from MariaDB, here and in what the tests expect:
- the datadir is made by `mysqld --initialize-insecure` (root@localhost, no password,
  caching_sha2_password, which the host's mariadb client and sysbench speak over the
  socket);
- the redo log is `#innodb_redo/#ib_redoN`, 32 files that InnoDB recycles by renaming
  (`innodb_redo_log_capacity`, set from MariaDBOptions.redo_log_mb; spares are
  `#ib_redoN_tmp`); the doublewrite buffer is `#ib_16384_N.dblwr` files, not ibdata1;
- InnoDB's I/O is libaio ("aio", the default) or synchronous ("pwrite",
  innodb_use_native_aio=OFF): MySQL has no io_uring;
- the X plugin is off (it would listen on port 33060 and a socket of its own).
"""

from __future__ import annotations

import os
import subprocess
import time

from .mariadb import MariaDB
from .processes import run_logged
from .rooted_mariadb import RootedMariaDB

MYSQL_BACKENDS = {
    "default": {},
    "aio": {"innodb_use_native_aio": "ON"},
    "pwrite": {"innodb_use_native_aio": "OFF"},
}


class RootedMySQL(RootedMariaDB):
    SERVER = "mysqld"

    def _backend_settings(self) -> dict[str, str]:
        backend = self.options.innodb_backend
        if backend not in MYSQL_BACKENDS:
            raise ValueError(f"MySQL's innodb_backend is one of {', '.join(MYSQL_BACKENDS)}, got {backend!r}")
        return dict(MYSQL_BACKENDS[backend])

    def config_settings(self) -> dict[str, str]:
        settings = super().config_settings()
        # MySQL >= 8.0.30 sizes its redo log as a whole (innodb_log_file_size is deprecated)
        settings["innodb_redo_log_capacity"] = settings.pop("innodb_log_file_size")
        settings["mysqlx"] = "OFF"
        return settings

    def _install_db(self, server: str, deadline: float) -> None:
        log = os.path.join(self.base_dir, "install-db.log")
        cmd = self._command(
            [
                server,
                f"--defaults-file={self.server_path(self.config_file)}",
                "--initialize-insecure",
                f"--user={self.USER}",
            ]
        )
        try:
            rc = run_logged(cmd, log, max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._fail("mysqld --initialize-insecure timed out", log)
        if rc != 0:
            self._fail(f"mysqld --initialize-insecure failed (exit {rc})", log)

    def innodb_backend_in_use(self) -> str:
        """'aio' or 'pwrite': MySQL names its AIO in the error log only at info verbosity,
        but turns innodb_use_native_aio off where libaio cannot be used (AIO::start:
        "Linux Native AIO disabled"), so the variable says what InnoDB uses."""
        return "aio" if self._scalar("SELECT @@innodb_use_native_aio") == "1" else "pwrite"

    def wait_clean(self, timeout_s: float = 60) -> None:
        """MariaDB.wait_clean(), without MariaDB's purge-lag setting (MySQL has none)."""
        MariaDB.wait_clean(self, timeout_s)

    def _wait_quiet(self, timeout_s: float) -> None:
        """Poll until nothing is dirty and the checkpoint has caught up with a current LSN
        that stands still (MySQL writes its checkpoint to the redo file a moment after the
        flush). The history list is not waited for, unlike MariaDB's: idle MySQL 9.7 keeps a
        short one for minutes (17 here, no dirty page, the LSN still); callers check that
        performance_schema stands still."""
        deadline = time.monotonic() + timeout_s
        last_lsn = -1
        while True:
            rows = self.sql(
                "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_buffer_pool_pages_dirty', "
                "'Innodb_redo_log_current_lsn', 'Innodb_redo_log_checkpoint_lsn')"
            )
            values = {row[0]: int(row[1]) for row in rows}
            dirty, lsn = values["Innodb_buffer_pool_pages_dirty"], values["Innodb_redo_log_current_lsn"]
            if dirty == 0 and lsn == last_lsn == values["Innodb_redo_log_checkpoint_lsn"]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"InnoDB not quiet after {timeout_s}s: {values}")
            last_lsn = lsn
            time.sleep(0.1)
