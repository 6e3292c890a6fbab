"""Doctor's server section: the target process, read from /proc and its files only
(doctor never connects to the server and never runs its binary)."""

from __future__ import annotations

from collections.abc import Callable

from . import layout, mapped_files
from .doctor_check import Check
from .doctor_error_log import (
    aio_from_log,
    check_aio_backend,
    check_error_log,
    current_run,
    error_log_location,
    kernel_aio_evidence,
    ns_pid,
    read_tail,
)
from .doctor_settings import boolean_setting, check_option_files, check_setting, server_options
from .errors import UserError
from .root_paths import shown_path
from .units import printable


def find_target(pid: int | None, finder: Callable[[], int] | None = None) -> tuple[int | None, Check]:
    """The server to inspect and the line saying which (or why none)."""
    from . import target

    if pid is None:
        try:
            pid = (finder or target.find_server)()
        except UserError as exc:
            message = str(exc)
            if message.startswith("no running"):
                return None, Check("server", "skip", "no mysqld or mariadbd is running", section="server")
            return None, Check(
                "server", "warn", message, "give the server's pid: mysqlio doctor -p PID", section="server"
            )
        explicit = False
    else:
        explicit = True
        pid = target.tgid_of(pid)  # a thread id names its process, as in top
    if not target.is_alive(pid):
        return None, Check(
            "server", "fail", f"no process with pid {pid}", "check the pid (pgrep -a 'mysqld|mariadbd')",
            required=explicit, section="server",
        )  # fmt: skip
    name = target.process_name(pid)
    exe = layout.read_link(f"/proc/{pid}/exe")
    if name not in target.SERVER_NAMES:
        return None, Check(
            "server",
            "warn",
            f"pid {pid} is {printable(name)!r}, not mysqld / mariadbd: mysqlio can trace it, "
            "but the file kinds and these server checks do not apply",
            section="server",
        )
    return pid, Check(
        "server", "ok", f"{name}, pid {pid}" + (f", {printable(exe)}" if exe else ""), value=str(pid), section="server"
    )


def _page_cache_counted() -> bool:
    """Whether this kernel has the hooks of the eBPF page-cache accounting (asked only
    when a redo log is memory-mapped: its writes are then seen as page-cache bytes)."""
    from .doctor_features import probe_kernel_features

    features = probe_kernel_features()  # an exception when BPF cannot run: the kernel section says why
    return not isinstance(features, Exception) and features.page_cache


def server_checks(pid: int | None, finder: Callable[[], int] | None = None) -> list[Check]:
    found, head = find_target(pid, finder)
    if found is None:
        return [head]
    lay = layout.read_layout(found)
    checks = [head]
    if lay.version:
        checks.append(Check("version", "ok", lay.version, value=lay.version, section="server"))
    else:
        checks.append(
            Check(
                "version",
                "warn",
                f"unknown: /proc/{found}/exe is unreadable or holds no version string",
                "run doctor as root",
                section="server",
            )
        )
    datadir = shown_path(lay.datadir, lay.root) if lay.datadir else None  # as the server names it
    checks.append(
        Check("datadir", "ok", printable(datadir), value=datadir, section="server")
        if datadir
        else Check(
            "datadir", "warn", f"unknown: /proc/{found}/cwd is unreadable", "run doctor as root", section="server"
        )
    )
    options = server_options(found, lay.version)
    checks.append(check_option_files([shown_path(p, lay.root) for p in lay.option_files], options.unreadable))
    readable_from, shown, why = error_log_location(found, lay.log_error)
    checks.append(check_error_log(shown, readable_from, why))
    log_backend = log_line = log_problem = None
    run = b""
    if readable_from:
        try:
            run, how = current_run(read_tail(readable_from), ns_pid(found))
            log_backend, log_line = aio_from_log(run)
            if not log_backend:
                log_problem = f"the error log names no AIO backend in {how}"
        except OSError as exc:
            log_problem = f"cannot read the error log: {exc.strerror}"
    else:
        log_problem = "no readable error log"
    native = options.values.get("innodb_use_native_aio")
    native = boolean_setting(native) if native is not None else None
    checks.append(check_aio_backend(log_backend, log_line, kernel_aio_evidence(found), native, log_problem))
    mapped = mapped_files.mapped_redo(found, lay)
    page_cache = _page_cache_counted() if mapped or mapped_files.log_line(run) else False
    checks.append(Check(**mapped_files.doctor_check(mapped, run, page_cache), section="server"))
    for option in (
        "innodb_flush_method",
        "innodb_use_native_aio",
        "innodb_flush_log_at_trx_commit",
        "sync_binlog",
        "performance_schema",
    ):
        context = (
            "the binary log is off" if option == "sync_binlog" and not lay.log_bin and not options.unreadable else ""
        )
        checks.append(check_setting(option, options, lay.version, context))
    return checks
