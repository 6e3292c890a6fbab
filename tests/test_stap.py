"""The SystemTap backend, as far as it can be tested on a machine that cannot load modules:

- every script compiles to a module (stap -p4) against Debian's own kernel headers;
- the scripts print exactly the records tracer/stap_protocol.py parses, with its constants;
- captured script output (tests/fixtures/stap, made from a real iogen run by
  make_fixtures.py) goes through the same resolver, classifier, model, trace
  writer and report as the eBPF backend's, and gives iogen's numbers;
- stap's process handling (start, intervals, errors, stop) against a stand-in stap;
- an unusable environment is one line.

Like the BPF tests, the compile tests never skip: without stap or the headers they fail with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio import backend, preflight, stap_compile, stap_modules, stap_process
from mysqlio import stap_protocol as proto
from mysqlio.abi import Api, Op
from mysqlio.devtools.traced import COUNTERS, FileTotals, assert_one_line_error
from mysqlio.errors import StapError, UserError
from mysqlio.mountinfo import Mount, MountTable
from mysqlio.probe import FileIdentity
from mysqlio.record import _Names
from mysqlio.report.build import build_report
from mysqlio.report.to_json import report_json
from mysqlio.sampling import IntervalSampler
from mysqlio.session import Session
from mysqlio.stap_probe import StapProbe, replay_probe
from mysqlio.trace import BatchKeys, TraceMeta, TraceReader, TraceWriter

REPO = Path(__file__).resolve().parent.parent
STAP_DIR = REPO / "stap"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stap"
FIXTURE_DEV = os.makedev(8, 3)
EMITTERS = {
    "H": "mio_emit_hello",
    "N": "mio_emit_name",
    "A": "mio_emit_row",
    "E": "mio_emit_event",
    "I": "mio_emit_mark",
}
# stap cannot see io_uring (no tracepoint gives it the file); iogen's uring scenario uses nothing else
NOT_TRACED = ("uring.dat", "uring_err.dat", "uring_fixed.dat")


def stap_sources() -> dict[Path, str]:
    return {p: p.read_text() for p in sorted(STAP_DIR.rglob("*.stp"))}


def free_pid() -> int:
    """A pid no process has (beyond pid_max)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


# ---- compile: stap -p4 against Debian's kernel headers ----


def headers_release() -> str:
    """The kernel release of Debian's linux-headers-amd64 (the running kernel is not Debian's)."""
    dpkg = subprocess.run(
        ["dpkg-query", "-W", "-f=${Depends}", "linux-headers-amd64"], capture_output=True, text=True, check=False
    )
    match = re.search(r"linux-headers-(\S+)", dpkg.stdout)
    candidates = [match.group(1)] if match else []
    candidates += sorted((p.parent.name for p in Path("/lib/modules").glob("*/build")), reverse=True)
    for release in candidates:
        if Path(f"/lib/modules/{release}/build/Makefile").exists():
            return release
    pytest.fail("no kernel headers to compile against: install linux-headers-amd64 (tools/install-deps.sh)")


@dataclasses.dataclass
class Compiled:
    returncode: int
    seconds: float
    module: Path
    output: str


