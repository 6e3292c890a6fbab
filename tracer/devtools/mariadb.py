"""Throwaway MariaDB server and sysbench load for tests and the demo.

`MariaDB` bootstraps a private server in one temporary base directory and talks
to it over a Unix socket only; `Sysbench` drives load against it.  Only the
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

`RootedMariaDB` is the same server taken from another Debian release's root
directory (tools/server_roots.py), run in its own mount and pid namespace with its
base directory inside that root: a containerised server, as seen from the host.

InnoDB I/O backends (MariaDB >= 10.11.12 has `innodb_linux_aio`, MDEV-36234):
"io_uring" and "aio" set innodb_use_native_aio=ON plus innodb_linux_aio;
"pwrite" sets innodb_use_native_aio=OFF (simulated AIO: thread pool doing
synchronous pread/pwrite); "default" leaves the server defaults (native AIO
with innodb_linux_aio=auto, i.e. io_uring if it can be set up, else libaio).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, NoReturn

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

_PR_SET_PDEATHSIG = 1
_SOCKET_PATH_MAX = 107  # sizeof(sun_path) - 1 on Linux
_TAIL_LINES = 20
_POLL_S = 0.05


@dataclass
class MariaDBOptions:
    """Server settings that end up in the generated my.cnf."""

    innodb_backend: str = "default"  # "default" | "io_uring" | "aio" | "pwrite"
    log_bin: bool = True
    sync_binlog: int = 1
    performance_schema: bool = True
    buffer_pool_mb: int = 128
    redo_log_mb: int = 96
    extra: dict[str, str] = field(default_factory=dict)  # more [mariadbd] options


def _die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In the child before exec: send it `sig` when the process that started it dies,
    so even a kill -9 of the test or demo leaves no server behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def find_binary(name: str) -> str:
    """Return the absolute path of a MariaDB/sysbench binary or raise."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])
    path = shutil.which(name, path=search)
    if path is None:
        raise RuntimeError(
            f"{name!r} not found (looked in PATH, /usr/sbin, /usr/bin); "
            "install it, e.g. apt-get install mariadb-server mariadb-client sysbench"
        )
    return path


def _tail(path: str, lines: int = _TAIL_LINES) -> str:
    """Last `lines` lines of a text file ('' if unreadable)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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


def _wait_or_kill(proc: subprocess.Popen[bytes], timeout_s: float, group: bool) -> None:
    """Wait for `proc`; SIGKILL it (or its process group) after `timeout_s`."""
    try:
        proc.wait(timeout=timeout_s)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def _run_logged(cmd: list[str], log_path: str, timeout_s: float) -> int:
    """Run `cmd` in its own session with output to `log_path`; kill all on timeout."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _wait_or_kill(proc, 0, group=True)
        raise
    finally:
        if proc.poll() is None:  # KeyboardInterrupt etc.: no orphans
            _wait_or_kill(proc, 0, group=True)
    return proc.returncode


