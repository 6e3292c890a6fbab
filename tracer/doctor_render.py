"""Doctor's output: the checks as a rich renderable (a table per section), and as plain text."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from .doctor_check import SECTIONS, Check, auto_backend

_STATUS_STYLE = {
    "ok": ("ok", "green"),
    "warn": ("WARN", "yellow"),
    "fail": ("FAIL", "bold red"),
    "skip": ("skip", "dim"),
}


def verdict(checks: Sequence[Check]) -> str:
    backend = auto_backend(checks)
    if backend == "bpf":
        return "eBPF backend: ready (--backend auto uses eBPF)."
    failed = ", ".join(c.name for c in checks if c.required and c.status == "fail")
    if backend == "stap":
        return f"eBPF backend: not usable ({failed}); --backend auto will use SystemTap."
    return f"eBPF backend: not usable ({failed}); no tracing backend can run here until the fixes above are applied."


def render_checks(checks: Sequence[Check]) -> RenderableType:
    """The checks as a rich renderable: a table per section, fixes under failing lines."""
    parts: list[RenderableType] = []
    name_width = max((len(c.name) for c in checks), default=8)
    for section, title in SECTIONS.items():
        rows = [c for c in checks if c.section == section]
        if not rows:
            continue
        if section == "server":
            head = next((c for c in rows if c.name == "server" and c.value), None)
            title = f"{title} (pid {head.value})" if head else title
        parts.append(Text(title, style="bold"))
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 0), expand=False)
        table.add_column("status", width=4, no_wrap=True)
        table.add_column("check", no_wrap=True, min_width=name_width)
        table.add_column("detail", overflow="fold")
        for c in rows:
            label, style = _STATUS_STYLE[c.status]
            table.add_row(Text(label, style=style), Text(c.name), Text(c.detail))
            if c.fix and c.status in ("warn", "fail"):
                table.add_row(Text(""), Text(""), Text("fix: " + c.fix, style="cyan"))
        parts += [table, Text("")]
    parts.append(Text(verdict(checks), style="bold"))
    return Group(*parts)


def format_text(checks: Sequence[Check], width: int = 120) -> str:
    """Plain text (no colour, no trailing blanks) of render_checks at `width` columns."""
    console = Console(width=width, color_system=None, highlight=False, soft_wrap=False)
    with console.capture() as capture:
        console.print(render_checks(checks))
    return "".join(line.rstrip() + "\n" for line in capture.get().splitlines())


def print_text(checks: Sequence[Check], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if out.isatty():
        Console(file=out, highlight=False).print(render_checks(checks))
    else:
        out.write(format_text(checks))