@dataclasses.dataclass
class Build:
    release: str
    runtime: Path | None
    work: Path
    env: dict[str, str]

    def stap_build(self, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """`mysqlio stap-build` for the headers' release: the production path to the modules."""
        return subprocess.run(
            [sys.executable, "-m", "mysqlio", "stap-build", "--kernel", self.release, "-o", str(out), *args],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=1200,
        )

    def run(self, mode: str, last_pass: int) -> subprocess.CompletedProcess[str]:
        cmd = stap_compile.compile_command(mode, release=self.release, runtime=self.runtime, last_pass=last_pass)
        return subprocess.run(
            cmd, cwd=self.work, env=self.env, capture_output=True, text=True, check=False, timeout=1200
        )


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    if shutil.which("stap") is None:
        pytest.fail("stap is not installed: install systemtap (tools/install-deps.sh)")
    release = headers_release()
    work = tmp_path_factory.mktemp("stap-build")
    cache = Path(os.environ.get("MYSQLIO_TEST_STAP_CACHE") or work / "cache")
    runtime = stap_compile.compat_runtime(release, cache_dir=cache)  # a stable path: part of stap's cache keys
    env = {**os.environ, "SYSTEMTAP_DIR": str(cache), "XDG_CACHE_HOME": str(cache)}
    return Build(release, runtime, work, env)


@pytest.fixture(scope="session")
def compiled(build: Build) -> dict[str, Compiled]:
    """Both scripts compiled once per session by `mysqlio stap-build`, one after the other: the
    first builds stap's caches (autoconf probes of the headers, tracepoint and type queries) in a
    fresh directory, the second reuses them. MYSQLIO_TEST_STAP_CACHE keeps them between runs."""
    out = build.work / "modules"
    proc = build.stap_build(out)
    output = proc.stdout + proc.stderr
    manifest = json.loads((out / stap_modules.MANIFEST).read_text()) if proc.returncode == 0 else {"modules": {}}
    results = {}
    for mode in stap_compile.MODES:
        entry = manifest["modules"].get(mode, {"file": "none.ko", "compile_s": 0.0})
        results[mode] = Compiled(proc.returncode, entry["compile_s"], out / entry["file"], output)
        print(
            f"stap-build {mode}: {entry['compile_s']:.1f} s (runtime {'patched copy' if build.runtime else 'as installed'})"
        )
    return results


@pytest.mark.parametrize("mode", stap_compile.MODES)
def test_script_compiles_to_a_module(compiled: dict[str, Compiled], mode: str) -> None:
    result = compiled[mode]
    assert result.returncode == 0, result.output[-3000:]
    assert result.module.exists(), result.output[-3000:]
    vermagic = re.search(rb"vermagic=(\S+)", result.module.read_bytes())
    assert vermagic and vermagic.group(1).decode() == headers_release()
    assert stap_modules.module_release(result.module) == headers_release()
    assert stap_modules.module_info(result.module)["name"] == stap_modules.MODULE_NAMES[mode]


@pytest.mark.parametrize("mode", stap_compile.MODES)
def test_hot_paths_lock_nothing_before_their_filters(build: Build, compiled: dict[str, Compiled], mode: str) -> None:
    """In the C stap generates, a tracepoint handler takes SystemTap's locks on the script's
    globals only after its pid test, and a read/write handler only once the file is known to be
    storage: the other system calls of the machine, and mysqld's socket I/O, take no lock."""
    proc = build.run(mode, 3)
    assert proc.returncode == 0, proc.stderr[-2000:]
    handlers = re.findall(r"static void probe_\d+ \(struct context.*?\n(.*?)\n\}\n", proc.stdout, re.S)
    checked = 0
    for body in handlers:
        if "raw_syscalls:sys_" not in body or "global_lock(" not in body:
            continue
        # one place takes the locks, among the handler's own statements (indented 4), not in
        # a branch: SystemTap 4.8 puts them before the first statement that touches a global,
        # and a path around that statement (an `if` ended by `next`) would run unlocked. The
        # first top script did that: requests added with no lock raced the flush's delete.
        sites = [line for line in body.splitlines() if "if (c->locked == 0)" in line]
        assert len(sites) == 1 and sites[0].startswith("    if"), sites
        lock = body.index("stp_lock_probe(")
        assert body.index("function___global_target") < lock
        if "mio_hit_parity" in body:  # top: each aggregate's handler, in its epoch only
            assert body.index("mio_hit_parity") < lock
        if "mio_is_storage" in body and "mio_iocb" not in body:
            assert body.rindex("mio_is_storage") < lock
            checked += 1
    assert checked == 2  # top: one handler per aggregate (iocbs: in a function); record: entry and exit


def test_stap_build_writes_modules_and_a_manifest(build: Build, compiled: dict[str, Compiled]) -> None:
    """stap-build's directory: one .ko per script, and a manifest naming the kernel release, the
    script of each module, its checksum, the protocol and mysqlio's version."""
    from mysqlio import __version__

    out = compiled["top"].module.parent
    manifest = json.loads((out / stap_modules.MANIFEST).read_text())
    assert manifest["kernel_release"] == build.release and manifest["mysqlio_version"] == __version__
    assert manifest["protocol_version"] == proto.PROTOCOL_VERSION and manifest["format"] == stap_modules.MANIFEST_FORMAT
    assert manifest["scripts_sha256"] == stap_modules.scripts_digest()
    assert sorted(manifest["modules"]) == sorted(stap_compile.MODES)
    for mode, entry in manifest["modules"].items():
        assert entry["script"] == stap_compile.SCRIPTS[mode]
        assert entry["sha256"] == stap_modules._sha256_file(out / entry["file"])
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [stap_modules.MANIFEST, "mysqlio_record.ko", "mysqlio_top.ko"]
    )


def test_stap_build_without_headers_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mysqlio", "stap-build", "--kernel", "1.2.3-none", "-o", str(tmp_path / "m")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert_one_line_error(proc, "no headers for kernel 1.2.3-none", "/lib/modules/1.2.3-none/build")
    assert not (tmp_path / "m").exists()


