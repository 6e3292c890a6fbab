"""A sandbox MariaDB of another Debian release, run inside that release's root directory
in its own mount and pid namespace: a containerised server, as seen from the host."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .loop_disk import LoopDisk, loop_ext4
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
    in the same root, and servers still running in them killed. Needs root.

    on_loop_disk_mb=N puts the base directory on a fresh ext4 filesystem of N MiB on a
    loop device (loop_disk.loop_ext4: a sparse image in a temporary directory of the
    host, the loop device reading and writing it with O_DIRECT, inode tables and journal
    initialised by mkfs, so no ext4lazyinit writes later): its directory `base` is
    bind-mounted at the base directory's place here before unshare, so the server's
    mount namespace, a copy of ours, has it too. `loop_device` is the device's name
    ("loop3": /sys/block/loop3/stat, /dev/loop3), `loop_image` its image file, both
    kept after stop(). stop() (and a
    failed start()) unmounts and detaches it and removes the image, and returns once
    the kernel has let the device go (the server's namespace holds the filesystem until
    it is gone). A base directory left mounted by a killed creator is unmounted and its
    loop device detached by the next start() in the same root.

    /dev/shm decides whether MariaDB 11.8 memory-maps ib_logfile0: on Linux it maps it
    read-write (MAP_SHARED, its fd closed, redo written by stores) only when the file is
    on /dev/shm's filesystem (st_dev equal: "we pretend that /dev/shm is PMEM") or on
    DAX persistent memory; anywhere else it writes it with pwrite() whatever
    innodb_log_file_mmap says (and reports innodb_log_file_mmap=OFF). In a root,
    /dev/shm is a plain directory of the root's filesystem, the one the base directory
    is on by default: 11.8 maps. shm_on_disk=True (the default) keeps that on a loop
    disk: the server's /dev/shm is a directory of the loop filesystem (`shm`, beside
    `base`, bind-mounted in the server's mount namespace only). shm_on_disk=False mounts a
    tmpfs there instead, as on a booted system, where a packaged 11.8 does not map.
    """

    USER = "mysql"
    # unshare blocks SIGTERM; a SIGKILL ends it (its --kill-child does not reach the
    # server, whose setuid to mysql clears it: _kill_orphans)
    PARENT_DEATH_SIGNAL = signal.SIGKILL
    SPAWN_TIMEOUT_S = 10.0
    BASE_PARENT = "srv"
    _BASE_NAME = re.compile(r"mysqlio-(\d+)-[0-9a-f]+")
    _PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
    RELEASE_TIMEOUT_S = 10.0

    def __init__(
        self,
        root: str,
        options: MariaDBOptions | None = None,
        on_loop_disk_mb: int | None = None,
        shm_on_disk: bool = True,
    ) -> None:
        super().__init__(options)
        self.root = os.path.realpath(root)
        self.unshare_pid = 0
        self.on_loop_disk_mb = on_loop_disk_mb
        self.shm_on_disk = shm_on_disk
        self.loop_device = ""  # "loop3" while (and after) the base directory is on a loop disk
        self.loop_image = ""  # the image file behind it (removed by stop())
        self._disk: LoopDisk | None = None
        self._disk_stack = contextlib.ExitStack()

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
        ns = [find_binary("unshare"), "--mount", "--pid", "--fork", "--kill-child"]
        env = ["/usr/bin/env", "-i", f"PATH={self._PATH}", "HOME=/", *argv]
        shm = self.host_path("/dev/shm")
        if self._disk is not None and self.shm_on_disk:  # /dev/shm on the loop filesystem
            mount = [find_binary("mount"), "--bind", str(self._disk.mount / "shm"), shm]
        elif not self.shm_on_disk:
            mount = [find_binary("mount"), "-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", shm]
        else:
            return [*ns, f"--root={self.root}", "--mount-proc", *env]
        # in the new mount namespace (private: nothing of it reaches ours), then into the root
        script = f'{shlex.join(mount)} || exit 125; exec "$@"'
        return [
            *ns,
            f"--mount-proc={self.root}/proc",
            "/bin/sh",
            "-c",
            script,
            "sh",
            find_binary("chroot"),
            self.root,
            *env,
        ]

    def _account(self) -> tuple[int, int]:
        """uid and gid of the root's mysql user (its own /etc/passwd)."""
        with open(os.path.join(self.root, "etc/passwd")) as f:
            for line in f:
                fields = line.split(":")
                if fields[0] == self.USER and len(fields) > 3:
                    return int(fields[2]), int(fields[3])
        raise RuntimeError(f"no user {self.USER!r} in {self.root}/etc/passwd")

    def _remove_stale(self, parent: str) -> None:
        """Base directories of sandboxes whose creator is gone (and their loop disks)."""
        for name in os.listdir(parent):
            found = self._BASE_NAME.fullmatch(name)
            if found and not os.path.exists(f"/proc/{found[1]}"):
                path = os.path.join(parent, name)
                self._kill_orphans(path)
                if os.path.ismount(path):
                    _release_stale_mount(path)
                if not os.path.ismount(path):  # never remove files through a mount
                    shutil.rmtree(path, ignore_errors=True)

    def _kill_orphans(self, base: str) -> None:
        """Servers of `base` still running after their creator died: unshare's parent-death
        signal (--kill-child) is cleared when mariadbd takes the mysql user's credentials,
        so a killed test leaves its server running. Each is pid 1 of its namespace: SIGKILL
        from here ends it."""
        option = f"--defaults-file={self.server_path(base)}/my.cnf".encode()
        orphans = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if os.readlink(f"/proc/{entry}/root") == self.root and option in cmdline:
                    os.kill(int(entry), signal.SIGKILL)
                    orphans.append(entry)
        deadline = time.monotonic() + self.RELEASE_TIMEOUT_S
        while any(os.path.exists(f"/proc/{pid}") for pid in orphans) and time.monotonic() < deadline:
            time.sleep(POLL_S)

    def _make_layout(self) -> None:
        self._server_binary(self.SERVER)
        uid, gid = self._account()
        parent = os.path.join(self.root, self.BASE_PARENT)
        os.makedirs(parent, exist_ok=True)
        self._remove_stale(parent)
        self._requested_base = os.path.join(parent, f"mysqlio-{os.getpid()}-{os.urandom(4).hex()}")
        if self.on_loop_disk_mb is not None:
            self._attach_disk(self.on_loop_disk_mb, self._requested_base)
        super()._make_layout()
        for directory, _, files in os.walk(self.base_dir):
            os.chown(directory, uid, gid)
            for name in files:
                os.chown(os.path.join(directory, name), uid, gid)

    def _attach_disk(self, size_mb: int, base: str) -> None:
        """A new ext4 on a loop device; its directory `base` mounted at `base`, `shm`
        beside it for the server's /dev/shm (see _command)."""
        disk = self._disk_stack.enter_context(loop_ext4(size_mb, direct_io=True))
        self._disk, self.loop_device = disk, disk.name
        self.loop_image = _backing_file(disk.name)
        (disk.mount / "base").mkdir()
        (disk.mount / "shm").mkdir()
        (disk.mount / "shm").chmod(0o1777)
        os.mkdir(base)
        self._disk_stack.callback(os.rmdir, base)
        _run("mount", "--bind", str(disk.mount / "base"), base)
        self._disk_stack.callback(_unmount, base)

    def _remove_base(self) -> None:
        if self._disk is None:
            super()._remove_base()
            return
        self._disk = None
        self._disk_stack.close()  # the files go with the filesystem
        # losetup -d of a device still open (by the server's mount namespace, going away
        # with its last process) only marks it to be detached when it is let go
        deadline = time.monotonic() + self.RELEASE_TIMEOUT_S
        while _backing_file(self.loop_device) == self.loop_image:  # (not someone else's since)
            if time.monotonic() > deadline:
                raise RuntimeError(f"/dev/{self.loop_device} still attached {self.RELEASE_TIMEOUT_S:g}s after stop")
            time.sleep(POLL_S)

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


