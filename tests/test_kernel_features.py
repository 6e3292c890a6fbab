"""Kernel feature probing and the fallbacks it picks.

The io_uring tracepoints' arguments are given as kernel_features.tracepoint_params
read them from the BTF of Debian's kernels, booted in guests (tools/guest.py); the
fallback programs run for real here with MYSQLIO_KERNEL_FEATURES taking a
feature away, and on the old kernels themselves in tests/test_kernel_matrix.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mysqlio import kernel_features, libbpf, verifier_log
from mysqlio.devtools.traced import (
    COUNTERS,
    assert_one_line_error,
    end_iogen,
    read_json_line,
    report_json,
    run_iogen_recorded,
    run_iogen_traced,
    start_iogen,
    stop_top,
)
from mysqlio.kernel_features import Param

VOID = Param(pointer=True, pointee="void")
REQ = Param(pointer=True, pointee="struct io_kiocb")
RING = Param(pointer=True, pointee="struct io_ring_ctx")
CQE = Param(pointer=True, pointee="struct io_uring_cqe")
NUM = Param(pointer=False, pointee="")

# (io_uring_complete, io_uring_submit_req, io_uring_submit_sqe) as each kernel's BTF has them
DEBIAN_5_10 = ([VOID, NUM, NUM, NUM], None, [VOID, VOID, NUM, NUM, NUM, NUM, NUM])
DEBIAN_6_1 = ([VOID, VOID, NUM, NUM, NUM, NUM, NUM], None, [REQ, NUM])
DEBIAN_6_12 = ([VOID, VOID, NUM, NUM, NUM, NUM, NUM], [REQ], None)
LINUX_6_18 = ([RING, VOID, CQE], [REQ], None)


@pytest.mark.parametrize(
    ("params", "complete_arg", "submit", "by_user_data"),
    [
        (DEBIAN_5_10, None, ("io_uring_submit_sqe", 1), True),
        (DEBIAN_6_1, 1, ("io_uring_submit_sqe", 0), False),
        (DEBIAN_6_12, 1, ("io_uring_submit_req", 0), False),
        (LINUX_6_18, 1, ("io_uring_submit_req", 0), False),
        ((None, None, None), None, None, False),  # no io_uring in the kernel
    ],
)
def test_io_uring_request_is_found_in_each_layout(
    params: tuple[list[Param] | None, ...], complete_arg: int | None, submit: tuple[str, int] | None, by_user_data: bool
) -> None:
    complete, submit_req, submit_sqe = params
    assert kernel_features.uring_complete_req_arg(complete) == complete_arg
    assert kernel_features.uring_submit(submit_req, submit_sqe) == submit
    assert (complete_arg is None and kernel_features.complete_by_user_data(complete)) == by_user_data


# a kernel with every feature
FULL = kernel_features.KernelFeatures(
    task_btf=True,
    atomics=True,
    ringbuf=True,
    uring_complete_req_arg=1,
    uring_submit=("io_uring_submit_req", 0),
    uring_complete_by_user_data=False,
    msync_vma="find_vma",
    dirty_event="writeback_dirty_folio",
    bio_queue_args=1,
    writeback_start=True,
    task_pt_regs=True,
    rdonly_cast=True,
)


def test_pretend_takes_features_away_and_rejects_unknown_names() -> None:
    full = FULL
    less = kernel_features._pretend(full, "-task_btf, -atomics,-uring_submit")
    assert (less.task_btf, less.atomics, less.uring_submit, less.ringbuf) == (False, False, None, True)
    assert kernel_features._pretend(full, "") == full
    with pytest.raises(ValueError, match="unknown feature"):
        kernel_features._pretend(full, "-bogus")
    assert len(kernel_features._pretend(full, "-task_btf,-atomics,-ringbuf,-uring_complete").degraded()) == 4


# Verifier logs as libbpf printed them when Debian's kernels refused earlier
# versions of the probes (the lines that matter, with their neighbours).
LOG_6_1 = """libbpf: prog 'handle_exit': BPF program load failed: Permission denied
libbpf: prog 'handle_exit': -- BEGIN PROG LOAD LOG --
reg type unsupported for arg#0 function handle_exit#93
0: R1=ctx(off=0,imm=0) R10=fp0
; if (!is_target())
0: (85) call bpf_get_current_pid_tgid#14      ; R0_w=scalar()
; __sync_fetch_and_add(&hist->slots[slot], 1);
211: (c3) lock *(u32 *)(r2 +16) += r4
R2 unbounded memory access, make sure to bounds check any such access
processed 12723 insns (limit 1000000) max_states_per_insn 10 total_states 497 peak_states 249 mark_read 22
-- END PROG LOAD LOG --
libbpf: prog 'handle_exit': failed to load: -13
libbpf: failed to load object 'mysqlio.bpf.o'
"""
LOG_6_12 = """libbpf: prog 'handle_exit': -- BEGIN PROG LOAD LOG --
combined stack size of 2 calls is 528. Too large
verification time 11076 usec
stack depth 104+416+0+32
processed 7 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0
-- END PROG LOAD LOG --
"""
LOG_5_10 = """libbpf: prog 'handle_exit_nocas': -- BEGIN PROG LOAD LOG --
Func#1 is safe for any args that match its prototype
Validating emit() func#5...
Arg#0 type PTR in emit() is not supported yet.
processed 12655 insns (limit 1000000) max_states_per_insn 10 total_states 492 peak_states 243 mark_read 22
-- END PROG LOAD LOG --
"""


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (
            LOG_6_1,
            "program handle_exit: R2 unbounded memory access, make sure to bounds check any such access "
            "(at lock *(u32 *)(r2 +16) += r4)",
        ),
        (LOG_6_12, "program handle_exit: combined stack size of 2 calls is 528. Too large"),
        (LOG_5_10, "program handle_exit_nocas: Arg#0 type PTR in emit() is not supported yet."),
        ("libbpf: failed to find BTF for extern 'x'\n", None),
    ],
)
def test_verifier_reason_is_the_line_that_says_why(log: str, reason: str | None) -> None:
    assert verifier_log.refusal(log) == reason


@pytest.mark.bpf
def test_a_refused_program_shows_the_reason_and_the_whole_log(bpf_ready: None, tmp_path: Path) -> None:
    """A verifier log far longer than a line buffer is captured whole (libbpf prints
    it in one message; it used to be cut at 4 KiB, before its reason), and the
    error names the reason."""
    source = tmp_path / "refused.bpf.c"
    # 300 distinct instructions, then a read far past the context: a long log, the reason at its end
    body = "\n".join(f"\tv[{i % 8}] += {i};" for i in range(300))
    source.write_text(
        '#include "vmlinux.h"\n#include <bpf/bpf_helpers.h>\nSEC("socket")\nint refused(void *ctx)\n'
        f"{{\n\tvolatile long v[8] = {{}};\n{body}\n\treturn v[3] + *(volatile long *)((char *)ctx + 100000);\n}}\n"
        'char LICENSE[] SEC("license") = "GPL";\n'
    )
    obj = tmp_path / "refused.bpf.o"
    include = Path(__file__).resolve().parent.parent / "build"  # vmlinux.h, made by make setup
    subprocess.run(
        ["clang", "-O2", "-g", "-target", "bpf", f"-I{include}", "-c", str(source), "-o", str(obj)], check=True
    )
    with libbpf.BpfObject(str(obj)) as bpf, pytest.raises(libbpf.BpfError) as caught:
        bpf.load()
    assert str(caught.value).startswith(
        "the kernel refused the probes: program refused: dereference of modified ctx ptr R1 off=100000 disallowed"
    )
    log = caught.value.log
    assert len(log) > 8192 and "-- END PROG LOAD LOG --" in log  # whole, not cut at 4 KiB


SCENARIOS = ["pwrite", "writev", "reads", "sync", "aio", "uring", "errors"]


@pytest.mark.bpf
@pytest.mark.parametrize("missing", ["-atomics,-uring_submit", "-task_pt_regs", "-rdonly_cast"])
def test_fallbacks_are_exact(
    bpf_ready: None, iogen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """Without BPF atomics (the *_nocas programs) and an io_uring submission
    tracepoint, without bpf_task_pt_regs (arguments kept at entry), or
    without BTF casts, top still counts every file exactly, and record still
    records every request."""
    monkeypatch.setenv(kernel_features.FEATURES_ENV, missing)
    args = [a for s in SCENARIOS for a in ("--scenario", s)]
    for mode in ("top", "record"):
        work = tmp_path / mode
        work.mkdir()
        if mode == "top":
            run = run_iogen_traced(str(iogen), str(work), args)
            expected, lost, got = run.expected, run.traced.lost_events, run.traced.under(str(work))
        else:
            trace = str(tmp_path / "t.trace")
            expected = run_iogen_recorded(str(iogen), str(work), args, trace)
            report = report_json(trace)
            lost = report["lost_events"]
            got = {f["path"]: f for f in report["files"] if f["path"].startswith(f"{work}/")}
        want = {f["path"]: f for f in expected["files"]}
        assert lost == 0, mode
        assert sorted(got) == sorted(want), mode
        for path, counts in want.items():
            assert {c: got[path][c] for c in COUNTERS} == {c: counts[c] for c in COUNTERS}, (mode, path)


@pytest.mark.bpf
def test_record_without_a_ring_buffer_says_what_it_needs(bpf_ready: None, tmp_path: Path) -> None:
    """A kernel without the BPF ring buffer (before 5.8) nor BPF atomics: record
    refuses in one line, top runs (the events map is then a placeholder its programs
    never use). With atomics, x86-64's event slots need no ring buffer: record runs."""
    cmd = [sys.executable, "-m", "mysqlio"]

    def run(missing: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, kernel_features.FEATURES_ENV: missing}
        return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=60)

    pid = str(os.getpid())
    rec = run("-ringbuf,-atomics", "record", "-p", pid, "-o", str(tmp_path / "x.trace"), "-d", "1")
    assert_one_line_error(rec, "record needs the BPF ring buffer", "--backend stap")
    assert rec.returncode == 3
    top = run("-ringbuf,-atomics", "top", "-p", pid, "--json", "-n", "1", "-i", "0.2")
    assert top.returncode == 0, top.stderr
    assert '"lost_events":0' in top.stdout.replace(" ", "")
    rec = run("-ringbuf", "record", "-p", pid, "-o", str(tmp_path / "y.trace"), "-d", "1")
    assert rec.returncode == 0, rec.stderr
    assert report_json(str(tmp_path / "y.trace"))["lost_events"] == 0


