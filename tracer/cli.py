"""Command line: argument checks, then dispatch; user errors become one line."""

from __future__ import annotations

import argparse
import re
import sys

from mysqlio import __version__
from mysqlio.errors import BpfError, UserError
from mysqlio.kinds import KINDS
from mysqlio.view import GROUPS, SORT_KEYS, Filters


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
        "--group", choices=GROUPS, default="file", help="one row per file (default), kind, table or thread"
    )
    top.add_argument("--sort", choices=list(SORT_KEYS), default="write", help="sort column of the live screen")
    top.add_argument(
        "--kind", type=_kinds, default=frozenset(), help="only these kinds (comma-separated, e.g. redo,binlog)"
    )
    top.add_argument(
        "--fold-partitions", action="store_true", help="count a partitioned table's partitions as one table"
    )
    top.add_argument("--match", type=_regex, help="only paths matching this regular expression")
    mode = top.add_mutually_exclusive_group()
    mode.add_argument("--batch", action="store_true", help="plain text, one block per interval")
    mode.add_argument("--json", action="store_true", help="one JSON object per interval, one per line")

    demo = sub.add_parser("demo", help="start a throwaway MariaDB under a write load and run top on it")
    demo.add_argument("-i", "--interval", type=_positive_float, default=1.0, help="seconds between updates (default 1)")
    demo.add_argument(
        "-n", "--count", type=_count, default=0, help="stop after COUNT intervals (default: until Ctrl-C)"
    )
    demo.add_argument("--json", action="store_true", help="JSON lines instead of text")
    return parser


def _output_mode(json_lines: bool, batch: bool) -> str:
    """JSON when asked; plain text when asked or not on a terminal; else the live screen."""
    if json_lines:
        return "json"
    if batch or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return "text"
    return "live"


def _cmd_demo(args: argparse.Namespace) -> int:
    from mysqlio import preflight
    from mysqlio.demo import run_demo

    preflight.check_bpf_environment()
    return run_demo(args.interval, args.count, _output_mode(args.json, False))


def _cmd_top(args: argparse.Namespace) -> int:
    from mysqlio import preflight, target
    from mysqlio.top import TopOptions, run_top

    pid = args.pid if args.pid is not None else target.find_server()
    target.check_pid(pid)
    preflight.check_bpf_environment()
    options = TopOptions(
        pid=target.tgid_of(pid),
        interval_s=args.interval,
        count=args.count,
        output=_output_mode(args.json, args.batch),
        group=args.group,
        sort=args.sort,
        filters=Filters(kinds=args.kind, match=args.match),
        fold_partitions=args.fold_partitions,
    )
    return run_top(options)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "top":
            return _cmd_top(args)
        if args.command == "demo":
            return _cmd_demo(args)
        raise UserError(f"unknown command {args.command}")
    except BpfError as exc:
        print(f"mysqlio: {exc}", file=sys.stderr)
        if exc.log:
            print("mysqlio: libbpf said (last lines):\n" + "\n".join(exc.log.splitlines()[-15:]), file=sys.stderr)
        return exc.exit_code
    except UserError as exc:
        message = str(exc)
        print(message if message.startswith("mysqlio") else f"mysqlio: {message}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