def _run(*cmd: str, check: bool = True) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if check and proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def _backing_file(name: str) -> str:
    """The file loop device `name` reads and writes ('' when detached)."""
    try:
        return Path(f"/sys/block/{name}/loop/backing_file").read_text().strip().removesuffix(" (deleted)")
    except OSError:
        return ""


def _unmount(path: str) -> None:
    _run("umount", path, check=False)
    if os.path.ismount(path):  # busy here: detached now, let go when no longer used
        _run("umount", "--lazy", path)


def _release_stale_mount(path: str) -> None:
    """Unmount a base directory a killed RootedMariaDB left on a loop disk: the bind
    mount, loop_ext4's own mount of the device and the device itself (autoclear: the
    kernel detaches it once no namespace uses it); its image directory is removed."""
    mounts = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    device = next((m[2] for m in mounts if m[4] == path), "")
    major, _, minor = device.partition(":")
    _run("umount", "--lazy", path, check=False)
    if major != "7":  # not a loop device
        return
    image = _backing_file(f"loop{minor}")
    for m in mounts:
        if m[2] == device and m[4] != path and os.path.basename(os.path.dirname(m[4])).startswith("mysqlio-loop-"):
            _run("umount", "--lazy", m[4], check=False)
    _run("losetup", "-d", f"/dev/loop{minor}", check=False)
    if os.path.basename(os.path.dirname(image)).startswith("mysqlio-loop-"):
        shutil.rmtree(os.path.dirname(image), ignore_errors=True)


class MountedMariaDB(RootedMariaDB):
    """A RootedMariaDB whose base directory its container sees at MOUNT, as a pod's volume
    or `docker run --volume` mounts it (CrunMariaDB, EngineMariaDB): paths mapped through it."""

    MOUNT = "/var/lib/mysql"

    def server_path(self, path: str) -> str:
        base = self.base_dir
        if base and (path == base or path.startswith(base + "/")):
            return self.MOUNT + path[len(base) :]
        return super().server_path(path)

    def host_path(self, path: str) -> str:
        if self.base_dir and (path == self.MOUNT or path.startswith(self.MOUNT + "/")):
            return self.base_dir + path[len(self.MOUNT) :]
        return super().host_path(path)
