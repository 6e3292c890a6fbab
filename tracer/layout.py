"""Where a running MySQL / MariaDB server keeps its files, read without credentials.

`read_layout(pid)` merges what mysqld itself merges, later sources winning:
the option files it reads (`--defaults-file` alone, else /etc/my.cnf,
/etc/mysql/my.cnf, SYSCONFDIR variants, $MARIADB_HOME|$MYSQL_HOME/my.cnf and
`--defaults-extra-file`; `!include` / `!includedir` followed; ~/.my.cnf is not
read), then /proc/PID/cmdline, then MySQL 8's `mysqld-auto.cnf` (SET PERSIST).
mysqld chdir()s to its datadir, so /proc/PID/cwd *is* the datadir and the base
of relative paths. Every unreadable source is skipped; nothing raises.

A server in another root (chroot, container: /proc/PID/root is not our /) has
its option files read through /proc/PID/root, symbolic links resolved inside
that root, and every path of the layout given as a path *here* (`host_root()`
prepended), so they name the files mysqlio reports: the chroot directory (or,
for a mount namespace cloned from ours, the directory /proc/PID/root links to)
when that is where the kernel names its files, else /proc/PID/root itself.

Default names the server derives (bare `log_bin`, default relay log) are
filled in only where they are certain (MariaDB: from the pid file name or
`log_basename`; MySQL 8: `binlog`); otherwise they stay None and the basename
rules of `mysqlio.classify` apply. The version is read from strings in the
binary, which is never executed.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .option_files import OFF, MergedOptions, apply_options, merge_options, persisted_options
from .root_paths import realpath_in_root

_MAX_SCAN = 512 << 20  # bytes of the binary searched for the version
_SERVER_EXE = re.compile(r"(mysqld|mariadbd)([-.][\w.-]*)?")


@dataclass
class ServerLayout:
    """A server's files. Paths are absolute, as seen here (`root` prepended); None: unknown."""

    datadir: str | None = None
    log_bin: bool = False  # binary log enabled (the name may still be unknown)
    log_bin_basename: str | None = None  # binlogs are <basename>.NNNNNN
    log_bin_index: str | None = None
    relay_log_basename: str | None = None  # relay logs <basename>[-channel].NNNNNN
    relay_log_index: str | None = None  # channel indexes insert -channel before the extension
    master_info_file: str | None = None  # as configured (default master.info); -channel before the extension
    relay_log_info_file: str | None = None  # as configured (default relay-log.info); the same
    log_error: str | None = None
    slow_log: str | None = None
    general_log: str | None = None
    tc_log: str | None = None
    data_files: list[str] = field(default_factory=list)  # as configured: names or absolute paths
    data_home_dir: str | None = None
    log_group_home_dir: str | None = None
    undo_dir: str | None = None
    temp_data_files: list[str] = field(default_factory=list)  # as configured
    doublewrite_dir: str | None = None
    doublewrite_file: str | None = None  # Percona 5.7 innodb_parallel_doublewrite_path
    tmpdir: list[str] = field(default_factory=list)  # tmpdir (':'-separated; default $TMPDIR or /tmp), innodb_tmpdir
    version: str | None = None
    option_files: list[str] = field(default_factory=list)  # option files actually read, in order
    root: str = ""  # the server's root directory as a path here; "" when it is ours


def _strip_ext(name: str) -> str:
    """Drop the extension of the last path component (mysys fn_ext)."""
    head, base = os.path.split(name)
    return os.path.join(head, base.rsplit(".", 1)[0]) if "." in base else name


def _with_ext(name: str, ext: str) -> str:
    """Add `ext` when the last component has no extension (mysys fn_format)."""
    return name if "." in os.path.basename(name) else name + ext


def _file_names(path_spec: str | None) -> list[str]:
    """'ibdata1:12M;ibdata2:1G:autoextend' -> ['ibdata1', 'ibdata2']."""
    names = (part.split(":", 1)[0].strip() for part in (path_spec or "").split(";"))
    return [name for name in names if name]


# -- assembling ----------------------------------------------------------------


def layout_from(
    cmdline: Sequence[str],
    cwd: str | None = None,
    *,
    version: str | None = None,
    exe: str | None = None,
    root: str = "",
    environ: Mapping[str, str] | None = None,
    realpath: Callable[[str], str] = os.path.normpath,
    host_root: str = "",
) -> ServerLayout:
    """The layout of a server with this argv and working directory (both as the server sees them).

    `root` prefixes every absolute file read (the server's /proc/PID/root);
    `environ` is the server's environment (MYSQL_HOME etc.); `realpath`
    canonicalises paths the way the kernel will report them (for a server in
    another root: resolved in that root, `host_root` prepended); `host_root`
    also prefixes the option files listed.
    """
    merged = merge_options(cmdline, version=version, exe=exe, root=root, environ=environ)
    opts, files = merged.values, merged.files
    datadir = cwd or _resolve(opts.get("datadir"), opts.get("basedir"), os.path.normpath)  # the server's name
    if (
        datadir
        and "no_defaults" not in merged.meta
        and opts.get("persisted_globals_load", "ON").upper() not in ("OFF", "0")
    ):
        auto = os.path.join(datadir, "mysqld-auto.cnf")
        try:
            with open(files.real(auto), encoding="utf-8") as f:
                apply_options(opts, persisted_options(f.read()))
            files.files.append(auto)
        except (OSError, ValueError):
            pass
    if not opts.get("tmpdir") or opts["tmpdir"] == OFF:
        opts["tmpdir"] = (environ or {}).get("TMPDIR") or "/tmp"  # mysqld's own default
    layout = _build(opts, os.path.normpath(datadir) if datadir else None, merged.flavor, version, realpath)
    layout.option_files = [host_root + path for path in files.files]
    layout.root = host_root
    return layout


