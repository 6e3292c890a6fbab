"""How mysqld merges its options: option files (groups, `!include`, `!includedir`),
then its command line; MySQL 8's `mysqld-auto.cnf` (SET PERSIST) parsed for the layout.

Names are normalised as mysqld does (`-` = `_`, `loose-` dropped, aliases); an option
switched off with `skip-` / `disable-` holds OFF. Unreadable files are skipped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .root_paths import in_root

OFF = "\0off"  # value of an option switched off with skip- / disable-
_MAX_INCLUDE_DEPTH = 10
SYSCONF_DIRS = ("/etc", "/etc/mysql", "/usr/etc", "/usr/local/etc", "/usr/local/mysql/etc")
_VERSION_GROUP = re.compile(r"(mysqld|mariadb|mariadbd)-(\d+\.\d+)")
_ALIASES = {"log_slow_query_file": "slow_query_log_file", "log_slow_queries": "slow_query_log_file"}
# options that take the next argv word as their value when given without '='
_NEEDS_ARG = {
    "datadir", "basedir", "tmpdir", "pid_file", "log_basename", "log_bin_index", "relay_log",
    "relay_log_index", "master_info_file", "relay_log_info_file", "general_log_file", "slow_query_log_file",
    "log_tc", "innodb_tmpdir",
    "innodb_data_file_path", "innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory",
    "innodb_temp_data_file_path", "innodb_doublewrite_dir", "innodb_parallel_doublewrite_path",
    "defaults_file", "defaults_extra_file", "defaults_group_suffix",
}  # fmt: skip
_SHORT = {"-h": "datadir", "-b": "basedir", "-t": "tmpdir"}


# -- option files --------------------------------------------------------------


def _remove_end_comment(line: str) -> str:
    """Cut a '#' comment that is not inside quotes (as mysys does)."""
    quote, escape = "", False
    for i, ch in enumerate(line):
        if ch in "'\"" and not escape:
            quote = ch if not quote else ("" if quote == ch else quote)
        if not quote and ch == "#":
            return line[:i]
        escape = bool(quote) and ch == "\\" and not escape
    return line


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "s": " ", '"': '"', "'": "'", "\\": "\\"}


def _option_value(value: str) -> str:
    """Trim, unquote and unescape an option-file value."""
    value = value.strip()
    if len(value) > 1 and value[0] in "'\"" and value[-1] == value[0]:
        value = value[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[0]), value)


class OptionFiles:
    """Reads option files (through `root`), keeping options of the wanted groups in order."""

    def __init__(self, root: str, wanted: Callable[[str], bool]) -> None:
        self.root = root
        self.wanted = wanted
        self.options: list[tuple[str, str | None]] = []
        self.files: list[str] = []

    def real(self, path: str) -> str:
        """Where the server's `path` is readable from here (its links resolved in its root)."""
        return in_root(self.root, path)

    def read(self, path: str, depth: int = 0) -> None:
        if depth > _MAX_INCLUDE_DEPTH:
            return
        try:
            with open(self.real(path), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except (OSError, ValueError):
            return
        self.files.append(path)
        in_group = False
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            directive = re.fullmatch(r"!(include|includedir)\s+(.+)", line)
            if directive:
                target = os.path.join(os.path.dirname(path), directive[2].strip())
                if directive[1] == "include":
                    self.read(target, depth + 1)
                else:
                    self._read_dir(target, depth + 1)
            elif line[0] == "[":
                end = line.find("]")
                in_group = end > 0 and self.wanted(line[1:end])
            elif in_group:
                line = _remove_end_comment(line).rstrip()
                name, sep, value = line.partition("=")
                self.options.append((name.strip(), _option_value(value) if sep else None))

    def _read_dir(self, path: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(self.real(path)))
        except OSError:
            return
        for name in names:
            full = os.path.join(path, name)
            if name.endswith(".cnf") and os.path.isfile(self.real(full)):
                self.read(full, depth)


def server_flavor(version: str | None, exe: str | None) -> str | None:
    """'mariadb', 'mysql' or None (unknown)."""
    if version:
        return "mariadb" if "MariaDB" in version else "mysql"
    if exe and os.path.basename(exe).startswith("mariadbd"):
        return "mariadb"
    return None


def group_filter(version: str | None, flavor: str | None, suffix: str) -> Callable[[str], bool]:
    """Which [groups] the server reads (all version groups when the version is unknown)."""
    base = {"mysqld", "server"}
    prefixes = {"mysqld"}
    if flavor != "mysql":
        base |= {"mariadb", "mariadbd", "client-server", "galera"}
        prefixes |= {"mariadb", "mariadbd"}
    major_minor = re.match(r"\d+\.\d+", version or "")
    suffix = suffix.lower()

    def wanted(group: str) -> bool:
        names = {group.strip().lower()}
        if suffix:
            names |= {n[: -len(suffix)] for n in names if n.endswith(suffix)}
        for name in names:
            vgroup = _VERSION_GROUP.fullmatch(name)
            if name in base or (
                vgroup and vgroup[1] in prefixes and (major_minor is None or vgroup[2] == major_minor[0])
            ):
                return True
        return False

    return wanted


# -- command line and option values ------------------------------------------


def parse_cmdline(cmdline: Sequence[str]) -> list[tuple[str, str | None]]:
    """mysqld's argv as (option name, value or None) in order."""
    out: list[tuple[str, str | None]] = []
    args = list(cmdline[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if arg.startswith("--"):
            name, sep, value = arg[2:].partition("=")
            if not sep and norm_option(name)[0] in _NEEDS_ARG and i < len(args) and not args[i].startswith("-"):
                value, sep, i = args[i], "=", i + 1
            out.append((name, value if sep else None))
        elif arg[:2] in _SHORT:
            value = arg[2:]
            if not value and i < len(args):
                value, i = args[i], i + 1
            out.append((_SHORT[arg[:2]], value))
    return out


def norm_option(name: str) -> tuple[str, bool]:
    """Canonical option name ('-' = '_', loose- dropped, aliases) and whether it is switched off."""
    n = name.strip().lower().replace("-", "_")
    n = n.removeprefix("loose_")
    off = n.startswith(("skip_", "disable_"))
    if off:
        n = n.split("_", 1)[1]
    n = n.removeprefix("enable_")
    return _ALIASES.get(n, n), off


def apply_options(opts: dict[str, str], items: Sequence[tuple[str, str | None]]) -> None:
    """Apply options in order; later ones win. A bare option is stored as ''."""
    for raw, value in items:
        name, off = norm_option(raw)
        if off:
            opts[name] = OFF
        elif name == "log_basename" and value:
            # MariaDB: sets these names at this point of the option list
            opts.update(
                _log_basename=value,
                log_error=f"{value}.err",
                slow_query_log_file=f"{value}-slow.log",
                general_log_file=f"{value}.log",
                log_bin_index=f"{value}-bin.index",
                relay_log=f"{value}-relay-bin",
                relay_log_index=f"{value}-relay-bin.index",
            )
        else:
            opts[name] = value or ""


def persisted_options(text: str) -> list[tuple[str, str]]:
    """(name, value) pairs of MySQL 8's mysqld-auto.cnf (any format version); ValueError if not JSON."""
    found: list[tuple[str, str]] = []
    stack = [json.loads(text)]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        for key, val in node.items():
            if isinstance(val, dict) and "Value" in val:
                found.append((key, str(val["Value"])))
            elif isinstance(val, dict):
                stack.append(val)
    return found


# -- merged ----------------------------------------------------------------------


@dataclass
class MergedOptions:
    """A server's options from its option files, then its command line (later ones win)."""

    values: dict[str, str]
    argv: list[tuple[str, str | None]]  # the command line's options, in order
    meta: dict[str, str]  # the command line alone (--no-defaults, --defaults-file, ...)
    flavor: str | None  # 'mariadb', 'mysql' or None (unknown)
    files: OptionFiles  # .files: the option files read, in order
    tried: list[str]  # the option files mysqld looks for, in order (read or not)


def merge_options(
    cmdline: Sequence[str],
    *,
    version: str | None = None,
    exe: str | None = None,
    root: str = "",
    environ: Mapping[str, str] | None = None,
) -> MergedOptions:
    """Read the option files mysqld reads (through `root`) and apply its argv over them:
    `--defaults-file` alone, else /etc/my.cnf and the SYSCONFDIR variants,
    $MARIADB_HOME|$MYSQL_HOME/my.cnf and `--defaults-extra-file`; none with `--no-defaults`."""
    env = environ or {}
    argv = parse_cmdline(cmdline)
    meta: dict[str, str] = {}
    apply_options(meta, argv)
    flavor = server_flavor(version, exe or (cmdline[0] if cmdline else None))
    suffix = meta.get("defaults_group_suffix") or env.get("MARIADB_GROUP_SUFFIX") or env.get("MYSQL_GROUP_SUFFIX", "")
    files = OptionFiles(root, group_filter(version, flavor, suffix))
    tried: list[str] = []
    if "no_defaults" not in meta:
        if meta.get("defaults_file"):
            tried.append(meta["defaults_file"])
        else:
            home = env.get("MARIADB_HOME") or env.get("MYSQL_HOME")
            dirs = [*SYSCONF_DIRS, *([home] if home else [])]
            tried += dict.fromkeys(os.path.join(d, "my.cnf") for d in dirs)
            if meta.get("defaults_extra_file"):
                tried.append(meta["defaults_extra_file"])
    for path in tried:
        files.read(path)
    values: dict[str, str] = {}
    apply_options(values, files.options)
    apply_options(values, argv)
    return MergedOptions(values, argv, meta, flavor, files, tried)
