"""The kernel matrix's verdicts (tools/matrix_guest.py judge): losses make every cell differ,
except runs the kernel skipped that the tracer counted as all its losses."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import pytest
from matrix_guest import (
    BANNERS,
    COUNTERS,
    REPO,
    Scenarios,
    Tracer,
    _iogen_rows,
    error_line,
    exit_text,
    judge,
    untimed_classes,
)
from matrix_reads import read_issues, unnamed_reads
from test_kernel_matrix import hooks_not_tracepoints, skipped_and_counted


def _tracer(got_ops: int, lost: int, skipped: dict[str, int], mode: str = "record") -> Tracer:
    """A tracer whose programs' counters show SKIPPED runs; each tracer says itself how
    many of its lost events were skipped runs (the same number here): top in its drops,
    the exporter in drops_total, record in its trace (report's lost_by_reason)."""
    t = Tracer(mode, subprocess.Popen(["true"]))
    t.proc.wait()
    t.status = "ran"
    row: dict[str, Any] = {"write_ops": 10, "write_bytes": 40960}
    t.want = {"/s/write_a.dat": dict(row), "/s/pwrite_a.dat": dict(row)}
    t.got = {"/s/write_a.dat": {**row, "write_ops": got_ops}, "/s/pwrite_a.dat": dict(row)}
    t.lost = {"lost_events": lost}
    t.extra["skipped_by_program"] = skipped
    events = sum(skipped.values())
    if mode == "top":
        t.extra["drops"] = {"skipped_runs": events} if events else {}
    elif mode == "exporter":
        t.lost["drops"] = lost
        t.extra["drops_by_reason"] = {"skipped_runs": events} if events else {}
    else:
        t.extra["lost_by_reason"] = {"skipped_runs": events} if events else {}
    return t


SCENARIOS = Scenarios(run=["write", "pwrite"], files={"write": ["write_a.dat"], "pwrite": ["pwrite_a.dat"]})


def test_exact_without_losses() -> None:
    t = _tracer(10, 0, {})
    judge(t, SCENARIOS)
    assert t.cells == {"write": "exact", "pwrite": "exact"}


def test_a_counted_skip_is_judged_on_the_files() -> None:
    t = _tracer(9, 1, {"handle_exit": 1})
    judge(t, SCENARIOS)
    assert t.cells["pwrite"] == "exact"
    assert t.cells["write"].startswith("skipped: write_a.dat: write_ops 9 (iogen 10)")
    assert "1 run(s) of handle_exit skipped by the kernel, counted as lost" in t.cells["write"]


def test_short_by_more_than_skipped_differs() -> None:
    t = _tracer(8, 1, {"handle_exit": 1})
    judge(t, SCENARIOS)
    assert t.cells["write"].startswith("differs: skipped runs 1")


def test_losses_other_than_the_skipped_runs_make_every_cell_differ() -> None:
    t = _tracer(9, 2, {"handle_exit": 1})
    t.extra["lost_by_reason"] = {"skipped_runs": 1, "ringbuf_full": 1}
    judge(t, SCENARIOS)
    assert t.cells["pwrite"].startswith("differs: lost_events 2 (ringbuf_full 1, skipped_runs 1)")
    assert t.cells["write"].startswith("differs: lost_events 2 (ringbuf_full 1, skipped_runs 1)")


def test_a_truncated_trace_is_never_explained_by_skipped_runs() -> None:
    t = _tracer(9, 1, {"handle_exit": 1})
    t.lost["truncated"] = 1
    judge(t, SCENARIOS)
    assert t.cells["pwrite"].startswith("differs: lost_events 1 (skipped_runs 1); truncated 1")


@pytest.mark.parametrize("mode", ["top", "exporter", "record"])
def test_each_tracer_counts_its_skips_itself(mode: str) -> None:
    """Their own count is used, not the programs' counters read earlier: skips after that
    reading (no file short) were once judged as unexplained losses (a CI run on sid 7.2)."""
    t = _tracer(10, 3, {"handle_exit": 3}, mode)
    t.extra["skipped_by_program"] = {}  # read before the later skips
    judge(t, SCENARIOS)
    assert t.cells == {"write": "exact", "pwrite": "exact"}
    t = _tracer(9, 3, {"handle_exit": 3}, mode)
    judge(t, SCENARIOS)
    assert t.cells["write"].startswith("skipped: write_a.dat: write_ops 9 (iogen 10)")


@pytest.mark.parametrize("mode", ["top", "exporter", "record"])
def test_skips_the_tracer_did_not_count_explain_nothing(mode: str) -> None:
    t = _tracer(9, 1, {"handle_exit": 1}, mode)
    t.extra[{"top": "drops", "exporter": "drops_by_reason", "record": "lost_by_reason"}[mode]] = {"inflight_full": 1}
    judge(t, SCENARIOS)
    assert t.cells["write"].startswith("differs: lost_events 1")


def test_a_hung_tracer_says_so_with_its_stacks() -> None:
    """A tracer that does not exit after the stop signal is killed; its verdict says it hung
    and the line of its stack dump (SIGUSR1, faulthandler) that was printed last."""
    script = (
        "import faulthandler, signal, sys, time\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('mysqlio: exporting pid 1 (x) on http://127.0.0.1:1/metrics', file=sys.stderr, flush=True)\n"
        "time.sleep(60)\n"
    )
    t = Tracer("exporter", subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True))
    assert t.wait_for(lambda: bool(t.err), 30)
    rc = t.stop(signal.SIGTERM, timeout_s=1)
    t.fail("error", f"exporter exited {exit_text(rc)}")
    assert t.error is not None
    assert t.error.startswith("exporter exited on SIGKILL (still running 1 s after SIGTERM; killed): ")
    assert "most recent call first" in t.stderr()
    assert "exporting pid" not in t.error  # the banner says it ran, not why it stopped


