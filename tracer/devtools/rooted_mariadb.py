"""A sandbox MariaDB of another Debian release, run inside that release's root directory
in its own mount and pid namespace: a containerised server, as seen from the host."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .mariadb import POLL_S, MariaDB, MariaDBOptions
from .processes import find_binary


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
            time.sleep(POLL_S)

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