def test_stap_build_names_a_missing_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian 11's headers name gcc-10, which Debian 12 has not: one line, and --cc overrides it."""
    release = headers_release()
    assert stap_modules.headers_compiler(release) in (None, *(f"gcc-{n}" for n in range(4, 20)))
    monkeypatch.setattr(stap_modules, "headers_compiler", lambda release: "gcc-99")
    with pytest.raises(UserError, match="build modules with gcc-99, which is not installed here") as info:
        stap_modules.build_modules(release, tmp_path / "m")
    assert "--cc" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UserError, match="--cc cc-none: no such compiler"):
        stap_modules.build_modules(release, tmp_path / "m", cc="cc-none")
    assert not (tmp_path / "m").exists()


def test_prebuilt_module_is_checked_before_it_is_loaded(
    build: Build, compiled: dict[str, Compiled], tmp_path: Path
) -> None:
    """--stap-module: the module for the mode, whole, of this protocol, for the running kernel;
    anything else is one line naming what is wrong."""
    built = compiled["top"].module.parent
    release = build.release
    ok = stap_modules.prebuilt_module(str(built), "top", release=release)
    assert ok.module == built / "mysqlio_top.ko" and ok.release == release and ok.manifest is not None
    assert stap_modules.prebuilt_module(str(built / "mysqlio_record.ko"), "record", release=release).mode == "record"

    def refused(path: Path | str, mode: str, *fragments: str, release: str = release) -> None:
        with pytest.raises(UserError) as info:
            stap_modules.prebuilt_module(str(path), mode, release=release)
        message = str(info.value)
        assert "\n" not in message and message.startswith(f"--stap-module {path}: "), message
        for fragment in fragments:
            assert fragment in message, message

    refused(built, "top", f"built for kernel {release}, this machine runs 9.9.9", release="9.9.9")
    refused(built / "mysqlio_record.ko", "top", "this is the record module, top needs mysqlio_top.ko")
    refused(tmp_path / "nothing", "top", "no such file or directory")
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    data = (copy / "mysqlio_top.ko").read_bytes()
    (copy / "mysqlio_top.ko").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    refused(copy, "top", "mysqlio_top.ko is corrupt (its checksum differs from the manifest's)")
    (copy / "mysqlio_top.ko").unlink()
    refused(copy, "top", "mysqlio_top.ko is missing")
    manifest = json.loads((copy / stap_modules.MANIFEST).read_text())
    manifest["protocol_version"] = 1
    (copy / stap_modules.MANIFEST).write_text(json.dumps(manifest))
    refused(copy, "record", "protocol 1", f"speaks protocol {proto.PROTOCOL_VERSION}")
    (copy / stap_modules.MANIFEST).write_text("{")
    refused(copy, "top", "manifest.json is corrupt")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "cut.ko").write_bytes(data[: len(data) // 2])
    refused(bare / "cut.ko", "top", "cut.ko is not a usable kernel module")
    (bare / "text.ko").write_text("not a module")
    refused(bare / "text.ko", "top", "not an ELF file")
    shutil.copyfile(built / "mysqlio_top.ko", bare / "top.ko")  # no manifest beside: the module's own vermagic
    assert stap_modules.prebuilt_module(str(bare / "top.ko"), "top", release=release).manifest is None
    refused(bare / "top.ko", "top", f"built for kernel {release}", release="9.9.9")


def test_prebuilt_module_on_another_kernel_is_one_line(compiled: dict[str, Compiled]) -> None:
    """On this machine (not the headers' kernel) top refuses the module before loading anything."""
    built = compiled["top"].module.parent
    proc = subprocess.run(
        [sys.executable, "-m", "mysqlio", "top", "-p", str(os.getpid()), "--stap-module", str(built), "-n", "1"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert_one_line_error(proc, f"built for kernel {headers_release()}", f"this machine runs {os.uname().release}")
    with pytest.raises(UserError, match="use it with --backend stap"):
        backend.select_backend("bpf", str(built), "top")


def test_prebuilt_needs_only_staprun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No stap and no headers are needed to run a prebuilt module, only staprun."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "staprun").write_text("#!/bin/sh\n")
    (bindir / "staprun").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    problem = backend.stap_problem(release="1.2.3-no-headers", prebuilt=True)
    if problem is not None:  # this machine: no loadable modules, or not x86_64
        assert "stap," not in problem and "headers" not in problem
    assert "needs stap" in (backend.stap_problem(release="1.2.3-no-headers") or "needs stap")


def test_compat_runtime_only_when_headers_need_it(tmp_path: Path) -> None:
    release = headers_release()
    needed = stap_compile._header_declares(release, "linux/task_work.h", "task_work_cancel_func")
    runtime = stap_compile.compat_runtime(release, cache_dir=tmp_path)
    if not needed or "task_work_cancel_func" in (stap_compile.stap_runtime_dir() / "stp_task_work.c").read_text():
        assert runtime is None
        return
    assert runtime is not None
    patched = (runtime / "stp_task_work.c").read_text()
    assert "task_work_cancel_func(task, func)" in patched
    assert not re.search(r"\btask_work_cancel\b", patched)
    assert stap_compile.compat_runtime(release, cache_dir=tmp_path) == runtime  # made once


# ---- the scripts and the parser agree ----


def printf_formats(text: str) -> list[str]:
    return re.findall(r'(?<![\w])printf\s*\(\s*"((?:[^"\\]|\\.)*)"', text)


def function_body(text: str, name: str) -> str:
    start = text.index(f"function {name}")
    end = text.find("\nfunction ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_scripts_print_exactly_the_protocol_records() -> None:
    """Every printf of the scripts is one record of the protocol, each printed in one place."""
    formats = [f for text in stap_sources().values() for f in printf_formats(text)]
    assert sorted(formats) == sorted(r.printf_format() for r in proto.RECORD_TYPES.values())


def test_each_record_has_its_emitter_and_each_script_its_records() -> None:
    tapset = (STAP_DIR / "tapset" / "mysqlio.stp").read_text()
    for tag, emitter in EMITTERS.items():
        assert printf_formats(function_body(tapset, emitter)) == [proto.RECORD_TYPES[tag].printf_format()]
    for mode, tags in proto.SCRIPT_RECORDS.items():
        script = stap_compile.script_path(mode).read_text()
        used = {tag for tag, emitter in EMITTERS.items() if re.search(rf"\b{emitter}\s*\(", script)}
        assert used == set(tags), mode


def test_hello_carries_the_protocol_version() -> None:
    body = function_body((STAP_DIR / "tapset" / "mysqlio.stp").read_text(), "mio_emit_hello")
    version = re.search(r'printf\("[^"]*",\s*(\d+),', body)
    assert version and int(version.group(1)) == proto.PROTOCOL_VERSION


def stpm_defines() -> dict[str, str]:
    text = (STAP_DIR / "tapset" / "mysqlio.stpm").read_text()
    return dict(re.findall(r"@define (\w+) %\(\s*(.*?)\s*%\)", text))


STAP_UNCOUNTED_OPS = {Op.MSYNC, Op.DIRTY, Op.WRITEBACK, Op.DISK_READ, Op.READAHEAD, Op.DIRECT_READ}


def test_codes_match_python_and_limits_match_the_bpf_probe() -> None:
    defines = stpm_defines()
    # the scripts see syscalls only: msync and the page cache are the eBPF backend's
    # (StapProbe.uncounted() says so)
    assert {k[len("MIO_OP_") :]: int(v) for k, v in defines.items() if k.startswith("MIO_OP_")} == {
        op.name: op.value for op in Op if op not in STAP_UNCOUNTED_OPS
    }
    api = {k[len("MIO_API_") :]: int(v) for k, v in defines.items() if k.startswith("MIO_API_")}
    assert api == {a.name: a.value for a in Api if a not in (Api.IO_URING, Api.KERNEL)}
    header = (REPO / "probes" / "mysqlio.h").read_text()
    for limit in ("MAX_IOCBS", "MAX_IOVECS", "MAX_AIO_EVENTS"):
        assert defines[f"MIO_{limit}"] == re.search(rf"#define {limit} (\d+)", header).group(1), limit


def test_syscall_numbers_match_the_bpf_probe() -> None:
    bpf = (REPO / "probes" / "mysqlio.bpf.c").read_text()
    x86 = bpf[bpf.index("__TARGET_ARCH_x86") : bpf.index("__TARGET_ARCH_arm64")]
    bpf_numbers = {k: v for k, v in re.findall(r"#define NR_(\w+) (\d+)", x86) if k != "msync"}
    stap_numbers = {k[3:]: v for k, v in stpm_defines().items() if k.startswith("NR_")}
    assert set(bpf_numbers) <= set(stap_numbers)
    assert {k: stap_numbers[k] for k in bpf_numbers} == bpf_numbers


# ---- the parser ----


def test_every_record_round_trips() -> None:
    records: list[proto.Record] = [
        proto.Hello(1, "top", 4242, "stap_abc_1"),
        proto.Name(8388611, 12, 1, True, (b"var", b"lib", b"my sql", b"t\n\xff.ibd")),
        proto.Name(8388611, 13, 0, False, ()),
        proto.Row(8388611, 12, 4243, 0, 1, 16384, 1, 0),
        proto.Event(1_700_000_000_000_000_000, 5000, 4243, 1, 0, 8388611, 12, -1, -9),
        proto.Mark(7, 1_700_000_000_000_000_000, dict(zip(proto.DROP_FIELDS, range(1, 8), strict=True)), 9),
    ]
    for record in records:
        line = proto.format_record(record)
        assert line.endswith("\n") and "\n" not in line[:-1]
        assert proto.parse_line(line) == record


@pytest.mark.parametrize(
    "line",
    [
        "",
        "Z 1 2",
        "A 1 2 3",
        "A 1 2 3 4 5 6 7 x",
        "N 1 2 1 1 zz/00",
        "I 1 2 3 4 5 6 7",
        "I 1 2 3 4 5 6 7 8 9",
        "H 1 top 12",
    ],
)
def test_malformed_lines_are_protocol_errors(line: str) -> None:
    with pytest.raises(proto.ProtocolError):
        proto.parse_line(line)


def test_mountinfo_maps_filesystem_paths_to_the_process_view() -> None:
    table = MountTable.parse(
        "22 1 8:3 / / rw - ext4 /dev/sda3 rw\n"
        "30 22 8:17 / /var/lib/mysql rw - xfs /dev/sdb1 rw\n"
        "31 22 8:17 /binlogs /srv/my\\040logs rw - xfs /dev/sdb1 rw\n"
        "32 22 0:45 / /tmp rw - tmpfs tmpfs rw\n"
    )
    assert table.absolute(os.makedev(8, 3), "etc/my.cnf") == "/etc/my.cnf"
    assert table.absolute(os.makedev(8, 17), "ibdata1") == "/var/lib/mysql/ibdata1"
    assert table.absolute(os.makedev(8, 17), "binlogs/mysql-bin.000001") == "/srv/my logs/mysql-bin.000001"
    assert table.absolute(os.makedev(0, 45), "#sql-1.ibd") == "/tmp/#sql-1.ibd"
    assert table.absolute(os.makedev(9, 9), "x") is None


# ---- captured output through the whole pipeline ----


@dataclasses.dataclass
class Materialized:
    """The fixture moved onto this machine: iogen's files where the run left them, under tmp_path,
    and the fixture's identities replaced by theirs, so that the real FileResolver checks them."""

    directory: Path
    expected: dict[str, dict]
    mounts: MountTable
    ids: dict[tuple[int, int], tuple[int, int]]  # fixture (kernel dev, ino) -> this machine's

    def lines(self, name: str) -> Iterator[str]:
        for line in (FIXTURES / name).read_text().splitlines(keepends=True):
            record = proto.parse_line(line)
            if isinstance(record, proto.Name | proto.Row | proto.Event):
                dev, ino = self.ids[(record.dev, record.ino)]
                record = dataclasses.replace(record, dev=dev, ino=ino)
            yield proto.format_record(record)


def kdev(dev: int) -> int:
    return (os.major(dev) << 20) | os.minor(dev)


@pytest.fixture
def materialized(tmp_path: Path) -> Materialized:
    files = json.loads((FIXTURES / "iogen-files.json").read_text())
    root = tmp_path / "fs"
    gone = root / "gone"
    gone.parent.mkdir(parents=True)
    gone.write_bytes(b"")
    st_gone = gone.stat()
    gone.unlink()  # an inode number no file in the directory has
    ids = {}
    for f in files:
        if f["path"] is None:
            real = (kdev(st_gone.st_dev), st_gone.st_ino)
        else:
            path = root / f["path"].lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            st = path.stat()
            real = (kdev(st.st_dev), st.st_ino)
        major, minor = (int(x) for x in f["dev"].split(":"))
        ids[((major << 20) | minor, f["ino"])] = real
    expected = json.loads((FIXTURES / "iogen-expected.json").read_text())
    want = {str(root) + f["path"]: f for f in expected["files"]}
    # the fixture's filesystem root is tmp_path/fs here
    mounts = MountTable([Mount(root.stat().st_dev, "/", str(root))])
    return Materialized(root / "srv" / "iogen", want, mounts, ids)


def traced_expectation(m: Materialized) -> dict[str, dict]:
    return {p: f for p, f in m.expected.items() if not p.endswith(NOT_TRACED)}


def test_fixture_follows_the_protocol_and_covers_every_record() -> None:
    for name, mode in (("iogen-top.txt", "top"), ("iogen-record.txt", "record")):
        records = [proto.parse_line(line) for line in (FIXTURES / name).read_text().splitlines()]
        assert records[0] == dataclasses.replace(records[0], mode=mode, version=proto.PROTOCOL_VERSION)
        tags = {type(r).__name__ for r in records}
        assert {proto.RECORD_TYPES[t] for t in proto.SCRIPT_RECORDS[mode]} == {
            proto.RECORD_TYPES[{"Hello": "H", "Name": "N", "Row": "A", "Event": "E", "Mark": "I"}[t]] for t in tags
        }
        marks = [r.seq for r in records if isinstance(r, proto.Mark)]
        assert marks == list(range(1, len(marks) + 1))


def test_top_pipeline_gives_iogens_numbers(materialized: Materialized) -> None:
    """Captured top output -> StapProbe -> IntervalSampler (top's own) -> Interval JSON, as
    `top --json` prints it: per file, every counter equals iogen's, names and deletions right."""
    m = materialized
    pid = free_pid()
    probe = replay_probe(m.lines("iogen-top.txt"), pid, "top", m.mounts)
    sampler = IntervalSampler(Session(probe, pid))
    intervals = []
    while not probe.ended:
        intervals.append(sampler.sample().to_json())
    totals = FileTotals()
    for obj in intervals:
        json.dumps(obj)  # what top --json writes
        totals.add(obj)
    got = totals.under(str(m.directory))
    want = traced_expectation(m)
    assert totals.lost_events == 0
    assert sorted(got) == sorted(want)
    for path, w in want.items():
        assert {c: got[path][c] for c in COUNTERS} == {c: w[c] for c in COUNTERS}, path
        assert totals.deleted[path] == w["deleted"], path
    assert len([i for i in intervals if i["files"]]) >= 3  # the run spans several intervals
    apis = {Path(f["path"]).name: set(f["apis"]) for obj in intervals for f in obj["files"]}
    assert apis["aio_a.dat"] == {"libaio"} and apis["write.dat"] == {"syscall"}


def test_record_pipeline_gives_iogens_numbers(materialized: Materialized, tmp_path: Path) -> None:
    """Captured record output -> StapProbe events (EVENT_DTYPE) -> the trace writer -> report:
    per file, every counter equals iogen's; latencies and offsets are carried."""
    m = materialized
    pid = free_pid()
    lines = list(m.lines("iogen-record.txt"))
    first_ns = min(r.time_ns for r in map(proto.parse_line, lines) if isinstance(r, proto.Event))
    start_mono_ns = time.monotonic_ns()
    offset = first_ns - start_mono_ns - 1_000_000  # the first event 1 ms after the start
    probe = replay_probe(lines, pid, "record", m.mounts, clock_offset_ns=offset)
    names = _Names(Session(probe, pid))
    meta = TraceMeta("host", "kernel", pid, None, None, None, time.time(), start_mono_ns, "test")
    trace = str(tmp_path / "t.trace")
    writer = TraceWriter(trace, meta)
    reader = probe.events_reader()
    events = reader.read()
    assert len(events) == sum(1 for line in lines if line.startswith("E "))
    probe.drain()
    keys = BatchKeys.of(events)
    names.learn(keys)
    writer.write(events, names.files, names.threads, sum(probe.drops().as_dict().values()), keys=keys)
    writer.close(lost_total=0)
    report = report_json(build_report(TraceReader(trace), "file", per_second=True))
    assert report["lost_events"] == 0 and report["events"] == len(events)
    got = {f["path"]: f for f in report["files"] if f["path"].startswith(str(m.directory) + "/")}
    want = traced_expectation(m)
    assert sorted(got) == sorted(want)
    for path, w in want.items():
        assert {c: got[path][c] for c in COUNTERS} == {c: w[c] for c in COUNTERS}, path
        assert got[path]["deleted"] == w["deleted"], path
    assert (events["latency_ns"] > 0).all()
    reads = events[(events["op"] == Op.READ) & (events["api"] == Api.SYSCALL)]
    assert 15000 in reads["offset"].tolist()  # preadv2 at 15000


def test_skipped_probes_are_lost_events_of_their_interval(capsys: pytest.CaptureFixture[str]) -> None:
    """The regression of the first live run: requests stap skipped (a hot path that did not get
    the aggregate's lock while a flush held it) were told only in stap's exit message, and top
    showed lost_events 0. The marks now carry stap's skipped and transport-failure counts, and
    each interval shows its own."""
    pid = free_pid()
    lines = [
        f"H {proto.PROTOCOL_VERSION} top {pid} m\n",
        "I 1 1 0 0 0 0 0 0 0 0\n",
        "I 2 2 0 0 0 0 0 2 0 0\n",
        "I 3 3 0 0 0 0 0 2 1 0\n",
        "I 4 4 0 0 0 0 0 2 1 3\n",
    ]
    probe = replay_probe(lines, pid, "top", MountTable())
    sampler = IntervalSampler(Session(probe, pid))
    lost = [sampler.sample().to_json()["lost_events"] for _ in range(4)]
    assert lost == [0, 2, 1, 0]
    assert probe.drops().as_dict()["skipped_probes"] == 2 and probe.drops().as_dict()["transport_failures"] == 1
    # the last mark counted io_uring calls: not a loss, but said once
    assert probe.uses_io_uring and probe.io_uring_calls == 3
    err = capsys.readouterr().err
    assert err.count("io_uring") == 2 and "made 3 io_uring calls" in err and "\n" not in err.strip()


def test_a_name_walked_too_deep_is_shown_as_incomplete() -> None:
    name = proto.Name(kdev(FIXTURE_DEV), 5, 0, False, (b"mysql", b"t1.ibd"))
    lines = [proto.format_record(proto.Hello(proto.PROTOCOL_VERSION, "top", 1, "m")), proto.format_record(name)]
    probe = replay_probe(lines, free_pid(), "top", MountTable.parse((FIXTURES / "mountinfo.txt").read_text()))
    probe.drain()
    kn = probe.kernel_name(FileIdentity(FIXTURE_DEV, 5))
    assert kn is not None and kn.path == ".../mysql/t1.ibd" and not kn.complete and kn.deleted
    assert probe.kernel_name(FileIdentity(FIXTURE_DEV, 6)) is None


def test_a_script_of_another_protocol_version_is_refused() -> None:
    with pytest.raises(StapError, match="protocol 1"):
        replay_probe(["H 1 top 1 m\n"], 1, "top", MountTable())


# ---- the stap process, with a stand-in stap ----

# stand-ins for stap (compiles: prints a module path) and staprun (runs it: the protocol)
FAKE_STAP = textwrap.dedent(
    """\
    import os, sys
    args = sys.argv[1:]
    if os.environ["FAKE_STAP"] == "fail":
        sys.stderr.write("Pass 1: parsed user script\\n")
        sys.stderr.write('semantic error: no match while resolving probe point kernel.trace("raw_syscalls:sys_exit")\\n')
        sys.stderr.write("Pass 2: analysis failed.  [man error::pass2]\\n")
        sys.exit(1)
    assert "-p4" in args
    mode = "record" if args[-1].endswith("mysqlio-record.stp") else "top"
    module = os.path.join(os.environ["FAKE_CACHE"], f"stap_0123_{mode}.ko")
    open(module, "w").close()
    print(module)
    """
)
FAKE_STAPRUN = textwrap.dedent(
    """\
    import os, sys
    args = sys.argv[1:]
    assert "-R" in args
    mode = "record" if args[-1].endswith("_record.ko") else "top"
    pid = int(args[args.index("-x") + 1])
    procfs = os.path.join(os.environ["MYSQLIO_STAP_PROCFS"], "fakemod")
    os.makedirs(procfs)
    files = ["flip", "flush0", "flush1"] if mode == "top" else ["flush"]
    for name in files:
        os.mkfifo(os.path.join(procfs, name))
    print(f"H 2 {mode} {pid} fakemod", flush=True)
    print(os.environ["FAKE_NAME"], flush=True)
    seq = 0
    try:
        while True:
            # top: a flip, then the flush of the retired aggregate, flush0 and flush1 in turn
            for name in (["flip", f"flush{seq % 2}"] if mode == "top" else ["flush"]):
                with open(os.path.join(procfs, name)) as f:
                    f.read()
            seq += 1
            print(os.environ["FAKE_ROW"], flush=True)
            print(f"I {seq} 1 0 0 0 0 0 0 0 0", flush=True)
    except KeyboardInterrupt:
        print(f"I {seq + 1} 1 0 0 0 0 0 0 0 0", flush=True)
        sys.stderr.write("WARNING: Number of errors: 0, skipped probes: 3\\n")
    """
)


@pytest.fixture
def fake_stap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, code in (("stap", FAKE_STAP), ("staprun", FAKE_STAPRUN)):
        exe = bindir / name
        exe.write_text(f"#!{sys.executable}\n{code}")
        exe.chmod(0o755)
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("MYSQLIO_STAP_PROCFS", str(tmp_path / "procfs"))
    monkeypatch.setenv("FAKE_CACHE", str(tmp_path / "cache"))
    return bindir


def fs_relative(path: Path) -> tuple[int, str]:
    """(st_dev, path relative to its filesystem's root), from this process's mountinfo: the
    inverse of what StapProbe does with a name."""
    st = path.stat()
    best = None
    for m in MountTable.of_process(os.getpid()).mounts:
        point = m.point.rstrip("/")
        if m.dev == st.st_dev and str(path).startswith(point + "/") and (best is None or len(point) > len(best[0])):
            best = (point, m.root.rstrip("/"))
    assert best is not None
    return st.st_dev, (best[1] + str(path)[len(best[0]) :]).lstrip("/")


def test_live_stap_process_intervals_names_and_stop(fake_stap: Path, tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data" / "ib_logfile0"
    data.parent.mkdir()
    data.write_bytes(b"x")
    dev, relative = fs_relative(data)
    ino = data.stat().st_ino
    components = tuple(p.encode() for p in relative.split("/"))
    monkeypatch.setenv("FAKE_NAME", proto.format_record(proto.Name(kdev(dev), ino, 1, True, components)).strip())
    monkeypatch.setenv("FAKE_ROW", f"A {kdev(dev)} {ino} 77 0 0 4096 2 0")
    monkeypatch.setenv("FAKE_STAP", "ok")
    probe = StapProbe.start(os.getpid(), "top", quiet=True)
    try:
        for _ in range(2):
            (row,) = probe.drain()
            assert (row.file, row.tid, row.op, row.api, row.bytes, row.ops) == (
                FileIdentity(dev, ino),
                77,
                Op.WRITE,
                Api.SYSCALL,
                4096,
                2,
            )
        name = probe.kernel_name(FileIdentity(dev, ino))
        assert name is not None and name.path == str(data) and name.complete
    finally:
        probe.close()
    assert probe.drops().as_dict()["skipped_probes"] == 3


def test_stap_failure_is_one_line_with_stap_reason(fake_stap: Path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_STAP", "fail")
    with pytest.raises(StapError) as info:
        StapProbe.start(os.getpid(), "top", quiet=True)
    message = str(info.value)
    assert "\n" not in message and "mysqlio-top.stp: semantic error: no match" in message
    assert "Pass 2: analysis failed" in info.value.log
    assert info.value.exit_code == 3


def test_command_lines(fake_stap: Path) -> None:
    """No pid in the compiled module (stap caches one module per kernel); staprun gives it."""
    cmd = stap_compile.compile_command("record")
    assert cmd[0] == str(fake_stap / "stap") and "-p4" in cmd and "-x" not in cmd
    assert cmd[cmd.index("-I") + 1] == str(STAP_DIR / "tapset") and cmd[-1] == str(STAP_DIR / "mysqlio-record.stp")
    run = stap_process.staprun_command(Path("/m/x.ko"), 123, "record")
    assert run[0] == str(fake_stap / "staprun") and run[-1] == "/m/x.ko"
    assert run[run.index("-x") + 1] == "123" and "-R" in run
    assert run[run.index("-b") + 1] == str(stap_process.RECORD_BUFFER_MB)
    assert "-b" not in stap_process.staprun_command(Path("/m/x.ko"), 123, "top")


# ---- an unusable environment: one line ----


def test_without_stap_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = backend.stap_problem()
    assert problem is not None and "\n" not in problem
    if problem.startswith("the SystemTap scripts support x86_64 only"):
        return
    assert "needs stap, which is not installed" in problem and "yum install systemtap" in problem
    with pytest.raises(UserError, match="needs stap") as info:
        backend.select_backend("stap")
    assert "\n" not in str(info.value)


def test_auto_without_either_backend_names_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(preflight, "BTF_PATH", str(tmp_path / "no-btf"))
    with pytest.raises(UserError) as info:
        backend.select_backend("auto")
    message = str(info.value)
    assert "\n" not in message and "eBPF: " in message and "SystemTap: " in message


def test_auto_prefers_ebpf_when_it_can_run() -> None:
    if backend.bpf_problem() is not None:
        pytest.fail(f"this machine cannot run eBPF: {backend.bpf_problem()}")
    assert backend.select_backend("auto") == "bpf"


def test_this_machine_stap_verdict_is_one_line() -> None:
    """Here: stap is installed, but this kernel has no loadable modules."""
    problem = backend.stap_problem()
    assert problem is None or "\n" not in problem