def test_a_traceback_outranks_the_banner() -> None:
    stderr = "mysqlio: recording pid 7 (x)\nTraceback (most recent call last):\n  File 'a'\nValueError: boom\n"
    assert error_line(stderr) == "ValueError: boom"
    assert error_line("mysqlio: recording pid 7 (x)\nmysqlio: cannot write t: Permission denied\n") == (
        "mysqlio: cannot write t: Permission denied"
    )


@pytest.mark.parametrize("mode", sorted(BANNERS))
def test_no_tracer_s_banner_is_its_error(mode: str) -> None:
    """Each tracer's attach banner (the strings tracer/ prints) is passed over for the line
    before it, whichever tracer printed it."""
    banner = f"{BANNERS[mode]}7 (x), Ctrl-C to stop"
    assert error_line(f"mysqlio: no BTF\n{banner}\n") == "mysqlio: no BTF"
    tracer_src = {"top": "top.py", "record": "record.py", "exporter": "exporter.py"}[mode]
    assert BANNERS[mode] + "{pid}" in (REPO / "tracer" / tracer_src).read_text()


def test_skips_are_accepted_only_where_the_programs_can_be_preempted() -> None:
    """Faultable syscall tracepoints (6.13) on a preemptible kernel; not 6.1-rt's, which
    run their programs with preemption off, nor a voluntary kernel's."""
    verdict = "skipped: write_a.dat: write_ops 9 (iogen 10); 1 run(s) of handle_exit skipped by the kernel"
    for preempt, faultable, accepted in (
        ("lazy", True, True),  # sid's 7.2
        ("full", True, True),
        ("rt", False, False),  # Debian 12's 6.1-rt
        ("voluntary", False, False),  # 6.12
        ("voluntary", True, False),
        ("lazy", None, False),  # an older result, or BTF unreadable
    ):
        result = {"kernel": {"release": "x", "preempt": preempt, "faultable_tracepoints": faultable}}
        assert skipped_and_counted(result, verdict) is accepted, (preempt, faultable)
        assert not skipped_and_counted(result, "differs: write_a.dat: write_ops 9 (iogen 10)")


def test_requests_counted_but_never_timed_differ() -> None:
    """record's cell differs where a file's requests of a class were all untimed (the
    syscall number each enter program stamps read from the wrong place)."""
    row = {"write_ops": 3, "write_latency_ns": None, "sync_ops": 1, "sync_latency_ns": {"p50": 9}, "read_ops": 0}
    assert untimed_classes(row) == ["write"]
    t = _tracer(10, 0, {})
    t.extra["untimed"] = {"/s/pwrite_a.dat": ["write"]}
    judge(t, SCENARIOS)
    assert t.cells == {"write": "exact", "pwrite": "differs: pwrite_a.dat: write requests counted, none timed"}


def test_a_tracer_on_the_raw_hook_is_named() -> None:
    ebpf = {m: {"status": "ran", "syscall_hook": "tracepoints"} for m in ("top", "record", "exporter")}
    assert hooks_not_tracepoints({"ebpf": ebpf}) == {}
    ebpf["record"]["syscall_hook"] = "raw"
    del ebpf["exporter"]["syscall_hook"]
    assert hooks_not_tracepoints({"ebpf": ebpf}) == {"record": "raw", "exporter": "not noted"}


