"""What tools/guest.py keeps of a guest that hung: the kernel's first report, where the vCPUs
were, and a failure text that shows both (a CI run once showed only the last 3,000
characters of a soft lockup's repeated register dumps, which named no function)."""

from __future__ import annotations

from pathlib import Path

from guest import _symbolize, _text_symbols, first_kernel_report, guest_failure_text

CONSOLE = """\
[    7.065461] virtme-ng-init: starting script (console fallback)
[  148.102334] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [python:412]
[  148.102401] CPU: 1 PID: 412 Comm: python Not tainted 5.10.0-32-amd64 #1 Debian 5.10.223-1
[  148.102530] RIP: 0010:do_something+0x2a/0x90
[  148.102600] Call Trace:
[  148.102640]  syscall_trace_enter.constprop.0+0xed/0x1b0
[  176.102334] watchdog: BUG: soft lockup - CPU#1 stuck for 48s! [python:412]
[  176.102401] CPU: 1 PID: 412 Comm: python Not tainted 5.10.0-32-amd64 #1 Debian 5.10.223-1
"""


def test_first_report_from_its_first_line() -> None:
    report = first_kernel_report(CONSOLE)
    lines = report.splitlines()
    assert lines[0].endswith("watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [python:412]")
    assert "RIP: 0010:do_something+0x2a/0x90" in report
    assert "starting script" not in report


def test_later_reports_counted_when_cut() -> None:
    report = first_kernel_report(CONSOLE, max_lines=3)
    assert len(report.splitlines()) == 4
    assert report.splitlines()[-1] == (
        "[... 1 more such lines after these; the last: "
        "[  176.102334] watchdog: BUG: soft lockup - CPU#1 stuck for 48s! [python:412]]"
    )


def test_a_warning_keeps_its_message() -> None:
    """A WARN prints its message between "cut here" and "WARNING:" (5.10's verifier did, on
    a tracing program with run-time allocated hash maps)."""
    console = (
        "[   72.121158] EXT4-fs (loop0): mounted filesystem with ordered data mode. Opts: (null)\n"
        "[  129.531341] ------------[ cut here ]------------\n"
        "[  129.531495] trace type BPF program uses run-time allocation\n"
        "[  129.531978] WARNING: CPU: 1 PID: 118 at kernel/bpf/verifier.c:10493 bpf_check+0x2f92/0x3470\n"
        "[  129.536716] RIP: 0010:bpf_check+0x2f92/0x3470\n"
    )
    lines = first_kernel_report(console).splitlines()
    assert lines[1].endswith("trace type BPF program uses run-time allocation")
    assert lines[0].endswith("[ cut here ]------------") and len(lines) == 4


def test_no_report_on_a_quiet_console() -> None:
    assert first_kernel_report(CONSOLE.splitlines()[0] + "\n") == ""


def test_symbols_name_an_address(tmp_path: Path) -> None:
    kallsyms = tmp_path / "kallsyms"
    kallsyms.write_text(
        "ffffffff81912500 T native_safe_halt\n"
        "ffffffff81912520 t default_idle\n"
        "ffffffff81000000 T _stext\n"
        "ffffffff82000000 D some_data\n"
    )
    symbols = _text_symbols(kallsyms)
    assert symbols == [
        (0xFFFFFFFF81000000, "_stext"),
        (0xFFFFFFFF81912500, "native_safe_halt"),
        (0xFFFFFFFF81912520, "default_idle"),
    ]
    assert _symbolize(0xFFFFFFFF8191250E, symbols) == "native_safe_halt+0xe"
    assert _symbolize(0xFFFFFFFF81912520, symbols) == "default_idle+0x0"
    assert _symbolize(0x7FC917E0BD07, symbols) == "(user space)"
    assert _symbolize(0xFFFFFFFF80000000, symbols) == "?"
    assert _text_symbols(tmp_path / "missing") == []


def test_failure_text_keeps_the_notes_whole() -> None:
    command = "x" * 5000
    notes = "\n[guest.py: the kernel's first report on its console:]\n" + "r" * 6000
    notes += "\n[guest.py: timed out after 1200 s; the tail of vng's output:]\ntail\n"
    text = guest_failure_text(command + notes)
    assert text == "x" * 2000 + notes
    assert guest_failure_text("only the command's own output") == "only the command's own output"
