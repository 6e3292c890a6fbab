"""The syscall hook: per-syscall tracepoints when tracefs has them (mounted by mysqlio
where libbpf looks, on a machine that has none mounted), raw sys_enter/sys_exit otherwise;
both count exactly, and only the per-syscall one spares the other syscalls.

Every run here that could mount tracefs runs in a private mount namespace (unshare),
with tracefs as the test needs it there: the host's mounts are never changed, and the
tests pass whether the host has tracefs mounted or not."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mysqlio import doctor_kernel, doctor_probe, syscall_hook
from mysqlio.bpf_probe import PAGE_CACHE_PROGRAMS
from mysqlio.devtools.traced import (
    FileTotals,
    IogenRun,
    assert_exact,
    bpf_fdinfo,
    read_json_line,
    run_iogen_traced,
    start_iogen,
    stop_top,
)

REPO = Path(__file__).resolve().parent.parent
BPF_PROG_TYPE_TRACEPOINT = 5
BPF_PROG_TYPE_TRACING = 26  # tp_btf
BPF_ENABLE_STATS = 32
SYS_BPF = {"x86_64": 321, "aarch64": 280}
BUSY_SYSCALLS = 200_000
MOUNTED_LINE = f"mysqlio: tracefs was not mounted; mounted it at {syscall_hook.TRACEFS}"

# Run in a fresh private mount namespace: argv[1] says what tracefs looks like there
# ("inherit": as on the host; "fresh": neither tracefs nor debugfs mounted, as on a new
# machine; "debugfs": only debugfs, tracefs automounted under it, as in virtme-ng
# guests), argv[2:] is exec'd (same pid: unshare without --fork execs too).
NS_PRELUDE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def mounted(target):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)
def check(rc, what):
    if rc != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), what)
mode = sys.argv[1]
if mode in ("fresh", "debugfs"):
    for target in ("/sys/kernel/debug", "/sys/kernel/tracing"):
        while mounted(target):
            check(libc.umount2(target.encode(), 2), target)  # MNT_DETACH: its submounts too
    with open("/proc/self/mountinfo") as f:
        assert not any(line.split(" - ")[1].split()[0] in ("tracefs", "debugfs") for line in f)
if mode == "debugfs":
    check(libc.mount(b"debugfs", b"/sys/kernel/debug", b"debugfs", 0, None), "debugfs")
os.execvp(sys.argv[2], sys.argv[2:])
"""


def in_private_ns(argv: Sequence[str], tracefs: str = "inherit") -> list[str]:
    """argv run in a private mount namespace with tracefs as NS_PRELUDE sets it up."""
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is needed for a private mount namespace"
    return [unshare, "--mount", "--propagation", "private", sys.executable, "-c", NS_PRELUDE, tracefs, *argv]


def without_cap_sys_admin(argv: Sequence[str]) -> list[str]:
    """argv as root without CAP_SYS_ADMIN (CAP_BPF and CAP_PERFMON kept): the BPF
    probes load, mounting is refused (EPERM)."""
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to drop CAP_SYS_ADMIN"
    return [setpriv, "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", *argv]


def host_tracefs() -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """What this (the test's) mount namespace has at libbpf's two places."""
    return (
        syscall_hook.mount_entry(syscall_hook.TRACEFS),
        syscall_hook.mount_entry(syscall_hook.DEBUGFS_TRACING.removesuffix("/tracing")),
    )


def fake_tracefs(base: Path, leave_out: str | None = None) -> Path:
    for _, event in syscall_hook.attachments():
        if event != leave_out:
            (base / "events" / "syscalls" / event).mkdir(parents=True, exist_ok=True)
    return base


def never_mount(target: str) -> None:
    raise AssertionError(f"mounted {target}")


def refused(err: int):  # type: ignore[no-untyped-def]
    def mount(target: str) -> None:
        raise OSError(err, os.strerror(err), target)

    return mount