def _coldread(proc_io: int = 180) -> dict[str, Any]:
    """iogen's JSON for coldread's files (issue 61): a buffered cold file, an O_DIRECT one."""
    zero = dict.fromkeys(COUNTERS, 0)
    return {
        "proc_io_read_bytes": proc_io,
        "files": [
            {"path": "/s/coldread.dat", "deleted": False, **zero, "disk_read_bytes": 100, "direct_read_bytes": 0},
            {
                "path": "/s/coldread_direct.dat",
                "deleted": False,
                **zero,
                "disk_read_bytes": 80,
                "direct_read_bytes": 80,
            },
        ],
    }


COLDREAD = Scenarios(run=["coldread"], files={"coldread": ["coldread.dat", "coldread_direct.dat"]})


def _read_tracer(expected: dict[str, Any], **got: dict[str, int]) -> Tracer:
    """A tracer that gave iogen's counts, but for GOT (per basename), readahead as on a host."""
    t = _tracer(10, 0, {})
    t.want = _iogen_rows(expected)
    t.got = {p: dict(row) for p, row in t.want.items()}
    t.got["/s/coldread.dat"]["readahead_bytes"] = 100
    t.got["/s/coldread_direct.dat"]["readahead_bytes"] = 0
    for name, row in got.items():
        t.got[f"/s/{name}.dat"].update(row)
    t.extra["read_issues"] = read_issues(t.got, expected)
    return t


def test_disk_reads_judged_per_file() -> None:
    """A coldread file's disk_read_bytes and direct_read_bytes are judged as its other
    counters, in every mode; the ones iogen gives them for only."""
    expected = _coldread()
    assert _iogen_rows(expected)["/s/coldread_direct.dat"]["direct_read_bytes"] == 80
    t = _read_tracer(expected)
    judge(t, COLDREAD)
    assert t.cells == {"coldread": "exact"}
    t = _read_tracer(expected, coldread_direct={"disk_read_bytes": 76, "direct_read_bytes": 76})
    judge(t, COLDREAD)
    assert t.cells["coldread"].startswith(
        "differs: coldread_direct.dat: disk_read_bytes 76 (iogen 80), direct_read_bytes 76 (iogen 80)"
    )
    assert "disk reads of its files 176 (/proc/PID/io 180)" in t.cells["coldread"]


def test_a_disk_read_named_nowhere_differs() -> None:
    """A row with disk reads and no name (a page fault's read taken for the process's file,
    tools/matrix_reads.py unnamed_reads) makes the read scenario differ; an unnamed row
    without disk reads, or a named one, does not."""
    rows = {
        "<dev 7:0 inode 17>": {"disk_read_bytes": 1048576},
        "<dev 7:0 inode 18>": {"write_bytes": 10, "disk_read_bytes": 0},
        "/s/coldread.dat": {"disk_read_bytes": 100},
    }
    assert unnamed_reads(rows) == {"<dev 7:0 inode 17>": 1048576}
    t = _read_tracer(_coldread())
    t.extra["unnamed_disk_reads"] = unnamed_reads(rows)
    judge(t, COLDREAD)
    assert t.cells == {"coldread": "differs: <dev 7:0 inode 17>: 1048576 B read from the disk, named nowhere"}


@pytest.mark.parametrize(
    ("got", "issue"),
    [
        ({"coldread": {"readahead_bytes": 0}}, "coldread.dat: readahead_bytes 0 for a cold sequential read"),
        ({"coldread": {"readahead_bytes": 104}}, "coldread.dat: readahead_bytes 104 not within disk_read_bytes 100"),
        ({"coldread_direct": {"readahead_bytes": 8}}, "coldread_direct.dat: readahead_bytes 8 for O_DIRECT reads (0)"),
    ],
)
def test_the_readahead_s_part_as_the_host_test_has_it(got: dict[str, dict[str, int]], issue: str) -> None:
    """What iogen cannot know, bounded as tests/test_coldread.py bounds it."""
    t = _read_tracer(_coldread(), **got)
    judge(t, COLDREAD)
    assert t.cells["coldread"] == f"differs: {issue}"


def test_the_process_s_disk_reads_are_the_kernel_s() -> None:
    """The read files' disk reads sum to /proc/PID/io read_bytes over iogen's reads."""
    t = _read_tracer(_coldread(proc_io=184))
    judge(t, COLDREAD)
    assert t.cells["coldread"] == "differs: coldread.dat: disk reads of its files 180 (/proc/PID/io 184)"