class MariaDB:
    """A private mariadbd in a temp dir, reachable only via its Unix socket.

    Use as a context manager (`with MariaDB(opts) as db:`) or call start()/stop().
    start() cleans up after itself when it fails; stop() is idempotent.
    stop() removes everything under base_dir; the directory itself is removed
    when this object created it (the default mkdtemp, or a missing base_dir).
    """

    STOP_TIMEOUT_S = 60.0
    CLIENT_TIMEOUT_S = 120.0
    USER = "root"  # --user of mariadbd and mariadb-install-db
    PARENT_DEATH_SIGNAL = signal.SIGTERM  # what the server gets when this process dies

    def __init__(self, options: MariaDBOptions | None = None, base_dir: str | None = None) -> None:
        self.options = options or MariaDBOptions()
        _backend_options(self.options.innodb_backend)  # validate early
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
            mariadbd = self._server_binary("mariadbd")
            install_db = self._server_binary("mariadb-install-db")
            find_binary("mariadb")
            self._make_layout()
            self._install_db(install_db, deadline)
            self._spawn(mariadbd)
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Shut the server down (SIGTERM, then SIGKILL) and remove the temp files."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._terminate(proc)
            _wait_or_kill(proc, self.STOP_TIMEOUT_S, group=False)
        self._remove_base()

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
            "skip_networking": "",
            "skip_name_resolve": "",
            "server_id": "1",
            "performance_schema": "ON" if opts.performance_schema else "OFF",
            "innodb_buffer_pool_size": f"{opts.buffer_pool_mb}M",
            "innodb_log_file_size": f"{opts.redo_log_mb}M",
        }
        if opts.log_bin:
            settings["log_bin"] = os.path.join(self.datadir, "mysql-bin")
            settings["sync_binlog"] = str(opts.sync_binlog)
        settings.update(_backend_options(opts.innodb_backend))
        settings.update(opts.extra)
        return settings

    def config_text(self) -> str:
        """Render my.cnf."""
        lines = ["[mariadbd]"]
        for key, value in self.config_settings().items():
            lines.append(f"{key} = {value}" if value != "" else key)
        return "\n".join(lines) + "\n"

    def _install_db(self, install_db: str, deadline: float) -> None:
        """Run mariadb-install-db (fast: no test db, plain root auth)."""
        log = os.path.join(self.base_dir, "install-db.log")
        cmd = self._command(
            [
                install_db,
                f"--defaults-file={self.server_path(self.config_file)}",
                f"--user={self.USER}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ]
        )
        try:
            rc = _run_logged(cmd, log, max(1.0, deadline - time.monotonic()))
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
                preexec_fn=functools.partial(_die_with_parent, self.PARENT_DEATH_SIGNAL),
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
            time.sleep(_POLL_S)

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
        msg = f"{reason}\n--- {self.error_log} (last {_TAIL_LINES} lines):\n{_tail(self.error_log)}"
        text = _tail(output)
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


class RootedMariaDB(MariaDB):
    """A throwaway mariadbd of another Debian release, started from here inside that
    release's root directory (tools/server_roots.py builds them) and in its own mount
    and pid namespace, which is how a containerised server looks from the host::

        unshare --mount --pid --fork --kill-child --root=ROOT --mount-proc \\
            env -i PATH=... mariadbd --defaults-file=/srv/mysqlio-.../my.cnf --user=mysql

    The base directory (datadir, socket, logs) is ROOT/srv/mysqlio-<creator pid>-<hex>.
    Every attribute (base_dir, datadir, socket, error_log, ...) is the path here;
    server_path() gives the server's own name for it (its option file and its
    performance_schema use those), host_path() the reverse. The server runs as the
    root's mysql user, as a packaged one does (started as root with log_bin, MariaDB
    10.5 aborts: EACCES on its binlog index). `pid` is mariadbd itself (pid 1 of its
    namespace), not the unshare process waiting for it; stop() sends it SIGTERM. Base
    directories whose creator has died (a killed test) are removed by the next start()
    in the same root. Needs root.
    """

    USER = "mysql"
    # unshare blocks SIGTERM; a SIGKILL ends it, and its --kill-child kills the server
    PARENT_DEATH_SIGNAL = signal.SIGKILL
    SPAWN_TIMEOUT_S = 10.0
    BASE_PARENT = "srv"
    _BASE_NAME = re.compile(r"mysqlio-(\d+)-[0-9a-f]+")
    _PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

    def __init__(self, root: str, options: MariaDBOptions | None = None) -> None:
        super().__init__(options)
        self.root = os.path.realpath(root)
        self.unshare_pid = 0

    def server_path(self, path: str) -> str:
        if path == self.root:
            return "/"
        return path[len(self.root) :] if path.startswith(self.root + "/") else path

    def host_path(self, path: str) -> str:
        return self.root + path if os.path.isabs(path) else path

    def _server_binary(self, name: str) -> str:
        for directory in ("/usr/sbin", "/usr/bin"):
            if os.path.isfile(self.root + f"{directory}/{name}"):
                return f"{directory}/{name}"
        raise RuntimeError(f"no {name} in {self.root} (build the root with tools/server_roots.py)")

    def _command(self, argv: list[str]) -> list[str]:
        ns = [find_binary("unshare"), "--mount", "--pid", "--fork", "--kill-child", f"--root={self.root}"]
        return [*ns, "--mount-proc", "/usr/bin/env", "-i", f"PATH={self._PATH}", "HOME=/", *argv]

    def _account(self) -> tuple[int, int]:
        """uid and gid of the root's mysql user (its own /etc/passwd)."""
        with open(os.path.join(self.root, "etc/passwd")) as f:
            for line in f:
                fields = line.split(":")
                if fields[0] == self.USER and len(fields) > 3:
                    return int(fields[2]), int(fields[3])
        raise RuntimeError(f"no user {self.USER!r} in {self.root}/etc/passwd")

    def _remove_stale(self, parent: str) -> None:
        """Base directories of sandboxes whose creator is gone."""
        for name in os.listdir(parent):
            found = self._BASE_NAME.fullmatch(name)
            if found and not os.path.exists(f"/proc/{found[1]}"):
                shutil.rmtree(os.path.join(parent, name), ignore_errors=True)

    def _make_layout(self) -> None:
        self._server_binary("mariadbd")
        uid, gid = self._account()
        parent = os.path.join(self.root, self.BASE_PARENT)
        os.makedirs(parent, exist_ok=True)
        self._remove_stale(parent)
        self._requested_base = os.path.join(parent, f"mysqlio-{os.getpid()}-{os.urandom(4).hex()}")
        super()._make_layout()
        for directory, _, files in os.walk(self.base_dir):
            os.chown(directory, uid, gid)
            for name in files:
                os.chown(os.path.join(directory, name), uid, gid)

    def config_settings(self) -> dict[str, str]:
        return {key: self.server_path(value) for key, value in super().config_settings().items()}

    def _spawn(self, mariadbd: str) -> None:
        super()._spawn(mariadbd)
        self.unshare_pid = self.pid
        self.pid = self._server_pid(mariadbd)

    def _server_pid(self, mariadbd: str) -> int:
        """The forked child of unshare once it has become mariadbd."""
        assert self._proc is not None
        want = os.stat(self.root + mariadbd)
        deadline = time.monotonic() + self.SPAWN_TIMEOUT_S
        children = f"/proc/{self.unshare_pid}/task/{self.unshare_pid}/children"
        while True:
            with contextlib.suppress(OSError, ValueError, IndexError):
                child = int(Path(children).read_text().split()[0])
                exe = os.stat(f"/proc/{child}/exe")
                if (exe.st_dev, exe.st_ino) == (want.st_dev, want.st_ino):
                    return child
            code = self._proc.poll()
            if code is not None:
                self._fail(f"unshare exited with code {code} before mariadbd started")
            if time.monotonic() > deadline:
                self._fail(f"no mariadbd under unshare (pid {self.unshare_pid}) after {self.SPAWN_TIMEOUT_S:g}s")
            time.sleep(_POLL_S)

    def wait_clean(self, timeout_s: float = 60) -> None:
        """MariaDB.wait_clean() after purge has caught up: MariaDB 10.5 leaves a short
        history unpurged while idle (31 undo logs for minutes after sysbench prepare),
        which it may purge at any later time. innodb_max_purge_lag_wait=0 (10.5.7+)
        returns once the history is empty."""
        self.sql("SET GLOBAL innodb_max_purge_lag_wait=0")
        super().wait_clean(timeout_s)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if self.pid and self.pid != self.unshare_pid:
            os.kill(self.pid, signal.SIGTERM)  # pid 1 of its namespace: it handles SIGTERM
        else:
            proc.kill()  # not mariadbd yet: unshare's --kill-child takes the child with it


class Sysbench:
    """sysbench 1.0 OLTP load against a `MariaDB` sandbox (database sbtest)."""

    DB = "sbtest"

    def __init__(self, db: MariaDB, tables: int = 2, table_size: int = 10000, threads: int = 2) -> None:
        self.db = db
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
            "--mysql-user=root",
            "--mysql-password=",
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

    def stop(self) -> None:
        """Terminate a running load (no-op if none)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            _wait_or_kill(proc, 10, group=False)
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