def _resolve(value: str | None, base: str | None, realpath: Callable[[str], str]) -> str | None:
    """Absolute, canonical path of an option value (relative to `base`); None if unset."""
    if not value or value == OFF:
        return None
    if not os.path.isabs(value):
        if not base or base == OFF or not os.path.isabs(base):
            return None
        value = os.path.join(base, value)
    return realpath(value)


def _build(
    opts: dict[str, str], datadir: str | None, flavor: str | None, version: str | None, rp: Callable[[str], str]
) -> ServerLayout:
    """Turn the merged options into a ServerLayout."""

    def val(name: str) -> str | None:
        value = opts.get(name)
        return None if value in (None, OFF, "") else value

    def path(value: str | None) -> str | None:
        return _resolve(value, datadir, rp)

    lay = ServerLayout(datadir=rp(datadir) if datadir else None, version=version)
    pid_stem = None  # MariaDB names default logs after the pid file (verified on 10.11)
    pid_file = val("pid_file") or (opts["_log_basename"] + ".pid" if val("_log_basename") else None)
    if flavor == "mariadb" and pid_file:
        pid_stem = _strip_ext(os.path.basename(pid_file))
    log_bin = opts.get("log_bin")
    major = re.match(r"\d+", version or "")
    if log_bin is None and flavor == "mysql" and major and int(major[0]) >= 8:
        lay.log_bin, lay.log_bin_basename = True, path("binlog")  # on by default since 8.0
    elif log_bin is not None and log_bin != OFF:
        lay.log_bin = True
        lay.log_bin_basename = path(_strip_ext(log_bin) if log_bin else pid_stem and f"{pid_stem}-bin")
    if lay.log_bin:
        index = val("log_bin_index")
        lay.log_bin_index = (
            path(_with_ext(index, ".index")) if index else lay.log_bin_basename and lay.log_bin_basename + ".index"
        )
    relay = val("relay_log")
    lay.relay_log_basename = path(_strip_ext(relay) if relay else pid_stem and f"{pid_stem}-relay-bin")
    relay_index = val("relay_log_index")
    lay.relay_log_index = (
        path(_with_ext(relay_index, ".index"))
        if relay_index
        else lay.relay_log_basename and lay.relay_log_basename + ".index"
    )
    lay.master_info_file = path(val("master_info_file"))
    lay.relay_log_info_file = path(val("relay_log_info_file"))
    error = val("log_error")
    lay.log_error = path(_with_ext(error, ".err")) if error else None
    lay.slow_log = path(val("slow_query_log_file"))
    lay.general_log = path(val("general_log_file"))
    lay.tc_log = path(val("log_tc"))
    lay.data_files = [rp(n) if os.path.isabs(n) else n for n in _file_names(val("innodb_data_file_path"))]
    lay.temp_data_files = [rp(n) if os.path.isabs(n) else n for n in _file_names(val("innodb_temp_data_file_path"))]
    lay.data_home_dir = path(val("innodb_data_home_dir"))
    lay.log_group_home_dir = path(val("innodb_log_group_home_dir"))
    lay.undo_dir = path(val("innodb_undo_directory"))
    lay.doublewrite_dir = path(val("innodb_doublewrite_dir"))
    lay.doublewrite_file = path(val("innodb_parallel_doublewrite_path"))
    tmp = [*(val("tmpdir") or "").split(":"), val("innodb_tmpdir") or ""]
    lay.tmpdir = list(dict.fromkeys(p for p in map(path, tmp) if p))
    return lay


# -- a live process ------------------------------------------------------------


def read_link(path: str) -> str | None:
    try:
        return os.readlink(path).removesuffix(" (deleted)")
    except OSError:
        return None


