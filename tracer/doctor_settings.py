"""Doctor's server settings: the options that decide how a server writes, as configured
(option files and command line) or else compiled in."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import layout
from .doctor_check import Check
from .option_files import OFF, norm_option
from .units import printable


@dataclass
class ServerOptions:
    """The options mysqld merged from its option files and command line (names
    normalised as in mysqlio.option_files; switched-off options read "OFF")."""

    values: dict[str, str]
    on_cmdline: set[str]  # known even when option files cannot be read
    unreadable: list[str]  # option files that exist but could not be read (permissions)


def _unreadable(path: str) -> bool:
    try:
        with open(path, "rb"):
            return False
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True


def server_options(pid: int, version: str | None) -> ServerOptions:
    """Read the server's options as mysqld does (option files, then its command line)."""
    merged = layout.read_options(pid, version)
    if merged is None:
        return ServerOptions({}, set(), [f"/proc/{pid}/cmdline"])
    files = merged.files
    unreadable = [p for p in merged.tried if p not in files.files and _unreadable(files.real(p))]
    return ServerOptions(
        {k: ("OFF" if v == OFF else v) for k, v in merged.values.items()},
        {norm_option(name)[0] for name, _ in merged.argv},
        unreadable,
    )


_BOOL_VALUES = {
    "": "ON",
    "1": "ON",
    "ON": "ON",
    "TRUE": "ON",
    "YES": "ON",
    "0": "OFF",
    "OFF": "OFF",
    "FALSE": "OFF",
    "NO": "OFF",
}


def boolean_setting(value: str) -> str:
    """ON / OFF for the ways a boolean option can be written (other values unchanged)."""
    return _BOOL_VALUES.get(value.upper(), value)


def _version_key(version: str | None) -> tuple[str | None, tuple[int, ...]]:
    if not version:
        return None, ()
    numbers = tuple(int(n) for n in re.findall(r"\d+", version.split("-")[0])[:3])
    return ("mariadb" if "MariaDB" in version else "mysql"), numbers


def server_default(option: str, version: str | None) -> str | None:
    """The compiled-in default of a few settings on Linux, where it is known for this version."""
    flavor, v = _version_key(version)
    if flavor is None or not v:
        return None
    if option == "innodb_flush_method":
        if flavor == "mariadb":
            return "O_DIRECT" if v >= (10, 6) else "fsync"
        return "O_DIRECT" if v >= (8, 4) else "fsync"
    if option == "innodb_flush_log_at_trx_commit":
        return "1"
    if option == "innodb_use_native_aio":
        return "ON"
    if option == "sync_binlog":
        return "1" if flavor == "mysql" and v >= (5, 7, 7) else "0"
    if option == "performance_schema":
        return "ON" if flavor == "mysql" and v >= (5, 6, 6) else "OFF"
    return None


SETTING_NOTES = {
    "innodb_flush_method": "how InnoDB opens and syncs data files",
    "innodb_use_native_aio": "OFF means simulated AIO",
    "innodb_flush_log_at_trx_commit": "1: redo synced at each commit",
    "sync_binlog": "N: binlog synced every N commit groups, 0: never",
    "performance_schema": "needed by mysqlio verify",
}
BOOLEAN_SETTINGS = {"innodb_use_native_aio", "performance_schema"}


def check_setting(option: str, options: ServerOptions, version: str | None, context: str = "") -> Check:
    """A server setting as configured, else its default; `context` is added to the detail."""
    raw = options.values.get(option)
    if raw is None and options.unreadable and option not in options.on_cmdline:
        return Check(
            option,
            "warn",
            f"unknown: cannot read {', '.join(printable(p) for p in options.unreadable)}",
            "run doctor as root",
            section="server",
        )
    value = raw.strip() if raw is not None else None
    if value is not None and option in BOOLEAN_SETTINGS:
        value = boolean_setting(value)
    source = "configured"
    if value is None:
        value = server_default(option, version)
        source = "default"
    detail = f"{value} ({source})" if value is not None else "not set: the default of this server version"
    if option == "performance_schema" and value == "OFF":
        return Check(
            option,
            "warn",
            f"{detail}: mysqlio verify cannot cross-check the counts",
            "performance_schema = ON in [mysqld] and restart (only mysqlio verify needs it)",
            value=value,
            section="server",
        )
    note = SETTING_NOTES.get(option)
    detail += f"; {note}" if note else ""
    return Check(option, "ok", detail + (f" ({context})" if context else ""), value=value, section="server")


def check_option_files(read: Sequence[str], unreadable: Sequence[str]) -> Check:
    shown = ", ".join(printable(p) for p in read) or "none"
    if unreadable:
        return Check(
            "option files",
            "warn",
            f"read: {shown}; cannot read: {', '.join(printable(p) for p in unreadable)}",
            "run doctor as root",
            section="server",
        )
    return Check("option files", "ok", shown, section="server")
