"""Throwaway MariaDB server for tests and the demo.

`MariaDB` bootstraps a private server in one temporary base directory and talks
to it over a Unix socket (TCP on 127.0.0.1 only when `MariaDBOptions.port` is set,
for replication: devtools/replication.py); `Sysbench` drives load against it.  Only the
standard library is used: SQL goes through the `mariadb` command-line client.

Layout of the base directory (all absolute paths)::

    my.cnf          generated config, passed as --defaults-file (visible in
                    the server's /proc/PID/cmdline; holds datadir and log_bin)
    data/           datadir (binlog: data/mysql-bin.NNNNNN when log_bin)
    tmp/            tmpdir (InnoDB's deleted monitor/deadlock files, sort files)
    mysqld.sock     socket          mysqld.pid    pid file
    error.log       server error log
    install-db.log  mariadb-install-db output
    mariadbd.out    server stdout/stderr (messages before the error log opens)

`RootedMariaDB` (rooted_mariadb.py) is the same server taken from another Debian
release's root directory, run in its own mount and pid namespace; `Sysbench`
(sysbench.py) drives load against either.

InnoDB I/O backends (MariaDB >= 10.11.12 has `innodb_linux_aio`, MDEV-36234):
"io_uring" and "aio" set innodb_use_native_aio=ON plus innodb_linux_aio;
"pwrite" sets innodb_use_native_aio=OFF (simulated AIO: thread pool doing
synchronous pread/pwrite); "default" leaves the server defaults (native AIO
with innodb_linux_aio=auto, i.e. io_uring if it can be set up, else libaio).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import NoReturn

from .processes import TAIL_LINES, die_with_parent, find_binary, run_logged, tail, wait_or_kill

BACKENDS = ("default", "io_uring", "aio", "pwrite")

# Error-log lines of MariaDB 10.11 that reveal the InnoDB AIO implementation.
# "pwrite" prints no "Using" line at all; the fallback line is printed when
# native AIO was requested but could not be initialised.
_BACKEND_LOG_LINES = (
    ("InnoDB: Using io_uring", "io_uring"),
    ("InnoDB: Using Linux native AIO", "aio"),
    ("falling back to innodb_use_native_aio=OFF", "pwrite"),
)
_START_MARKER = "] Starting MariaDB"
_INNODB_STARTED = "InnoDB: Completed initialization of buffer pool"

_SOCKET_PATH_MAX = 107  # sizeof(sun_path) - 1 on Linux
POLL_S = 0.05


@dataclass
class MariaDBOptions:
    """Server settings that end up in the generated my.cnf."""

    innodb_backend: str = "default"  # "default" | "io_uring" | "aio" | "pwrite"
    log_bin: bool = True
    sync_binlog: int = 1
    performance_schema: bool = True
    buffer_pool_mb: int = 128
    redo_log_mb: int = 96
    server_id: int = 1  # distinct per server of a replication pair (devtools/replication.py)
    port: int | None = None  # also listen on 127.0.0.1:port (TCP); None: the Unix socket only
    extra: dict[str, str] = field(default_factory=dict)  # more [mariadbd] options


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unescape(value: str) -> str:
    r"""Undo the escaping of `mariadb --batch` output (\t, \n, \0, \\)."""
    table = {"t": "\t", "n": "\n", "0": "\0", "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(0)), value)


def _parse_batch(output: str) -> list[tuple[str, ...]]:
    """Split `mariadb -N -B` output into rows of strings (NULL stays 'NULL')."""
    return [tuple(_unescape(v) for v in line.split("\t")) for line in output.splitlines()]


def _backend_options(backend: str) -> dict[str, str]:
    """my.cnf lines selecting the InnoDB AIO implementation."""
    if backend == "io_uring":
        return {"innodb_use_native_aio": "ON", "innodb_linux_aio": "io_uring"}
    if backend == "aio":
        return {"innodb_use_native_aio": "ON", "innodb_linux_aio": "aio"}
    if backend == "pwrite":
        return {"innodb_use_native_aio": "OFF"}
    if backend == "default":
        return {}
    raise ValueError(f"innodb_backend must be one of {BACKENDS}, got {backend!r}")


class MariaDB:
    """A private mariadbd in a temp dir, reachable via its Unix socket (and 127.0.0.1:port if set).

    Use as a context manager (`with MariaDB(opts) as db:`) or call start()/stop().
    start() cleans up after itself when it fails; stop() is idempotent.
    stop() removes everything under base_dir; the directory itself is removed
    when this object created it (the default mkdtemp, or a missing base_dir).
    """

    STOP_TIMEOUT_S = 60.0
    CLIENT_TIMEOUT_S = 120.0
    USER = "root"  # --user of mariadbd and mariadb-install-db
    SERVER = "mariadbd"  # the server program, also the option file's section
    PARENT_DEATH_SIGNAL = signal.SIGTERM  # what the server gets when this process dies

    def __init__(self, options: MariaDBOptions | None = None, base_dir: str | None = None) -> None:
        self.options = options or MariaDBOptions()
        self._backend_settings()  # validate early
        self._requested_base = base_dir
        self._created_base = False
        self._proc: subprocess.Popen[bytes] | None = None
        self.pid = 0  # kept after stop() so callers can check the process is gone
        self.base_dir = self.datadir = self.socket = self.error_log = ""
        self.pid_file = self.config_file = self.tmpdir = ""

    # -- context manager -------------------------------------------------
    def __enter__(self) -> MariaDB:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 60) -> None:
        """Bootstrap a fresh datadir and start mariadbd; wait until it answers."""
        if self._proc is not None:
            raise RuntimeError("MariaDB sandbox already started")
        deadline = time.monotonic() + timeout_s
        try:
            server = self._server_binary(self.SERVER)
            find_binary("mariadb")
            self._make_layout()
            self._install_db(server, deadline)
            self._spawn(server)
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Shut the server down (SIGTERM, then SIGKILL) and remove the temp files."""
        self._shut_down()
        self._remove_base()

    def restart(self, timeout_s: float = 60, while_down: Callable[[], None] | None = None) -> None:
        """Shut the server down cleanly and start it again on the same files (a new pid);
        `while_down` runs in between (e.g. to drop the files' pages from the page cache)."""
        try:
            self._run_again(timeout_s, while_down)
        except BaseException:
            self.stop()
            raise

    def _shut_down(self) -> None:
        """The server's process stopped (SIGTERM, then SIGKILL), its files kept."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._terminate(proc)
            wait_or_kill(proc, self.STOP_TIMEOUT_S, group=False)

    def _run_again(self, timeout_s: float, while_down: Callable[[], None] | None = None) -> None:
        """Stop the server and run the same one again on its files (`while_down` called
        between); wait until it answers."""
        self._shut_down()
        if while_down is not None:
            while_down()
        deadline = time.monotonic() + timeout_s
        self._spawn(self._server_binary(self.SERVER))
        self._wait_ready(deadline)

    # -- what a server in another root changes (RootedMariaDB) -------------
    def _server_binary(self, name: str) -> str:
        """The path the server-side program `name` is started by."""
        return find_binary(name)

    def _command(self, argv: list[str]) -> list[str]:
        """The command line that runs the server-side program `argv`."""
        return argv

    def server_path(self, path: str) -> str:
        """Where the server sees the file that is at `path` here."""
        return path

    def host_path(self, path: str) -> str:
        """Where the file the server calls `path` is here."""
        return path

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        """Ask the server to shut down."""
        proc.terminate()

    def _make_layout(self) -> None:
        """Create the base dir and set all paths."""
        base = self._requested_base
        if base is None:
            base = tempfile.mkdtemp(prefix="mysqlio-mariadb-")
            self._created_base = True
        else:
            self._created_base = not os.path.exists(base)
            os.makedirs(base, exist_ok=True)
            if os.listdir(base):
                raise RuntimeError(f"base_dir {base!r} is not empty")
        self.base_dir = os.path.realpath(base)
        self.datadir = os.path.join(self.base_dir, "data")
        self.socket = os.path.join(self.base_dir, "mysqld.sock")
        self.pid_file = os.path.join(self.base_dir, "mysqld.pid")
        self.error_log = os.path.join(self.base_dir, "error.log")
        self.config_file = os.path.join(self.base_dir, "my.cnf")
        self.tmpdir = os.path.join(self.base_dir, "tmp")
        if len(self.socket) > _SOCKET_PATH_MAX:
            raise RuntimeError(f"socket path too long for AF_UNIX: {self.socket}")
        os.mkdir(self.datadir)
        os.mkdir(self.tmpdir)
        Path(self.config_file).write_text(self.config_text())

    def _remove_base(self) -> None:
        """Remove (rm -rf) what start() created."""
        if not self.base_dir or not os.path.isdir(self.base_dir):
            return
        if self._created_base:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            return
        for entry in os.listdir(self.base_dir):
            path = os.path.join(self.base_dir, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def config_settings(self) -> dict[str, str]:
        """Return the [mariadbd] settings for my.cnf ('' value = bare flag)."""
        opts = self.options
        settings = {
            "datadir": self.datadir,
            "socket": self.socket,
            "pid_file": self.pid_file,
            "log_error": self.error_log,
            "tmpdir": self.tmpdir,
            "user": self.USER,
            "skip_name_resolve": "",
            "server_id": str(opts.server_id),
            "performance_schema": "ON" if opts.performance_schema else "OFF",
            "innodb_buffer_pool_size": f"{opts.buffer_pool_mb}M",
            "innodb_log_file_size": f"{opts.redo_log_mb}M",
        }
        if opts.port is None:
            settings["skip_networking"] = ""
        else:  # loopback only: a replica's I/O thread connects over TCP
            settings.update({"port": str(opts.port), "bind_address": "127.0.0.1"})
        if opts.log_bin:
            settings["log_bin"] = os.path.join(self.datadir, "mysql-bin")
            settings["sync_binlog"] = str(opts.sync_binlog)
        settings.update(self._backend_settings())
        settings.update(opts.extra)
        return settings

    def _backend_settings(self) -> dict[str, str]:
        return _backend_options(self.options.innodb_backend)

    def config_text(self) -> str:
        """Render my.cnf."""
        lines = [f"[{self.SERVER}]"]
        for key, value in self.config_settings().items():
            lines.append(f"{key} = {value}" if value != "" else key)
        return "\n".join(lines) + "\n"

    def _install_db(self, server: str, deadline: float) -> None:
        """Run mariadb-install-db (fast: no test db, plain root auth)."""
        log = os.path.join(self.base_dir, "install-db.log")
        cmd = self._command(
            [
                self._server_binary("mariadb-install-db"),
                f"--defaults-file={self.server_path(self.config_file)}",
                f"--user={self.USER}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ]
        )
        try:
            rc = run_logged(cmd, log, max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._fail("mariadb-install-db timed out", log)
        if rc != 0:
            self._fail(f"mariadb-install-db failed (exit {rc})", log)

    def _spawn(self, mariadbd: str) -> None:
        """Start mariadbd in its own session (Ctrl-C in a terminal does not hit it)."""
        out = os.path.join(self.base_dir, "mariadbd.out")
        cmd = self._command([mariadbd, f"--defaults-file={self.server_path(self.config_file)}", f"--user={self.USER}"])
        with open(out, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(die_with_parent, self.PARENT_DEATH_SIGNAL),
            )
        self.pid = self._proc.pid

    def _wait_ready(self, deadline: float) -> None:
        """Poll `SELECT 1` over the socket until it works or the server dies."""
        assert self._proc is not None
        while True:
            code = self._proc.poll()
            if code is not None:
                self._fail(f"mariadbd exited with code {code} during start-up")
            if os.path.exists(self.socket) and self._ping():
                return
            if time.monotonic() > deadline:
                self._fail("mariadbd did not answer SELECT 1 before the timeout")
            time.sleep(POLL_S)

    def _ping(self) -> bool:
        """Return True if `SELECT 1` succeeds."""
        try:
            res = self._client(["-e", "SELECT 1"], timeout_s=5)
        except subprocess.TimeoutExpired:
            return False
        return res.returncode == 0

    def _fail(self, reason: str, output: str = "") -> NoReturn:
        """Raise RuntimeError with the error-log tail and the tail of `output`."""
        output = output or os.path.join(self.base_dir, "mariadbd.out")
        msg = f"{reason}\n--- {self.error_log} (last {TAIL_LINES} lines):\n{tail(self.error_log)}"
        text = tail(output)
        if text:
            msg += f"\n--- {output}:\n{text}"
        raise RuntimeError(msg)

    # -- SQL -------------------------------------------------------------
    def _client(self, args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        """Run the mariadb CLI against our socket (ignores all my.cnf files)."""
        cmd = [find_binary("mariadb"), "--no-defaults", f"--socket={self.socket}", "-uroot"]
        return subprocess.run(
            cmd + args,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    def sql(self, statement: str) -> list[tuple[str, ...]]:
        """Run SQL; return all result rows as tuples of strings (NULL -> 'NULL')."""
        if not self.socket:
            raise RuntimeError("MariaDB sandbox not started")
        res = self._client(["-N", "-B", "-e", statement], timeout_s=self.CLIENT_TIMEOUT_S)
        if res.returncode != 0:
            raise RuntimeError(f"SQL failed: {statement!r}: {res.stderr.strip()}")
        return _parse_batch(res.stdout)

    def sql_named(self, statement: str) -> list[dict[str, str]]:
        """Run one SQL statement; return its rows as {column name: value} (SHOW SLAVE STATUS)."""
        if not self.socket:
            raise RuntimeError("MariaDB sandbox not started")
        res = self._client(["-B", "-e", statement], timeout_s=self.CLIENT_TIMEOUT_S)
        if res.returncode != 0:
            raise RuntimeError(f"SQL failed: {statement!r}: {res.stderr.strip()}")
        header, *rows = _parse_batch(res.stdout) or [()]
        return [dict(zip(header, row, strict=True)) for row in rows]

    def _scalar(self, statement: str) -> str:
        """First column of the first row."""
        rows = self.sql(statement)
        if not rows:
            raise RuntimeError(f"no rows from {statement!r}")
        return rows[0][0]

    def create_user(
        self,
        user: str,
        password: str,
        grants: tuple[str, ...] = ("PROCESS ON *.*", "SELECT ON performance_schema.*"),
    ) -> None:
        """Create `user`@localhost authenticated by `password` (mysql_native_password)
        with the given privileges; by default what a read-only monitor needs
        (INNODB_METRICS, performance_schema). root@localhost here has no password,
        so clients that read a password need such a user."""

        def literal(text: str) -> str:
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

        account = f"{literal(user)}@'localhost'"
        statements = [f"CREATE USER {account} IDENTIFIED BY {literal(password)}"]
        statements += [f"GRANT {grant} TO {account}" for grant in grants]
        self.sql("; ".join(statements))

    def version(self) -> str:
        """Server version string, e.g. '10.11.19-MariaDB-0+deb12u1-log'."""
        return self._scalar("SELECT VERSION()")

    def status(self, name: str) -> int:
        """Integer value of a global status variable."""
        return int(self.sql(f"SHOW GLOBAL STATUS LIKE '{name}'")[0][1])

    # -- introspection -----------------------------------------------------
    def _current_log_section(self) -> str:
        """Error-log text since the last server start."""
        text = Path(self.error_log).read_text(errors="replace")
        start = text.rfind(_START_MARKER)
        return text if start < 0 else text[start:]

    def innodb_backend_in_use(self) -> str:
        """AIO implementation InnoDB really uses: 'io_uring', 'aio' or 'pwrite'.

        Parsed from the error log of the current run ("InnoDB: Using io_uring",
        "InnoDB: Using Linux native AIO"; simulated AIO prints no such line, so
        that case is confirmed with @@innodb_use_native_aio = 0).
        """
        section = self._current_log_section()
        found = ""
        for line in section.splitlines():
            for needle, backend in _BACKEND_LOG_LINES:
                if needle in line:
                    found = backend
        if found:
            return found
        if _INNODB_STARTED in section and self._scalar("SELECT @@innodb_use_native_aio") == "0":
            return "pwrite"
        raise RuntimeError(f"cannot tell the InnoDB AIO backend from {self.error_log}")

    def wait_clean(self, timeout_s: float = 60) -> None:
        """Quiesce InnoDB: purge done, no dirty pages, redo LSN not moving.

        Temporarily sets innodb_max_dirty_pages_pct(_lwm)=0 so the page cleaner
        flushes everything (and then checkpoints), polls until
        Innodb_history_list_length == 0, Innodb_buffer_pool_pages_dirty == 0 and
        Innodb_lsn_current is unchanged between two polls, then restores the
        previous values (also on timeout), so later load flushes normally.
        Raises TimeoutError if that state is not reached within `timeout_s`.
        """
        pct, lwm = self.sql("SELECT @@GLOBAL.innodb_max_dirty_pages_pct, @@GLOBAL.innodb_max_dirty_pages_pct_lwm")[0]
        self.sql("SET GLOBAL innodb_max_dirty_pages_pct_lwm=0; SET GLOBAL innodb_max_dirty_pages_pct=0")
        try:
            self._wait_quiet(timeout_s)
        finally:
            self.sql(f"SET GLOBAL innodb_max_dirty_pages_pct={pct}; SET GLOBAL innodb_max_dirty_pages_pct_lwm={lwm}")

    def _innodb_activity(self) -> tuple[int, int, int]:
        """Return (history list length, dirty pages, current LSN)."""
        rows = self.sql(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_history_list_length', "
            "'Innodb_buffer_pool_pages_dirty', 'Innodb_lsn_current')"
        )
        values = {row[0]: int(row[1]) for row in rows}
        return (
            values["Innodb_history_list_length"],
            values["Innodb_buffer_pool_pages_dirty"],
            values["Innodb_lsn_current"],
        )

    def _wait_quiet(self, timeout_s: float) -> None:
        """Poll until purge is done, nothing is dirty and the LSN stands still."""
        deadline = time.monotonic() + timeout_s
        last_lsn = -1
        while True:
            history, dirty, lsn = self._innodb_activity()
            if history == 0 and dirty == 0 and lsn == last_lsn:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"InnoDB not quiet after {timeout_s}s: history={history} dirty={dirty}")
            last_lsn = lsn
            time.sleep(0.1)

    def file_io_summary(self) -> dict[str, tuple[int, int, int, int]]:
        """performance_schema per-file I/O since start.

        Maps absolute FILE_NAME -> (bytes written, write count, bytes read,
        read count); rows of the same file (several instruments) are summed.
        MariaDB 10.11 does not instrument the redo log (ib_logfile0): use
        status("Innodb_os_log_written") for redo bytes.
        """
        if not self.options.performance_schema:
            raise RuntimeError("file_io_summary() needs MariaDBOptions(performance_schema=True)")
        rows = self.sql(
            "SELECT FILE_NAME, SUM_NUMBER_OF_BYTES_WRITE, COUNT_WRITE, "
            "SUM_NUMBER_OF_BYTES_READ, COUNT_READ "
            "FROM performance_schema.file_summary_by_instance"
        )
        summary: dict[str, tuple[int, int, int, int]] = {}
        for name, wbytes, wcount, rbytes, rcount in rows:
            path = os.path.normpath(os.path.join(self.datadir, self.host_path(name)))
            ob, oc, orb, orc = summary.get(path, (0, 0, 0, 0))
            summary[path] = (ob + int(wbytes), oc + int(wcount), orb + int(rbytes), orc + int(rcount))
        return summary