def _read_environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    pairs = (item.decode(errors="surrogateescape").partition("=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _root(pid: int) -> tuple[str, Callable[[str], str]]:
    """How to read the server's files: a path prefix and a path canonicaliser
    (server path -> the canonical path here, see host_root())."""
    proc_root = f"/proc/{pid}/root"
    try:
        same = _same_file(os.stat(proc_root), os.stat("/"))
    except PermissionError:
        same = False  # its root unreadable (no CAP_SYS_PTRACE): read none of its files, not ours
    except OSError:
        same = True  # gone: assume the usual, our own root
    if same:
        return "", os.path.realpath
    host = host_root(pid)
    return proc_root, lambda path: host + realpath_in_root(proc_root, path)


def host_root(pid: int) -> str:
    """The server's root directory as a path here: "" when it is ours.

    The kernel names a file from the walk up to the root of the file's mount
    namespace. A server chrooted in our mount namespace, or in one cloned from
    ours (unshare --mount), has its files named under its root directory's path
    here, which is where /proc/PID/root links to: that path, when it is that
    directory. Otherwise (a container's own root mount, out of our reach) the
    names are the server's own, readable here under /proc/PID/root."""
    proc_root = f"/proc/{pid}/root"
    try:
        st = os.stat(proc_root)
        if _same_file(st, os.stat("/")):
            return ""
    except OSError:
        return ""
    try:
        link = os.readlink(proc_root)
        if link != "/" and os.path.isabs(link) and _same_file(os.stat(link), st):
            return os.path.normpath(link)
    except OSError:
        pass
    return proc_root


def to_server_path(path: str, host: str) -> str:
    """The server's name for a path here that lies in its root `host` (unchanged otherwise)."""
    if not host:
        return path
    if path == host:
        return "/"
    return path[len(host) :] if path.startswith(host + "/") else path


def _read_cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="surrogateescape") for a in f.read().split(b"\0")[:-1]]


def read_options(pid: int, version: str | None) -> MergedOptions | None:
    """The options of process `pid` as mysqld merges them from its option files and
    command line (not mysqld-auto.cnf); None when its command line cannot be read."""
    try:
        cmdline = _read_cmdline(pid)
    except OSError:
        return None
    root, _ = _root(pid)
    exe = read_link(f"/proc/{pid}/exe")
    return merge_options(cmdline, version=version, exe=exe, root=root, environ=_read_environ(pid))


def read_layout(pid: int, cwd_first: bool = True) -> ServerLayout:
    """The layout of the mysqld / mariadbd process `pid`; empty for any other process.
    cwd_first False: the datadir its options give, not its working directory (a server
    just started, before it chdir()s to its datadir: mysqlio.follow)."""
    proc = f"/proc/{pid}"
    try:
        cmdline = _read_cmdline(pid)
    except OSError:
        return ServerLayout()
    exe = read_link(f"{proc}/exe")
    name = os.path.basename(exe or (cmdline[0] if cmdline else ""))
    if not _SERVER_EXE.fullmatch(name):
        return ServerLayout()
    root, realpath = _root(pid)
    host = host_root(pid) if root else ""
    cwd = read_link(f"{proc}/cwd") if cwd_first else None
    return layout_from(
        cmdline,
        to_server_path(cwd, host) if cwd else None,
        version=binary_version(f"{proc}/exe"),
        exe=exe,
        root=root,
        environ=_read_environ(pid),
        realpath=realpath,
        host_root=host,
    )


# -- version from the binary ---------------------------------------------------

_version_cache: dict[tuple[int, int, int, int], str | None] = {}
_MARIADB_VERSION = re.compile(rb"\d{1,2}\.\d{1,2}\.\d{1,3}-MariaDB")
_MYSQL_VERSION = re.compile(rb"(?:5\.[5-7]|8\.[0-4]|9\.\d{1,2})\.\d{1,3}(?:-\d+(?:\.\d+)*)?")


def _mariadb_version(data: mmap.mmap) -> str | None:
    """The NUL-delimited string 'X.Y.Z-MariaDB' (MYSQL_SERVER_VERSION) in a MariaDB binary."""
    pos = data.find(b"-MariaDB\0")
    while pos >= 0:
        start = data.rfind(b"\0", max(0, pos - 16), pos)
        if start >= 0 and _MARIADB_VERSION.fullmatch(data[start + 1 : pos + 8]):
            return data[start + 1 : pos + 8].decode()
        pos = data.find(b"-MariaDB\0", pos + 1)
    return None


def _mysql_version(data: mmap.mmap) -> str | None:
    """A MySQL / Percona version: only if all NUL-delimited 'X.Y.Z[-N]' strings agree on X.Y.Z."""
    found: set[str] = set()
    for lead in (b"\x005.", b"\x008.", b"\x009."):
        pos = data.find(lead)
        while pos >= 0 and len(found) < 64:
            end = data.find(b"\0", pos + 1, pos + 24)
            if end > 0 and _MYSQL_VERSION.fullmatch(data[pos + 1 : end]):
                found.add(data[pos + 1 : end].decode())
            pos = data.find(lead, pos + 1)
    if len({v.split("-")[0] for v in found}) != 1:
        return None
    return max(found, key=len)


def binary_version(path: str) -> str | None:
    """Server version found in the binary at `path` (read, never run); cached per file."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            if key in _version_cache:
                return _version_cache[key]
            version = None
            if st.st_size:
                with mmap.mmap(f.fileno(), min(st.st_size, _MAX_SCAN), access=mmap.ACCESS_READ) as data:
                    version = _mariadb_version(data) or _mysql_version(data)
    except (OSError, ValueError):
        return None
    _version_cache[key] = version
    return version