@pytest.fixture(autouse=True)
def fresh_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test decides the hook anew (a process decides it once)."""
    monkeypatch.setattr(syscall_hook, "_chosen", {})
    monkeypatch.setattr(syscall_hook, "_quiet", {})
    monkeypatch.delenv(syscall_hook.HOOK_ENV, raising=False)


def test_choose_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = fake_tracefs(tmp_path / "full")
    partial = fake_tracefs(tmp_path / "partial", leave_out="sys_exit_pwritev2")
    absent = str(tmp_path / "absent")
    # libbpf's rule: the first place (debugfs's) when it exists, else the second
    assert syscall_hook.libbpf_tracefs_dir((absent, str(full))) == str(full)
    assert syscall_hook.libbpf_tracefs_dir((str(partial), str(full))) == str(partial)
    assert syscall_hook.choose_hook((absent, str(full)), never_mount) == "tracepoints"
    assert syscall_hook.choose_hook((str(full),), never_mount) == "tracepoints"
    # one missing event where libbpf looks: the raw pair, which sees every syscall,
    # even if the other place had them all (libbpf would not look there)
    partly = syscall_hook.choose((str(partial), str(full)), never_mount, quiet=True)
    assert partly.hook == "raw" and partly.tracefs is not None
    assert partly.tracefs.mounted and not partly.tracefs.events and "CONFIG_FTRACE_SYSCALLS" in partly.tracefs.fix
    monkeypatch.setenv(syscall_hook.HOOK_ENV, "raw")
    assert syscall_hook.choose_hook((absent,), never_mount) == "raw"  # forced raw: tracefs not even looked at
    assert syscall_hook.choose((absent,), never_mount).tracefs is None
    # every enter has its exit; no syscall is attached twice
    enters = [e for _, e in syscall_hook.attachments() if e.startswith("sys_enter_")]
    exits = [e for _, e in syscall_hook.attachments() if e.startswith("sys_exit_")]
    # msync's and io_submit's enter programs name their tracepoint themselves (bpf_probe
    # picks the kernel's and the hook's)
    own = len(syscall_hook.OWN_ENTERS)
    assert len(set(enters)) == len(enters) == len(exits) - own == len(syscall_hook.traced_syscalls()) - own
    for syscall in ("msync", "io_submit"):
        assert f"sys_exit_{syscall}" in exits and f"sys_enter_{syscall}" not in enters
    assert {e.removeprefix("sys_enter_") for e in enters} | {"msync", "io_submit"} == {
        e.removeprefix("sys_exit_") for e in exits
    }


def test_mounts_where_libbpf_looks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing mounted: tracefs is mounted at the place libbpf will read (the second
    one, debugfs's being absent), said once on stderr; a process decides once."""
    debug, tracing = tmp_path / "debug" / "tracing", tmp_path / "tracing"
    tracing.mkdir()
    mounted: list[str] = []

    def mount(target: str) -> None:
        mounted.append(target)
        fake_tracefs(Path(target))

    dirs = (str(debug), str(tracing))
    choice = syscall_hook.choose(dirs, mount)
    assert mounted == [str(tracing)] and choice.hook == "tracepoints"
    assert choice.tracefs is not None and choice.tracefs.mounted_by == "now" and choice.tracefs.path == str(tracing)
    assert capsys.readouterr().err == f"mysqlio: tracefs was not mounted; mounted it at {tracing}\n"
    assert syscall_hook.choose(dirs, mount) is choice and mounted == [str(tracing)]
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("err", "reason", "fix"),
    [
        (errno.EPERM, "needs CAP_SYS_ADMIN", "mount -t tracefs nodev"),
        (errno.ENODEV, "this kernel has no tracefs", "CONFIG_FTRACE_SYSCALLS"),
        (errno.EROFS, "read-only /sys", "give the container"),
    ],
)
def test_mount_refused_falls_back_loudly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, err: int, reason: str, fix: str
) -> None:
    dirs = (str(tmp_path / "debug" / "tracing"), str(tmp_path / "tracing"))
    choice = syscall_hook.choose(dirs, refused(err))
    assert choice.hook == "raw" and choice.tracefs is not None and not choice.tracefs.mounted
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("mysqlio: tracefs is not mounted and mounting it at ") and reason in line, line
    assert "raw sys_enter/sys_exit" in line and "(fix: " in line and fix in line, line
    # forced to the tracepoints: kept (attaching will fail), and said
    monkeypatch.setenv(syscall_hook.HOOK_ENV, "tracepoints")
    assert syscall_hook.choose(dirs, refused(err)).hook == "tracepoints"
    assert capsys.readouterr().err.startswith(f"mysqlio: {syscall_hook.HOOK_ENV}=tracepoints, but tracefs is not")


