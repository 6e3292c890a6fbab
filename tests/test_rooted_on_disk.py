"""MariaDB 11.8 of the Debian 13 `trixie` root with its base directory on an ext4 of its
own on a loop device (RootedMariaDB(on_loop_disk_mb=...)): page-cache and writeback
accounting then has a real block device's counters (/sys/block/loopN/stat) as ground
truth, never tmpfs or overlay.

- the server's own mount namespace has the filesystem at its base directory
  (/proc/PID/mountinfo), and its /dev/shm on the same filesystem;
- 11.8 maps ib_logfile0 shared and writable from the loop device: /proc/PID/maps gives
  the loop device's major:minor, the file's inode and its whole size; no fd is open on it;
- under sysbench oltp_write_only the loop device's sectors written grow;
- with /dev/shm a tmpfs (as on a booted system) 11.8 does not map ib_logfile0: it keeps
  an fd and writes it with pwrite(), innodb_log_file_mmap reads OFF;
- after stop() no mount and no loop device is left (/proc/mounts, losetup -a, /sys/block).

tools/server_roots.py builds the root (or finds it in /var/cache/mysqlio/roots); when it
cannot, the tests fail, as tests/test_foreign_servers.py does.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio.devtools.loop_disk import device_stat
from mysqlio.devtools.mariadb import MariaDBOptions
from mysqlio.devtools.rooted_mariadb import RootedMariaDB
from mysqlio.devtools.sysbench import Sysbench

SUITE, VERSION = "trixie", "11.8."
DISK_MB = 512
LOAD_S = 5
TABLES = 2
TABLE_SIZE = 10000


@pytest.fixture(scope="module")
def root(server_roots: dict[str, str]) -> str:
    """The trixie root, as tests/test_foreign_servers.py gets it (conftest builds it)."""
    return server_roots[SUITE]


def _mounts(pid: int | str) -> dict[str, tuple[str, str, str, str]]:
    """/proc/PID/mountinfo: mount point (as that process names it) -> (major:minor, root
    of the mount in its filesystem, filesystem type, source)."""
    found = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        dash = fields.index("-")
        found[fields[4]] = (fields[2], fields[3], fields[dash + 1], fields[dash + 2])
    return found


def _redo_maps(pid: int, path: str) -> list[list[str]]:
    """The lines of /proc/PID/maps that map `path`, split into fields."""
    return [line.split() for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if line.endswith(" " + path)]


def _open_on(pid: int, path: str) -> list[str]:
    fds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                fds.append(fd)
    return fds


@contextlib.contextmanager
def _server_on_loop_disk(root: str, shm_on_disk: bool = True) -> Iterator[RootedMariaDB]:
    """A RootedMariaDB on a loop disk; after stop(), nothing of it left: no process, no
    mount (here or anywhere), no loop device."""
    db = RootedMariaDB(
        root,
        MariaDBOptions(extra={"innodb_stats_auto_recalc": "OFF"}),
        on_loop_disk_mb=DISK_MB,
        shm_on_disk=shm_on_disk,
    )
    try:
        db.start()
        assert db.loop_device.startswith("loop"), db.loop_device
        yield db
    finally:
        db.stop()
    for pid in (db.pid, db.unshare_pid):
        assert not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert not os.path.exists(db.base_dir)
    # the loop device may be someone else's by now: what is ours is its image and its mounts
    with open("/proc/self/mountinfo") as f:
        left = [line for line in f if f" {db.root}/" in line or f" {os.path.dirname(db.loop_image)}/" in line]
    assert not left, left
    losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True, check=True, timeout=30).stdout
    assert db.loop_image and db.loop_image not in losetup, losetup
    assert not os.path.exists(db.loop_image)


@pytest.mark.mariadb
def test_redo_mapped_from_the_loop_device(root: str) -> None:
    started = time.monotonic()
    with _server_on_loop_disk(root) as db:
        assert db.version().startswith(VERSION)
        dev = Path(f"/sys/block/{db.loop_device}/dev").read_text().strip()  # "7:N"
        major, minor = (int(n) for n in dev.split(":"))

        # the server's mount namespace, not ours, has the filesystem where it looks for its files
        assert os.readlink(f"/proc/{db.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        theirs = _mounts(db.pid)
        assert theirs[db.server_path(db.base_dir)] == (dev, "/base", "ext4", f"/dev/{db.loop_device}"), theirs
        assert theirs["/dev/shm"][:3] == (dev, "/shm", "ext4"), theirs  # what makes 11.8 map its redo log
        redo = os.path.join(db.datadir, "ib_logfile0")
        st = os.stat(redo)
        assert (os.major(st.st_dev), os.minor(st.st_dev)) == (major, minor)

        # mapped shared and writable from the loop device, the whole file, and no fd on it
        maps = _redo_maps(db.pid, redo)
        assert len(maps) == 1, maps
        span, perms, offset, maps_dev, inode = maps[0][:5]
        low, high = (int(x, 16) for x in span.split("-"))
        assert perms == "rw-s" and int(offset, 16) == 0
        assert tuple(int(x, 16) for x in maps_dev.split(":")) == (major, minor), maps[0]
        assert int(inode) == st.st_ino
        assert high - low == st.st_size == 96 << 20
        assert not _open_on(db.pid, redo)
        assert db.sql("SELECT @@innodb_log_file_mmap")[0][0] == "1"

        # write load: the loop device writes (binlog fdatasync, journal, and later the redo's writeback)
        bench = Sysbench(db, tables=TABLES, table_size=TABLE_SIZE, threads=2)
        try:
            bench.prepare()
            disk0, lsn0 = device_stat(db.loop_device), db.status("Innodb_lsn_current")
            bench.start(LOAD_S)
            bench.wait(timeout_s=LOAD_S + 60)
            disk1, lsn1 = device_stat(db.loop_device), db.status("Innodb_lsn_current")
        finally:
            bench.stop()
        written = disk1 - disk0
        assert written.sectors_written > 0 and written.writes > 0, written
        assert lsn1 > lsn0
        print(
            f"\n[{db.version()} on /dev/{db.loop_device} ({dev})] ib_logfile0 {maps[0][0]} {perms} {maps_dev} "
            f"inode {inode}; {LOAD_S}s of load: redo {lsn1 - lsn0} bytes (LSN), device wrote "
            f"{written.bytes_written} bytes in {written.writes} writes; {time.monotonic() - started:.1f}s"
        )


@pytest.mark.mariadb
def test_tmpfs_dev_shm_unmaps_the_redo_log(root: str) -> None:
    """11.8 maps ib_logfile0 read-write only on /dev/shm's filesystem (or DAX memory): with
    /dev/shm a tmpfs, the same server on the same disk keeps an fd and uses pwrite()."""
    with _server_on_loop_disk(root, shm_on_disk=False) as db:
        assert _mounts(db.pid)["/dev/shm"][2] == "tmpfs"
        redo = os.path.join(db.datadir, "ib_logfile0")
        assert not _redo_maps(db.pid, redo)
        assert _open_on(db.pid, redo)
        assert db.sql("SELECT @@innodb_log_file_mmap")[0][0] == "0"
        lsn0, disk0 = db.status("Innodb_lsn_current"), device_stat(db.loop_device)
        db.sql("CREATE DATABASE d; CREATE TABLE d.t (a INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO d.t VALUES (1)")
        assert db.status("Innodb_lsn_current") > lsn0
        assert (device_stat(db.loop_device) - disk0).sectors_written > 0  # the commit's redo write and fsync