@pytest.mark.bpf
def test_what_a_kernel_cannot_count_is_stated(bpf_ready: None) -> None:
    """A kernel whose io_uring tracepoints name no request (and no submission one
    does either): top says io_uring is not counted, on stderr and in each JSON line."""
    env = {**os.environ, kernel_features.FEATURES_ENV: "-uring_complete,-uring_submit"}
    top = subprocess.run(
        [sys.executable, "-m", "mysqlio", "top", "-p", str(os.getpid()), "--json", "-n", "1", "-i", "0.2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert top.returncode == 0, top.stderr
    assert "mysqlio: note: io_uring requests are not counted on this kernel" in top.stderr
    (line,) = top.stdout.splitlines()
    assert any("io_uring requests are not counted" in n for n in json.loads(line)["notes"])


@pytest.mark.bpf
def test_without_page_cache_hooks_or_msync_it_says_so(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """A kernel without a writeback tracepoint and without a way to find msync's file: top
    says both on stderr and in each JSON line, counts no page cache and no device, and
    the requests stay exact (iogen's pc_mmap: its msync is the one request not counted)."""
    env = {**os.environ, kernel_features.FEATURES_ENV: "-dirty_event,-msync_vma"}
    gen = start_iogen(str(iogen), str(tmp_path), ["--scenario", "pc_mmap"])
    try:
        assert gen.stdin is not None and gen.stdout is not None
        top = subprocess.Popen(
            [sys.executable, "-m", "mysqlio", "top", "-p", str(gen.pid), "--json", "-i", "0.3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert top.stdout is not None
        first = read_json_line(top.stdout, 30, "mysqlio top")
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 120, "iogen run")
        rest, err = stop_top(top)
    finally:
        end_iogen(gen)
    assert "msync is not counted on this kernel" in err and "page cache, writeback and devices are not counted" in err
    assert any("msync is not counted" in n for n in first["notes"])
    (want,) = expected["files"]
    got = {"write_bytes": 0, "write_ops": 0, "fsync_ops": 0, "msync_ops": 0, "dirtied_bytes": 0, "writeback_bytes": 0}
    for obj in [first, *rest]:
        assert obj["devices"] == []
        for f in obj["files"]:
            if f["path"] == want["path"]:
                for k in got:
                    got[k] += f[k]
    assert got == {
        "write_bytes": want["write_bytes"],
        "write_ops": want["write_ops"],
        "fsync_ops": 1,
        "msync_ops": 0,
        "dirtied_bytes": 0,
        "writeback_bytes": 0,
    }


def test_page_cache_features_in_each_layout() -> None:
    """block_bio_queue took the queue first before 5.11; the dirtying tracepoint was named
    writeback_dirty_page before 5.18; msync's file comes from bpf_find_vma or the rb-tree."""
    full = FULL
    assert full.page_cache and not full.degraded()
    assert not kernel_features._pretend(full, "-dirty_event").page_cache
    assert kernel_features._pretend(full, "-find_vma").msync_vma is None
    assert len(kernel_features._pretend(full, "-dirty_event,-msync_vma").degraded()) == 2
    assert kernel_features.msync_vma(find_vma=False, mm_rb=True) == "mm_rb"
    assert kernel_features.msync_vma(find_vma=False, mm_rb=False) is None


def test_struct_members_are_found_inside_anonymous_ones() -> None:
    """mm_rb (5.10) and mm_mt (6.1+) sit in an anonymous struct of mm_struct: CO-RE finds
    them there, so the probe for the msync rb-tree walk must too."""
    assert kernel_features.struct_has_member("mm_struct", "mm_mt") or kernel_features.struct_has_member(
        "mm_struct", "mm_rb"
    )
    assert not kernel_features.struct_has_member("mm_struct", "no_such_member")