def test_mount_tracefs_only_at_libbpfs_places(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not where libbpf looks"):
        syscall_hook.mount_tracefs(str(tmp_path))


def test_mount_entry(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "23 27 0:22 / /sys rw,relatime - sysfs sysfs rw\n"
        "64 23 0:13 / /sys/kernel/tracing rw,relatime - tracefs nodev rw\n"
        "65 23 0:13 / /sys/kernel/tracing rw,nosuid - tracefs mysqlio rw\n"
        "66 23 0:40 / /mnt/a\\040b rw shared:5 - tmpfs my\\040src rw\n"
    )
    assert syscall_hook.mount_entry("/sys/kernel/tracing", str(info)) == ("tracefs", "mysqlio")  # the top one
    assert syscall_hook.mount_entry("/mnt/a b", str(info)) == ("tmpfs", "my src")
    assert syscall_hook.mount_entry("/sys/kernel/debug", str(info)) is None


def test_doctor_names_tracefs_and_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = str(fake_tracefs(tmp_path / "t"))
    found, hook = doctor_kernel.syscall_hook_checks((str(tmp_path / "no-debugfs"), full), never_mount)
    assert found.status == "ok" and found.value == full and found.detail == f"{full}, found mounted"
    assert hook.status == "ok" and hook.value == "tracepoints" and "17 I/O syscalls" in hook.detail

    empty = tmp_path / "empty"
    empty.mkdir()
    found, hook = doctor_kernel.syscall_hook_checks((str(tmp_path / "x"), str(empty)), lambda t: fake_tracefs(Path(t)))
    assert found.status == "ok" and "was not mounted: mounted by mysqlio just now" in found.detail

    found, hook = doctor_kernel.syscall_hook_checks((str(tmp_path / "y"), str(tmp_path / "z")), refused(errno.EPERM))
    assert found.status == "warn" and "CAP_SYS_ADMIN" in found.detail and "mount -t tracefs nodev" in found.fix
    assert found.value is None and not found.required
    assert hook.status == "warn" and hook.value == "raw" and hook.fix == "see the tracefs line"
    assert not hook.required  # the raw pair works, at a cost to every syscall

    monkeypatch.setenv(syscall_hook.HOOK_ENV, "raw")
    found, hook = doctor_kernel.syscall_hook_checks((str(tmp_path / "y"), str(tmp_path / "z")), never_mount)
    assert found.status == "skip" and hook.value == "raw" and syscall_hook.HOOK_ENV in hook.fix


def prog_fdinfo(pid: int) -> list[dict[str, str]]:
    """fdinfo of each BPF program fd the process holds."""
    return [info for info in bpf_fdinfo(pid) if "prog_type" in info]


def prog_types(pid: int) -> list[int]:
    return [int(p["prog_type"]) for p in prog_fdinfo(pid)]


def assert_hook_programs(types: list[int], hook: str) -> None:
    # on tp_btf whatever the hook: io_uring's two and the page cache's four (dirtying,
    # writeback start and end, bio queued)
    tracing = 2 + len(PAGE_CACHE_PROGRAMS) - 2
    if hook == "tracepoints":
        # enter programs for 1, 3 and 4 arguments, msync's, io_submit's, and one exit
        assert types.count(BPF_PROG_TYPE_TRACEPOINT) == 6 and types.count(BPF_PROG_TYPE_TRACING) == tracing, types
    else:
        # sys_enter, sys_exit, and msync's and io_submit's on sys_enter
        assert types.count(BPF_PROG_TYPE_TRACEPOINT) == 0 and types.count(BPF_PROG_TYPE_TRACING) == tracing + 4, types


def start_top_in_ns(
    pid: int, tracefs: str, interval_s: float = 0.3, hook: str | None = None, wrap: Any = None
) -> subprocess.Popen[str]:
    """mysqlio top --json on pid, in a private mount namespace (NS_PRELUDE's `tracefs`)."""
    argv: list[str] = [sys.executable, "-m", "mysqlio", "top", "-p", str(pid), "--json", "-i", str(interval_s)]
    env = {k: v for k, v in os.environ.items() if k != syscall_hook.HOOK_ENV}
    if hook:
        env[syscall_hook.HOOK_ENV] = hook
    return subprocess.Popen(
        in_private_ns(wrap(argv) if wrap else argv, tracefs),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def notices(err: str) -> list[str]:
    """top's stderr lines but its "tracing pid ..." one."""
    return [line for line in err.splitlines() if not line.startswith("mysqlio: tracing pid ")]


def top_mounts(pid: int) -> dict[str, tuple[str, str]]:
    """mount point -> (fstype, source) of tracefs and debugfs in pid's mount namespace."""
    found = {}
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields = line.split()
            fstype, source = line.split(" - ")[1].split()[:2]
            if fstype in ("tracefs", "debugfs"):
                found[fields[4]] = (fstype, source)
    return found


def iogen_under_top_in_ns(
    iogen: Path, directory: Path, tracefs: str, wrap: Any = None
) -> tuple[IogenRun, list[int], dict[str, tuple[str, str]], str]:
    """iogen's pwrite scenario under top in a private mount namespace: the exact
    comparison, top's program types, its namespace's tracefs/debugfs mounts, its stderr."""
    gen = start_iogen(str(iogen), str(directory), ["--scenario", "pwrite"])
    top = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        top = start_top_in_ns(gen.pid, tracefs, wrap=wrap)
        assert top.stdout is not None
        first = read_json_line(top.stdout, 30, "mysqlio top")  # probes attached
        types, mounts = prog_types(top.pid), top_mounts(top.pid)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 60, "iogen run")
        time.sleep(0.3)
        rest, err = stop_top(top)
    finally:
        if top is not None and top.poll() is None:
            top.kill()
            top.wait()
        if gen.poll() is None:
            gen.kill()
        gen.wait()
    traced = FileTotals()
    for obj in (first, *rest):
        traced.add(obj)
    return IogenRun(expected, traced, [first, *rest]), types, mounts, err


@pytest.mark.bpf
def test_fresh_machine_mounts_tracefs(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """No tracefs, no debugfs (a new machine): top mounts tracefs at /sys/kernel/tracing,
    says so in one line, runs on the per-syscall tracepoints and counts exactly."""
    before = host_tracefs()
    run, types, mounts, err = iogen_under_top_in_ns(iogen, tmp_path, "fresh")
    assert notices(err) == [MOUNTED_LINE]
    assert mounts == {syscall_hook.TRACEFS: ("tracefs", syscall_hook.MOUNT_SOURCE)}
    assert_hook_programs(types, "tracepoints")
    assert run.expected["files"] and run.traced.totals
    assert_exact(run, tmp_path)
    assert host_tracefs() == before  # the host's mounts are untouched


@pytest.mark.bpf
def test_tracefs_under_debugfs_is_used(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """Only debugfs mounted (as in the virtme-ng guests): libbpf reads
    /sys/kernel/debug/tracing, so nothing is mounted and nothing said."""
    run, types, mounts, err = iogen_under_top_in_ns(iogen, tmp_path, "debugfs")
    assert notices(err) == []
    assert syscall_hook.TRACEFS not in mounts and mounts["/sys/kernel/debug"][0] == "debugfs", mounts
    assert_hook_programs(types, "tracepoints")
    assert_exact(run, tmp_path)


@pytest.mark.bpf
def test_tracefs_unmountable_falls_back_loudly(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    """No tracefs and no CAP_SYS_ADMIN to mount it (root with CAP_BPF + CAP_PERFMON
    only): the raw pair, said on stderr with the reason and the fix; still exact."""
    run, types, mounts, err = iogen_under_top_in_ns(iogen, tmp_path, "fresh", wrap=without_cap_sys_admin)
    (line,) = notices(err)
    assert line.startswith(f"mysqlio: tracefs is not mounted and mounting it at {syscall_hook.TRACEFS} failed"), line
    assert "CAP_SYS_ADMIN" in line and "raw sys_enter/sys_exit" in line, line
    assert "fix: run mysqlio as root, or mount it once as root: mount -t tracefs nodev /sys/kernel/tracing" in line
    assert mounts == {}
    assert_hook_programs(types, "raw")
    assert_exact(run, tmp_path)


@pytest.fixture
def bpf_run_stats() -> Iterator[None]:
    """Run-time statistics of every BPF program, for as long as the fd is held
    (BPF_ENABLE_STATS: switched off again when it closes, even if the test dies)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(4)  # union bpf_attr { __u32 type = BPF_STATS_RUN_TIME (0) }
    fd = libc.syscall(SYS_BPF[platform.machine()], BPF_ENABLE_STATS, attr, ctypes.sizeof(attr))
    if fd < 0:
        pytest.fail(f"BPF_ENABLE_STATS: {os.strerror(ctypes.get_errno())}")
    yield
    os.close(fd)


BUSY = f"""
import os, sys
sys.stdin.readline()
for _ in range({BUSY_SYSCALLS}):
    os.getppid()
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.mark.bpf
@pytest.mark.parametrize("hook", ["tracepoints", "raw"])
def test_hook_programs_and_their_runs(bpf_ready: None, bpf_run_stats: None, hook: str) -> None:
    """top loads the programs of the hook asked for; 200k getppid() calls of the
    traced process run the raw pair 400k times, and the per-syscall tracepoints
    (attached to I/O syscalls only) a small fraction of that. Forced to the
    tracepoints, top mounts tracefs if the host has none (in its own namespace)."""
    busy = subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    top = start_top_in_ns(busy.pid, "inherit", 0.5, hook=hook)
    try:
        assert top.stdout is not None and busy.stdin is not None and busy.stdout is not None
        read_json_line(top.stdout, 30, "mysqlio top")  # attached
        progs = prog_fdinfo(top.pid)
        types = [int(p["prog_type"]) for p in progs]
        runs_before = sum(int(p.get("run_cnt", 0)) for p in progs)
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline().strip() == "done"
        runs = sum(int(p.get("run_cnt", 0)) for p in prog_fdinfo(top.pid)) - runs_before
        busy.stdin.write("end\n")
        busy.stdin.flush()
        busy.wait(timeout=30)
    finally:
        busy.kill()
        _, err = stop_top(top)
    assert_hook_programs(types, hook)
    if hook == "tracepoints":
        assert notices(err) in ([], [MOUNTED_LINE]), err
        assert runs < BUSY_SYSCALLS // 4, runs
    else:
        assert notices(err) == [], err
        assert runs >= 2 * BUSY_SYSCALLS, runs


@pytest.mark.bpf
def test_raw_hook_counts_exactly(bpf_ready: None, iogen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback hook gives the same exact per-file counts on every iogen path."""
    monkeypatch.setenv(syscall_hook.HOOK_ENV, "raw")
    run = run_iogen_traced(str(iogen), str(tmp_path), [])
    assert len(run.expected["files"]) >= 15
    assert_exact(run, tmp_path)


def test_a_kernel_btf_without_the_context_gets_the_raw_hook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The per-syscall programs read struct syscall_tp_t (every kernel seen has it in its
    BTF); a BTF without it (here: the floor object's own) gets the raw pair, said once."""
    full = str(fake_tracefs(tmp_path / "full"))
    floor = str(REPO / "tracer" / "bpf" / "empty.bpf.o")
    assert syscall_hook.choose((full,), never_mount).hook == "tracepoints"  # the kernel's BTF has it
    syscall_hook._chosen.clear()
    choice = syscall_hook.choose((full,), never_mount, btf_path=floor)
    assert choice.hook == "raw" and "no struct syscall_tp_t" in choice.refused
    assert capsys.readouterr().err == (
        "mysqlio: the kernel's BTF has no struct syscall_tp_t, the context the per-syscall tracepoints' programs "
        "read; using the raw sys_enter/sys_exit hook instead, which every syscall on the machine pays for\n"
    )


@pytest.fixture(scope="module")
def past_record_object(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mysqlio's probes whose per-syscall exit programs read past the event's record
    (tests/fixtures/past_record.bpf.c), built as the Makefile builds the real ones."""
    obj = tmp_path_factory.mktemp("past_record") / "past_record.bpf.o"
    arch = {"x86_64": "x86", "aarch64": "arm64"}[platform.machine()]
    source = REPO / "tests" / "fixtures" / "past_record.bpf.c"
    cflags = ["-g", "-O2", "-Wall", "-Werror", "-target", "bpf", f"-D__TARGET_ARCH_{arch}"]
    includes = [f"-I{REPO / 'build'}", f"-I{REPO / 'probes'}"]  # vmlinux.h (make setup), mysqlio.bpf.c
    subprocess.run(["clang", *cflags, *includes, "-c", str(source), "-o", str(obj)], check=True)
    return obj


@pytest.mark.bpf
def test_refused_tracepoints_fall_back_to_raw(
    bpf_ready: None, past_record_object: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The kernel refuses the per-syscall exit programs at attach (a read past the
    event's record, as on RT kernels before the probes read struct syscall_tp_t): the
    probes load again on the raw hook, said in one stderr line with the kernel's
    reason, and count doctor's test write and fsync exactly; doctor's hook line names
    the cause. Forced to the tracepoints, doctor fails, its fix the variable, not
    SystemTap."""
    monkeypatch.setenv("MYSQLIO_BPF_OBJECT", str(past_record_object))
    attach = doctor_probe.check_probe_attach([])
    assert attach.status == "ok", attach  # 4096 bytes and their fsync counted exactly
    why = (
        r"attaching handle_exit\w* to syscalls:sys_exit_fsync: Permission denied "
        r"\(a program reads past the event's record, which the kernel checks at attach\)"
    )
    refusal = rf"the kernel refused the per-syscall tracepoints \({why}\)"
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("mysqlio:")]
    assert len(lines) == 1 and re.fullmatch(
        f"mysqlio: {refusal}; using the raw sys_enter/sys_exit hook instead, which every syscall on the machine "
        "pays for",
        lines[0],
    ), lines
    hook = doctor_kernel.check_syscall_hook(syscall_hook.choose(quiet=True))
    assert hook.status == "warn" and hook.value == "raw" and re.search(refusal, hook.detail), hook

    monkeypatch.setattr(syscall_hook, "_chosen", {})
    monkeypatch.setenv(syscall_hook.HOOK_ENV, "tracepoints")
    forced = doctor_probe.check_probe_attach([])
    assert forced.status == "fail", forced
    assert re.fullmatch(f"the kernel refused the per-syscall tracepoints: {why}", forced.detail), forced
    assert (
        forced.fix == f"unset {syscall_hook.HOOK_ENV}: mysqlio then falls back to the raw hook, which counts the same"
    )
