"""Command line: argument checks, then dispatch; user errors become one line."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import re
import signal
import sys

from . import __version__
from .backend import BACKENDS
from .container_select import add_selectors, apply_selectors
from .errors import BpfError, UserError
from .filters import Filters
from .kinds import KIND_HELP, KINDS
from .model import GROUPS, SERVER_GROUPS
from .view import SORT_KEYS


class _Parser(argparse.ArgumentParser):
    """argparse that fails with one line instead of the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message} (see --help)")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value > 3600:
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 3600 seconds: {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _pid(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a pid: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"not a pid: {text!r}")
    return value


def _kinds(text: str) -> frozenset[str]:
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = kinds - set(KINDS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown kind {', '.join(sorted(unknown))}; kinds: {', '.join(KINDS)}")
    return kinds


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mysqlio", description="Which files mysqld writes, reads and syncs, second by second.")
    parser.add_argument("--version", action="version", version=f"mysqlio {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    top = sub.add_parser("top", help="per-file I/O of a running server, every interval")
    top.add_argument("-p", "--pid", type=_pid, help="pid of mysqld (default: the single running mysqld/mariadbd)")
    top.add_argument("-i", "--interval", type=_positive_float, default=1.0, help="seconds between updates (default 1)")
    top.add_argument(
        "-n", "--count", type=_count, default=0, help="stop after COUNT intervals (default: run until Ctrl-C)"
    )
    top.add_argument(
        "--group",
        choices=GROUPS,
        default="file",
        help="one row per file (default), kind, table, thread; or user, connection, query (--mysql)",
    )
    top.add_argument("--sort", choices=list(SORT_KEYS), default="write", help="sort column of the live screen")
    top.add_argument("--kind", type=_kinds, default=frozenset(), help=KIND_HELP)
    top.add_argument(
        "--fold-partitions", action="store_true", help="count a partitioned table's partitions as one table"
    )
    top.add_argument(
        "--fold-regions",
        action="store_true",
        help="one row for ibdata1, not one per region (doublewrite, system, ...)",
    )
    top.add_argument(
        "--unfold-redo",
        action="store_true",
        help="one row per redo file in the live screen (MySQL's #innodb_redo files are one row by default; key o)",
    )
    top.add_argument("--match", type=_regex, help="only paths matching this regular expression")
    top.add_argument(
        "--latency",
        action="store_true",
        help="time requests and show write and sync latency p50 / p99 / max (key l toggles; untimed costs less)",
    )
    top.add_argument(
        "--follow",
        action="store_true",
        help="when mysqld exits, wait for the next server of the same name and go on tracing it",
    )
    _add_mysql_options(top)
    _add_backend(top)
    _add_stap_module(top)
    mode = top.add_mutually_exclusive_group()
    mode.add_argument("--batch", action="store_true", help="plain text, one block per interval")
    mode.add_argument("--json", action="store_true", help="one JSON object per interval, one per line")

    record = sub.add_parser("record", help="record one event per request into a trace file")
    record.add_argument("-p", "--pid", type=_pid, help="pid of mysqld (default: the single running mysqld/mariadbd)")
    record.add_argument("-o", "--output", required=True, help="trace file to write (created mode 0600)")
    record.add_argument("-d", "--duration", type=_positive_float, default=0.0, help="stop after SECONDS")
    record.add_argument("--max-size", type=_size, default=0, help="stop when the trace reaches SIZE (e.g. 500M, 2G)")
    record.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    record.add_argument(
        "--follow",
        action="store_true",
        help="when mysqld exits, wait for the next server of the same name and go on tracing it",
    )
    _add_mysql_options(record)
    _add_backend(record)
    _add_stap_module(record)

    demo = sub.add_parser("demo", help="start a throwaway MariaDB (or MySQL) under a write load and run top on it")
    demo.add_argument(
        "--server",
        choices=("mariadb", "mysql"),
        default="mariadb",
        help="the host's MariaDB (default), or Oracle MySQL 9.7 in its own root (built on first use, about 1 min)",
    )
    demo.add_argument("-i", "--interval", type=_positive_float, default=1.0, help="seconds between updates (default 1)")
    demo.add_argument(
        "-n", "--count", type=_count, default=0, help="stop after COUNT intervals (default: until Ctrl-C)"
    )
    demo.add_argument("--json", action="store_true", help="JSON lines instead of text")
    _add_trace_parsers(sub)
    _add_service_parsers(sub)
    add_selectors(sub)  # --pod, --container
    _add_stap_build_parser(sub)
    return parser


def _add_mysql_options(p: argparse.ArgumentParser, required: bool = False) -> None:
    """Read-only connection to the traced server. The password comes from the client
    option files ([client] / [mysql]) or a prompt, never from the command line."""
    g = p.add_argument_group("server connection (read-only)")
    if not required:
        g.add_argument(
            "--mysql", action="store_true", help="also sample the server's status counters (SHOW GLOBAL STATUS)"
        )
    g.add_argument(
        "--socket",
        dest="mysql_socket",
        help="unix socket of the server (default: the one the traced server listens on)",
    )
    g.add_argument("--host", dest="mysql_host", help="host of the server (default: the socket)")
    g.add_argument("--port", dest="mysql_port", type=_port, help="TCP port of the server (default 3306)")
    g.add_argument("--user", dest="mysql_user", help="user (default: from the option files, else the login name)")
    g.add_argument("--defaults-file", dest="mysql_defaults_file", help="read only this client option file")
    g.add_argument(
        "--ask-password", dest="mysql_ask_password", action="store_true", help="prompt for the password on the terminal"
    )


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    return value


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    return host, _port(port)


def _add_service_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    exporter = sub.add_parser("exporter", help="serve per-file and per-kind I/O as Prometheus metrics")
    which = exporter.add_mutually_exclusive_group()
    which.add_argument("-p", "--pid", type=_pid, help="pid of mysqld (default: the single running mysqld/mariadbd)")
    which.add_argument(
        "--all",
        action="store_true",
        help="every mysqld / mariadbd of the host, now and later, labelled by server (datadir)",
    )
    exporter.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", 9164),
        help="address:port to serve /metrics on (default 127.0.0.1:9164; localhost unless told otherwise)",
    )
    exporter.add_argument(
        "-i", "--interval", type=_positive_float, default=1.0, help="seconds between probe reads (default 1)"
    )
    exporter.add_argument(
        "--top-files", type=_count, default=20, help="files exported with their own labels (default 20)"
    )
    exporter.add_argument(
        "--no-follow", dest="follow", action="store_false", help="exit when mysqld exits instead of waiting for it"
    )
    _add_backend(exporter)

    verify = sub.add_parser("verify", help="compare per-file bytes with the server's performance_schema over a window")
    verify.add_argument("-p", "--pid", type=_pid, help="pid of mysqld (default: the single running mysqld/mariadbd)")
    verify.add_argument("-d", "--duration", type=_positive_float, default=10.0, help="window in seconds (default 10)")
    verify.add_argument("--json", action="store_true", help="one JSON object instead of text")
    _add_backend(verify)
    _add_mysql_options(verify, required=True)

    doctor = sub.add_parser(
        "doctor", help="check what works here (privileges, kernel, tools, server) and how to fix it"
    )
    doctor.add_argument("-p", "--pid", type=_pid, help="pid of mysqld to inspect (default: the single running one)")
    doctor.add_argument("--json", action="store_true", help="one JSON object instead of text")


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="eBPF or SystemTap (default auto: eBPF when the kernel has BTF, else SystemTap when stap is installed)",
    )
    p.add_argument(
        "--no-page-cache",
        action="store_true",
        help="do not count page-cache dirtying, writeback and block devices (eBPF; on by default)",
    )


def _add_stap_module(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stap-module",
        metavar="DIR_OR_KO",
        help="run the SystemTap module built by 'mysqlio stap-build' (its directory or .ko) with staprun only: "
        "no compiler or kernel headers here (implies --backend stap)",
    )


def _add_stap_build_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    build = sub.add_parser(
        "stap-build",
        help="compile the SystemTap modules for a kernel release, to run elsewhere with --stap-module",
    )
    build.add_argument(
        "--kernel",
        metavar="RELEASE",
        help="the target's kernel release (its 'uname -r'; default: this machine's); "
        "its headers must be in /lib/modules/RELEASE/build here",
    )
    build.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write the modules into")
    build.add_argument("--mode", choices=("all", "top", "record"), default="all", help="which module (default: both)")
    build.add_argument(
        "--cc",
        metavar="COMPILER",
        help="the C compiler for kbuild (default: the one the headers name, e.g. gcc-10 for Debian 11's kernels)",
    )


def _cmd_stap_build(args: argparse.Namespace) -> int:
    import platform
    import time
    from pathlib import Path

    from .stap_compile import MODES
    from .stap_modules import build_modules

    release = args.kernel or platform.release()
    modes = MODES if args.mode == "all" else (args.mode,)
    start = time.monotonic()
    manifest = build_modules(
        release,
        Path(args.output),
        modes,
        progress=lambda what: print(f"mysqlio: {what}", file=sys.stderr),
        cc=args.cc,
    )
    for mode, entry in manifest["modules"].items():
        print(f"{Path(args.output) / entry['file']}  {mode}  kernel {release}  ({entry['compile_s']:.0f} s)")
    print(
        f"mysqlio: built in {time.monotonic() - start:.0f} s; on a host running {release}, as root: "
        f"mysqlio top --stap-module {args.output}",
        file=sys.stderr,
    )
    return 0


def _output_mode(json_lines: bool, batch: bool) -> str:
    """JSON when asked; plain text when asked or not on a terminal; else the live screen."""
    if json_lines:
        return "json"
    if batch or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return "text"
    return "live"


def _size(text: str) -> int:
    from .record import parse_size

    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _target(args: argparse.Namespace) -> int:
    """The thread group to trace (-p, or the single running server), checked; a usable
    backend chosen (args.backend becomes "bpf" or "stap")."""
    from .session import choose_target

    pid, args.backend = choose_target(args.pid, args.backend, getattr(args, "stap_module", None), args.command)
    if getattr(args, "no_page_cache", False):
        from .backend import set_page_cache

        set_page_cache(False)
    return pid


def _cmd_record(args: argparse.Namespace) -> int:
    from .record import RecordOptions, run_record

    pid = _target(args)
    status = _status_sampler(args, pid)
    options = RecordOptions(
        pid=pid,
        output=args.output,
        duration_s=args.duration,
        max_size=args.max_size,
        quiet=args.quiet,
        command="mysqlio " + " ".join(sys.argv[1:]),
        backend=args.backend,
        follow=args.follow,
        status=status,
        threads=_thread_sampler(args, status),
    )
    return run_record(options)


def _cmd_demo(args: argparse.Namespace) -> int:
    from . import preflight
    from .devtools.demo import run_demo

    preflight.check_bpf_environment()
    return run_demo(args.interval, args.count, _output_mode(args.json, False), args.server)


def _mysql_wanted(args: argparse.Namespace) -> bool:
    return bool(args.mysql) or any(
        getattr(args, name)
        for name in ("mysql_socket", "mysql_host", "mysql_port", "mysql_user", "mysql_defaults_file")
    )


def _status_sampler(args: argparse.Namespace, pid: int):  # -> StatusSampler | None
    """--mysql (implied by any connection option): a connected sampler of the
    server's counters; bad credentials fail here, before the probes load."""
    if not _mysql_wanted(args):
        return None
    from .mysql_conn import ConnectionOptions, Connector
    from .server_status import StatusSampler

    args.mysql_connector = Connector.resolve(ConnectionOptions.from_args(args), pid)  # asked once
    return StatusSampler.open(args.mysql_connector)


def _thread_sampler(args: argparse.Namespace, status: object):  # -> ThreadSampler | None
    """With --mysql, the server's view of its threads (performance_schema), for user,
    connection and query; what it cannot give is said in one line on stderr."""
    group = getattr(args, "group", "file")
    if status is None:
        if group in SERVER_GROUPS:
            raise UserError(f"--group {group} needs --mysql (and performance_schema=ON on the server)")
        return None
    from .thread_sampler import ThreadSampler

    sampler = ThreadSampler.open(args.mysql_connector)
    problems = sampler.problems()
    if problems:
        what = f"--group {group}" if group in SERVER_GROUPS else "user, connection and query of threads"
        print(
            f"mysqlio: {what} needs performance_schema=ON with its thread and statement consumers: "
            f"{'; '.join(problems)}",
            file=sys.stderr,
        )
    if not sampler.usable:
        sampler.close()
        return None
    return sampler


def _cmd_top(args: argparse.Namespace) -> int:
    from .top import TopOptions, run_top

    if args.group in SERVER_GROUPS and not _mysql_wanted(args):
        raise UserError(f"--group {args.group} needs --mysql (and performance_schema=ON on the server)")
    pid = _target(args)
    status = _status_sampler(args, pid)
    options = TopOptions(
        pid=pid,
        interval_s=args.interval,
        count=args.count,
        output=_output_mode(args.json, args.batch),
        group=args.group,
        sort=args.sort,
        filters=Filters(kinds=args.kind, match=args.match),
        fold_partitions=args.fold_partitions,
        fold_regions=args.fold_regions,
        fold_redo=not args.unfold_redo,
        latency=args.latency,
        follow=args.follow,
        backend=args.backend,
        status=status,
        threads=_thread_sampler(args, status),
    )
    return run_top(options)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds: {text!r}")
    return value


def _add_trace_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace file written by mysqlio record")
    p.add_argument("--kind", type=_kinds, default=frozenset(), help=KIND_HELP)
    p.add_argument("--match", type=_regex, help="only paths matching this regular expression")
    p.add_argument("--from", dest="t_from", type=_seconds, help="only from this many seconds after the start")
    p.add_argument("--to", dest="t_to", type=_seconds, help="only before this many seconds after the start")


def _add_trace_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    report = sub.add_parser("report", help="summarise a recorded trace: per file, kind, busiest seconds")
    _add_trace_filters(report)
    report.add_argument(
        "--group",
        choices=GROUPS,
        default="file",
        help="one row per file (default), kind, table, thread; or user, connection, query (recorded with --mysql)",
    )
    report.add_argument("--per-second", action="store_true", help="add the per-second table")
    report.add_argument(
        "--latency",
        action="store_true",
        help="add the latency over time (p99 per second) of the slowest files (reads the trace twice)",
    )
    report.add_argument("--json", action="store_true", help="one JSON object instead of text")
    report.add_argument("--limit", type=_count, default=30, help="rows of the summary table (default 30, 0 = all)")

    plot = sub.add_parser("plot", help="plot bytes written per second and syncs of a recorded trace")
    _add_trace_filters(plot)
    plot.add_argument("-o", "--output", required=True, help="image to write: .png, .svg or .html")
    plot.add_argument("--by", choices=("kind", "file"), default="kind", help="stack by kind (default) or by file")
    plot.add_argument("--top", type=_count, default=8, help="layers shown; the rest are summed (default 8)")
    plot.add_argument("--title", help="title of the plot")

    export = sub.add_parser("export", help="write a recorded trace's events as CSV, JSON lines or Parquet")
    export.add_argument("trace", help="trace file written by mysqlio record")
    export.add_argument("--format", choices=("csv", "jsonl", "parquet"), help="default: from the output's suffix")
    export.add_argument("-o", "--output", required=True, help="file to write (created mode 0600)")


def _trace_filters(args: argparse.Namespace):
    if args.t_from is not None and args.t_to is not None and args.t_from >= args.t_to:
        raise UserError(f"--from {args.t_from:g} must be before --to {args.t_to:g}")
    return Filters(kinds=args.kind, match=args.match, t_from=args.t_from, t_to=args.t_to)


def _cmd_report(args: argparse.Namespace) -> int:
    from .report.build import build_report
    from .report.text import print_report
    from .report.to_json import write_report_json
    from .trace import TraceReader

    filters = _trace_filters(args)
    report = build_report(TraceReader(args.trace), args.group, filters, per_second=args.per_second)
    timeline = None
    if args.latency:
        from .report.timeline import latency_over_time, slowest_pairs

        file_rows = report.rows if args.group == "file" else build_report(TraceReader(args.trace), "file", filters).rows
        timeline = latency_over_time(TraceReader(args.trace), slowest_pairs(file_rows), filters)
    if args.json:
        after = {"latency_over_time": timeline.to_json()} if timeline is not None else None
        write_report_json(report, sys.stdout, after)
    else:
        print_report(report, args.limit, args.per_second, timeline=timeline)
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:  # the single-file build (make dist) leaves it out
        raise UserError("plot needs matplotlib, which this mysqlio lacks: pip install mysqlio (or matplotlib)")
    from .plot import plot_trace
    from .trace import TraceReader

    filters = _trace_filters(args)
    plot_trace(TraceReader(args.trace), args.output, args.by, max(1, args.top), None, filters, args.title)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import export_trace, format_of
    from .trace import TraceReader

    fmt = format_of(args.output, args.format)
    reader = TraceReader(args.trace)
    rows = export_trace(reader, args.output, fmt)
    if reader.truncated or not reader.complete:
        print(
            f"mysqlio: {args.trace} was cut short (recorder killed or still running); exported its {rows} complete events",
            file=sys.stderr,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    # `kill -USR1 PID` prints every thread's stack to stderr: a tracer that hangs says where
    with contextlib.suppress(RuntimeError, ValueError, OSError, AttributeError):  # stderr closed or not a file
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        args = build_parser().parse_args(argv)
        apply_selectors(args)  # --pod / --container -> args.pid
        if args.command == "top":
            return _cmd_top(args)
        if args.command == "record":
            return _cmd_record(args)
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "report":
            return _cmd_report(args)
        if args.command == "plot":
            return _cmd_plot(args)
        if args.command == "export":
            return _cmd_export(args)
        if args.command == "stap-build":
            return _cmd_stap_build(args)
        if args.command == "exporter" and args.all:
            from .exporter_fleet import run_fleet  # every server of the host

            return run_fleet(args)
        if args.command == "exporter":
            from .exporter import run_exporter

            return run_exporter(args)
        if args.command == "verify":
            from .verify.command import run_verify

            return run_verify(args)
        if args.command == "doctor":
            from .doctor import run_doctor

            return run_doctor(args)
        raise UserError(f"unknown command {args.command}")
    except BpfError as exc:
        print(f"mysqlio: {exc}", file=sys.stderr)
        if exc.log:
            print("mysqlio: libbpf said (last lines):\n" + "\n".join(exc.log.splitlines()[-15:]), file=sys.stderr)
        return exc.exit_code
    except UserError as exc:
        message = str(exc)
        print(message if message.startswith("mysqlio") else f"mysqlio: {message}", file=sys.stderr)
        log = getattr(exc, "log", "")  # errors.StapError: the end of what stap said
        if log:
            print("mysqlio: stap said (last lines):\n" + "\n".join(log.splitlines()[-15:]), file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
