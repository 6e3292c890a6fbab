"""performance_schema's side of `mysqlio verify`: file_summary_by_instance read into
per-file counts under the paths mysqlio reports, the status counters verify reads, and the
checks that the table can be read at all.

A file renamed during the window keeps its counters in performance_schema on MySQL ≥
8.0.30 (the instance is renamed in place: OBJECT_INSTANCE_BEGIN stays): InnoDB recycles
its redo files so, `#ib_redoN` → `#ib_redoN_tmp` → `#ib_redoM`, every few seconds under
load. A delta by name would give the new name the file's whole earlier life (measured:
6,129 writes on `#ib_redo55`, of which 2,791 were `#ib_redo55_tmp`'s before the window).
So each reading also keeps, per instance, its name and the file it named then (dev,
inode, by stat); an instance that names the same file under another name at the end is
the same file renamed (`follow_renames`), and its earlier counts are taken from under its
new name. Inode and instance must both agree: a slot reused by another file, or a name
reused by another inode, is never taken for a rename."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pymysql

from ..errors import UserError
from ..layout import host_root, realpath_in_root
from ..mysql_conn import error_text, query

REDO_STATUS = "Innodb_os_log_written"
LOST_STATUS = "Performance_schema_file_instances_lost"
_PFS_QUERY = (
    "SELECT FILE_NAME, SUM_NUMBER_OF_BYTES_WRITE, COUNT_WRITE, SUM_NUMBER_OF_BYTES_READ, COUNT_READ, "
    "OBJECT_INSTANCE_BEGIN, EVENT_NAME FROM performance_schema.file_summary_by_instance"
)


@dataclass(frozen=True)
class FileIo:
    """Bytes and requests of one file (either side)."""

    write_bytes: int = 0
    write_ops: int = 0
    read_bytes: int = 0
    read_ops: int = 0

    def __add__(self, other: FileIo) -> FileIo:
        return FileIo(
            self.write_bytes + other.write_bytes,
            self.write_ops + other.write_ops,
            self.read_bytes + other.read_bytes,
            self.read_ops + other.read_ops,
        )

    def __sub__(self, other: FileIo) -> FileIo:
        return FileIo(
            self.write_bytes - other.write_bytes,
            self.write_ops - other.write_ops,
            self.read_bytes - other.read_bytes,
            self.read_ops - other.read_ops,
        )

    def __bool__(self) -> bool:
        return any((self.write_bytes, self.write_ops, self.read_bytes, self.read_ops))


PfsSnapshot = dict[str, FileIo]  # canonical path -> counts since the file's instance was created
InstanceKey = tuple[int, str]  # (OBJECT_INSTANCE_BEGIN, EVENT_NAME): one row of the table


@dataclass(frozen=True)
class Instance:
    """One row of file_summary_by_instance at one reading: the path it named and the file
    that path held then ((st_dev, st_ino); None when it could not be stat'ed)."""

    path: str
    file: tuple[int, int] | None
    io: FileIo


Instances = dict[InstanceKey, Instance]


def file_of(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def follow_renames(before: PfsSnapshot, instances_before: Instances, instances_after: Instances) -> PfsSnapshot:
    """`before` with the counts of every instance renamed since moved to its name in the
    after reading: same instance, another name, and both names the same file (inode)."""
    moved: PfsSnapshot = {}
    out = dict(before)
    for key, was in instances_before.items():
        now = instances_after.get(key)
        if now is None or now.path == was.path or was.file is None or was.file != now.file:
            continue
        left = out.get(was.path, FileIo()) - was.io
        if left:
            out[was.path] = left
        else:
            out.pop(was.path, None)
        moved[now.path] = moved.get(now.path, FileIo()) + was.io
    for path, io in moved.items():
        out[path] = out.get(path, FileIo()) + io
    return out


PfsRow = tuple[Any, Any, Any, Any, Any, Any, Any]  # _PFS_QUERY's columns, in its order


def instances_from_rows(
    rows: Iterable[PfsRow],
    datadir: str,
    canonical: Callable[[str], str] = os.path.normpath,
    stat: Callable[[str], tuple[int, int] | None] = file_of,
) -> Instances:
    """file_summary_by_instance rows (FILE_NAME, bytes written, writes, bytes read, reads,
    OBJECT_INSTANCE_BEGIN, EVENT_NAME) -> per instance; relative names are relative to the
    datadir; each path stat'ed once."""
    out: Instances = {}
    files: dict[str, tuple[int, int] | None] = {}
    for name, wbytes, wcount, rbytes, rcount, address, event in rows:
        path = canonical(os.path.join(datadir, str(name)))
        if path not in files:
            files[path] = stat(path)
        io = FileIo(int(wbytes), int(wcount), int(rbytes), int(rcount))
        out[(int(address), str(event))] = Instance(path, files[path], io)
    return out


def snapshot_of(instances: Instances) -> PfsSnapshot:
    """Per path: rows of the same file (one per instrument) summed."""
    out: PfsSnapshot = {}
    for one in instances.values():
        out[one.path] = out.get(one.path, FileIo()) + one.io
    return out


def summary_delta(before: Mapping[str, FileIo], after: Mapping[str, FileIo]) -> dict[str, FileIo]:
    """Per-path difference of two snapshots (a path missing on one side counts 0; zero rows dropped)."""
    out = {}
    for path in before.keys() | after.keys():
        diff = after.get(path, FileIo()) - before.get(path, FileIo())
        if diff:
            out[path] = diff
    return out


def _once_per_name(resolve: Callable[[str], str]) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def canonical(path: str) -> str:
        found = cache.get(path)
        if found is None:
            found = cache[path] = resolve(path)
        return found

    return canonical


def rooted_paths(host: str, proc_root: str) -> Callable[[str], str]:
    """A server path -> the canonical path here, for a server whose root is the
    directory `host` here, readable through `proc_root` (its /proc/PID/root):
    symbolic links resolved inside that root, `host` prepended. "" for `host`:
    our own root, os.path.realpath. Once per name."""
    if not host:
        return _once_per_name(os.path.realpath)
    return _once_per_name(lambda path: host + realpath_in_root(proc_root, path))


def server_paths(pid: int) -> Callable[[str], str]:
    """The server's name for a file -> the path mysqlio reports for it.

    performance_schema names files as the server sees them, built from its
    configured (maybe symlinked) datadir; mysqlio's paths are canonical paths
    here. A server in another root (chroot, container) names its files inside
    that root: they are resolved there and given under the root's path here
    (mysqlio.layout.host_root), as read_layout() gives the server's layout."""
    return rooted_paths(host_root(pid), f"/proc/{pid}/root")


def read_file_summary(
    conn: pymysql.connections.Connection, datadir: str, canonical: Callable[[str], str]
) -> tuple[PfsSnapshot, Instances]:
    """Per path, and per instance with the file its path held."""
    rows = [
        (
            r["FILE_NAME"],
            r["SUM_NUMBER_OF_BYTES_WRITE"],
            r["COUNT_WRITE"],
            r["SUM_NUMBER_OF_BYTES_READ"],
            r["COUNT_READ"],
            r["OBJECT_INSTANCE_BEGIN"],
            r["EVENT_NAME"],
        )
        for r in query(conn, _PFS_QUERY)
    ]
    instances = instances_from_rows(rows, datadir, canonical)
    return snapshot_of(instances), instances


def status_value(conn: pymysql.connections.Connection, name: str) -> int | None:
    rows = query(conn, "SHOW GLOBAL STATUS WHERE Variable_name = %s", (name,))
    try:
        return int(rows[0]["Value"]) if rows else None
    except (TypeError, ValueError):
        return None


def check_performance_schema(conn: pymysql.connections.Connection, who: str) -> list[str]:
    """UserError when the table cannot be read; warnings when counts may be missing."""
    rows = query(conn, "SHOW GLOBAL VARIABLES WHERE Variable_name = 'performance_schema'")
    if not rows or str(rows[0]["Value"]).upper() not in ("ON", "1"):
        raise UserError(
            "performance_schema is OFF on this server, so there is nothing to compare with; "
            "set performance_schema=ON in the [mysqld] section of its option file and restart it "
            "(it cannot be switched on at run time)"
        )
    try:
        query(conn, "SELECT FILE_NAME FROM performance_schema.file_summary_by_instance LIMIT 1")
    except pymysql.MySQLError as exc:
        raise UserError(
            f"{who} cannot read performance_schema.file_summary_by_instance: {error_text(exc)}; "
            "GRANT SELECT ON performance_schema.* to that user"
        ) from None
    warnings = []
    off = query(
        conn,
        "SELECT NAME FROM performance_schema.setup_instruments WHERE NAME LIKE 'wait/io/file/%' AND ENABLED = 'NO'",
    )
    if off:
        names = ", ".join(str(r["NAME"]) for r in off[:5]) + (", ..." if len(off) > 5 else "")
        warnings.append(
            f"{len(off)} file instruments are disabled in performance_schema.setup_instruments ({names}); their files count 0 there"
        )
    return warnings
