#!/usr/bin/env python3
"""Regenerate docs/compatibility.md from the kernel matrix's results.

    python3 tools/compat_table.py                      # build/matrix/*.json -> docs/compatibility.md
    python3 tools/compat_table.py --check              # exit 1 if the doc differs from the results
    python3 tools/compat_table.py --results DIR --out FILE

The results are the JSON files tools/matrix_guest.py writes (tests/test_kernel_matrix.py
puts one per kernel in build/matrix/, the host's own kernel included). For each alias the
newest file counts. Columns: eBPF `top`, `record`, `exporter` and SystemTap; a file
without a "stap" key (the SystemTap runs are added by another runner, in matrix_guest's
per-mode shape) shows "not run" there. The kernel lockdown section comes from
build/lockdown/*.json (tests/test_lockdown_guest.py; tools/lockdown_table.py). Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lockdown_table import load as load_lockdown
from lockdown_table import render_lockdown

REPO = Path(__file__).resolve().parent.parent
ORDER = ("5.10", "6.1", "6.1-rt", "6.12", "sid", "host")
DISTRO = {
    "5.10": "Debian 11 (bullseye)",
    "6.1": "Debian 12 (bookworm)",
    "6.1-rt": "Debian 12 (bookworm), PREEMPT_RT",
    "6.12": "Debian 13 (trixie)",
    "sid": "Debian unstable (sid)",
    "host": "this machine (host)",
}
HOOKS = {"tracepoints": "per-syscall tracepoints", "raw": "**raw sys_enter/sys_exit** (fell back)"}
MODES = ("top", "record", "exporter")
SHORT = 110


def load(results: Path) -> list[dict[str, Any]]:
    """The newest result per alias, in ORDER (unknown aliases last)."""
    newest: dict[str, dict[str, Any]] = {}
    for f in sorted(results.glob("*.json")):
        try:
            r = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if r.get("schema") != 1 or "kernel" not in r:
            continue
        alias = r.get("alias", f.stem)
        if alias not in newest or r.get("date", "") >= newest[alias].get("date", ""):
            newest[alias] = r
    return sorted(newest.values(), key=lambda r: (ORDER.index(r["alias"]) if r["alias"] in ORDER else 99, r["alias"]))


# Limits a kernel's fallback has, as its doctor states them (docs/kernel-features.md):
# on such a kernel the cells they explain may differ in exactly this way, nothing else.
KNOWN_LIMITS = {
    # io_uring_complete names no request (Debian's 5.10): completions are matched to
    # their submissions; a request refused while being prepared (iogen's EBADF write on
    # a read-only fd) never reaches the submission tracepoint, so it is not counted
    ("io_uring counts", "fallback"): {"uring": "differs: uring_err.dat not traced"},
}


def known_limits(result: dict[str, Any]) -> dict[str, str]:
    """scenario -> the verdict the kernel's stated limits explain."""
    checks = result.get("doctor", {}).get("json", {}).get("checks", [])
    stated = {(c["name"], c.get("value")) for c in checks}
    return {
        scenario: verdict for key, cells in KNOWN_LIMITS.items() if key in stated for scenario, verdict in cells.items()
    }


def _short(text: str, n: int = SHORT) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= n else text[: n - 1] + "…"


def summarize(mode: dict[str, Any] | None, explained: dict[str, str] | None = None) -> str:
    """One table cell for one mode's run: exact (n/n), load failed: …, differs: …;
    a difference a stated limit of the kernel explains (known_limits) is said as such."""
    if not mode:
        return "not run"
    cells: dict[str, str] = mode.get("cells", {})
    if mode.get("status") in ("load failed", "error") or (not cells and mode.get("error")):
        return _short(f"**{mode.get('status', 'error')}**: {mode.get('error')}")
    if not cells:
        return "not run"
    exact = [s for s, v in cells.items() if v == "exact"]
    if len(exact) == len(cells):
        return f"exact ({len(exact)}/{len(cells)})"
    bad = [s for s in cells if cells[s] != "exact"]
    skipped = [s for s in bad if cells[s].startswith("skipped: ")]
    if skipped == bad:
        return _short(
            f"exact ({len(exact)}/{len(cells)}) but for runs the kernel skipped, counted as lost, in "
            f"{', '.join(skipped)}: {cells[skipped[0]]}"
        )
    limited = [s for s in bad if (explained or {}).get(s) == cells[s]]
    if limited == bad:
        return _short(
            f"exact ({len(exact)}/{len(cells)}) but for a stated limit in {', '.join(limited)}: {cells[limited[0]]}"
        )
    return _short(f"**differs** in {len(bad)}/{len(cells)}: {', '.join(bad)}")


def summarize_backend(backend: dict[str, Any] | None) -> str:
    """The stap column: every stap mode's cells together (or the backend's own error)."""
    if not backend:
        return "not run"
    if "cells" in backend or "status" in backend:  # one flat run
        return summarize(backend)
    modes = {m: r for m, r in backend.items() if isinstance(r, dict)}
    if not modes:
        return "not run"
    parts = [f"{m}: {summarize(r)}" for m, r in modes.items()]
    if all(summarize(r).startswith("exact") for r in modes.values()):
        n = sum(len(r.get("cells", {})) for r in modes.values())
        return f"exact ({n}/{n}, {', '.join(modes)})"
    return _short("; ".join(parts), 2 * SHORT)


def lacked_names(r: dict[str, Any]) -> str:
    names = [item.split(":", 1)[0] for item in r.get("lacked", [])]
    return ", ".join(names) if names else "nothing"


def render(results: list[dict[str, Any]]) -> str:
    out = [
        "# Kernel compatibility",
        "",
        "<!-- generated by tools/compat_table.py from build/matrix/*.json; do not edit by hand -->",
        "",
        "Debian's own stock kernels, each booted under emulation (virtme-ng, no KVM), with",
        "`tools/matrix_guest.py` run inside: every iogen scenario the kernel can run is traced at",
        "once by `mysqlio top --json`, `mysqlio record` + `report --json` and `mysqlio exporter`,",
        "and each (mode, scenario) cell is compared with iogen's own ground truth, file by file,",
        "counter by counter. The host's kernel runs the same script directly.",
        "",
        "Where the scratch is a real block device (a guest's ext4 on a loop device; the host's",
        "row writes to its temp directory instead), the page-cache scenarios and `coldread` run",
        "too. coldread's files are judged on what was read from the disk for each (issue 61): a",
        "file read cold then warm, buffered; one read with O_DIRECT by pread, libaio and io_uring;",
        "one read a page at a time at scattered offsets; one the traced process had never touched;",
        "one preallocated (unwritten extents) with a written range and a hole, read with O_DIRECT by",
        "pread and by libaio one iocb a call (from the disk: the written range only, not the zeros).",
        "Each file's `disk_read_bytes` and `direct_read_bytes` must equal iogen's in every mode (the",
        "exporter's per-file counters too), its `readahead_bytes` be within its disk reads (none for",
        "O_DIRECT, some for the cold sequential read), and their sum equal the kernel's own",
        "`/proc/PID/io` `read_bytes` over iogen's reads, as `tests/test_coldread.py` has it on the host.",
        "",
        "The SystemTap column comes from `tests/test_stap_live.py`: the modules are compiled by",
        "`mysqlio stap-build` on a build host of the kernel's own Debian release (this host for",
        "Debian 11 and 12; a debootstrapped root with that release's systemtap, gcc and",
        "linux-headers for 13 and sid, `tools/build_roots.py`; Debian 13's own systemtap 5.1",
        "cannot build for its kernel, forky's 5.6 is used there), copied into the guest and run",
        "there by `mysqlio top --stap-module` with the build release's staprun only; `uring` is",
        "left out (not traced, by design). On the host: what a real attempt said.",
        "",
        "Runs the kernel skipped: on Debian sid's 7.2 (built PREEMPT_LAZY) the programs on the",
        "syscall tracepoints can be preempted, and while one task is stopped inside one of them the",
        "kernel skips that program for every other task on that CPU (its `recursion_misses`), the",
        "traced server's among them. mysqlio counts each skipped run as a lost event",
        "(`skipped_runs`): an upper bound, since most are other processes' runs.",
        "`tools/preempt_stress.py` measures it: a thread pwrite()s for 15 s while two `dd bs=1`",
        "processes make syscalls on the guest's 2 CPUs. On sid, per-syscall tracepoints: 314,341",
        "writes, `top` counted 310,248 (1.3 % lost) and showed 162,528 lost events; raw tracepoints:",
        "358,528, 350,496 (2.2 %) and 296,923. With two busy loops instead of `dd`: exact (316,664),",
        "2 lost events shown. On 6.12 (voluntary preemption), with `dd`: exact (330,085), none",
        "skipped. In the matrix (no such load) 1 to 34 runs were skipped in about half the sid runs,",
        "none of them iogen's requests; never on the other kernels. A cell is judged on its files",
        'when the runs the tracer itself counted as skipped were all its losses; it reads "exact',
        'but for runs the kernel skipped" when its files are short by no more.',
        "",
        "Debian 12's PREEMPT_RT kernel (`linux-image-rt-amd64`) has the syscall tracepoints' layout",
        "of RHEL 9.3+ and CentOS Stream 9: `struct trace_entry` carries `preempt_lazy_count`, which",
        "moves the fields of the context a program on a per-syscall tracepoint reads, and the kernel",
        "checks those reads against the event's record at attach. The probes read the context",
        "through the kernel's own `struct syscall_tp_t` (probes/mysqlio.bpf.c), and every tracer",
        "must have run on the per-syscall tracepoints (the hook is noted per kernel below); where",
        "the kernel still refuses them, mysqlio falls back to the raw hook and says why. On this",
        "kernel a task can also be switched out inside a bpf() map call, which holds its CPU's",
        "`bpf_prog_active`: meanwhile the kernel skips every program on a perf tracepoint of that",
        "CPU, the per-syscall tracepoints' among them, and on 6.1 counts none. A fresh-machine",
        "run found its pc_fsync cell short so (14 of 16 pwrite64s and the fsync's entry missed by",
        "all three tracers, 0 lost; issue 57). Measured in a guest of this kernel under load, a",
        "loop of pc_fsync's writes traced by the three at once: `top` and `record` missed 68 of",
        "8,880 pwrite64s and 2 of 555 fsyncs, exactly the requests that ran while their CPU's",
        "`bpf_prog_active` was held (a tp_btf probe read it), the tracers' drains switched out",
        "inside their map calls. mysqlio now makes its map calls under SCHED_FIFO where the kernel",
        "can preempt them (`tracer/unpreempted.py`); then neither missed any of 7,872.",
        "",
        "arm64 is built, not run: no arm64 kernel is booted and nothing is traced on one. The probes",
        "are built for it as an object of their own (`tracer/bpf/mysqlio.aarch64.bpf.o`: arm64's",
        "syscall numbers and `struct pt_regs`, the types of Debian unstable's arm64 kernel), which",
        "the loader picks by `platform.machine()`. `make test` (`tests/test_arm64.py`) has libbpf",
        "resolve every CO-RE relocation of every program (`bpftool gen min_core_btf`) against the BTF",
        "of Debian 12's (6.1) and unstable's (7.2) arm64 kernels, read out of their packages",
        "(`tools/arch_btf.py`; Debian 13's 6.12 passes too, checked by hand with",
        "`tools/core_relos.py`, its 93 MB package kept out of `make test`): each resolves, or is one",
        "that stays unresolved for the x86-64 object on the same Debian kernel's amd64 build in the",
        "table below (a read of another kernel's layout behind its guard), and the BTF tracepoints",
        "attached to are there alike; a BTF without `pt_regs`' `syscallno` fails the check. arm64's",
        "`syscallno` is an s32 (the word after it is `pmr` on 7.2), read with its own size and sign.",
        "Page-cache bytes are counted in the running kernel's page size (arm64: 4, 16 or 64 KiB),",
        "exact here on 4 KiB pages and, with the loader saying 64 KiB, 16 times that. Not checked: an",
        "arm64 verifier's verdict on the programs, any count traced on arm64, the matrix's scenarios",
        "there; `record` there uses the BPF ring buffer (the event slots are x86-64's).",
        "",
        "Regenerate: `make setup`, then (as root) `.venv/bin/pytest -v tests/test_kernel_matrix.py`",
        "(18.5 minutes for the five guests and the host on a 2-core machine running other tests at",
        "the same time; the downloads from an empty cache take about a minute) and",
        "`python3 tools/compat_table.py`.",
        "",
        "| kernel | release | eBPF `top` | eBPF `record` | eBPF `exporter` | SystemTap | lacked (doctor) |",
        "|---|---|---|---|---|---|---|",
    ]
    guests = [r for r in results if r.get("guest_seconds")]
    if guests:
        total = sum(r["guest_seconds"] for r in guests)
        each = ", ".join(f"{r['alias']} {r['guest_seconds']:.0f} s" for r in guests)
        out[-3:-3] = ["", f"Time in the guests for these results: {total / 60:.1f} min ({each}), boots included."]
    for r in results:
        ebpf = r.get("ebpf", {})
        out.append(
            "| "
            + " | ".join(
                [
                    f"{DISTRO.get(r['alias'], r['alias'])}",
                    f"`{r['kernel']['release']}`",
                    *(summarize(ebpf.get(m), known_limits(r)) for m in MODES),
                    summarize_backend(r.get("stap")),
                    _short(lacked_names(r)),
                ]
            )
            + " |"
        )
    out += ["", "## Per kernel", ""]
    for r in results:
        k = r["kernel"]
        out += [f"### {DISTRO.get(r['alias'], r['alias'])}: `{k['release']}`", ""]
        out.append(f"- `{k['proc_version']}`")
        where = "booted under emulation" if r.get("where") == "guest" else "the host itself"
        timing = f"{r.get('seconds', 0):.0f} s in the script"
        if r.get("guest_seconds"):
            timing += f", {r['guest_seconds']:.0f} s with the boot"
        out.append(f"- where: {where}; run {r.get('date', '?')}; {timing}")
        src = r.get("source") or {}
        if src.get("commit"):
            dirty = " plus uncommitted changes to probes/ or tracer/" if src.get("uncommitted_changes") else ""
            out.append(f"- mysqlio: commit `{src['commit']}`{dirty}")
        btf = f"yes ({k['btf_bytes'] / 1e6:.1f} MB)" if k.get("btf") else "**no**"
        out.append(f"- BTF: {btf}")
        tracefs = ", ".join(f"`{m}`" for m in k.get("tracefs_mounts", [])) or "not mounted"
        debugfs = ", ".join(f"`{m}`" for m in k.get("debugfs_mounts", [])) or "not mounted"
        out.append(f"- tracefs before mysqlio ran: {tracefs}; debugfs: {debugfs}")
        uring = k.get("io_uring_disabled")
        out.append(
            "- io_uring: " + ("no `kernel.io_uring_disabled` sysctl" if uring is None else f"io_uring_disabled={uring}")
        )
        sc = r.get("scenarios", {})
        out.append(f"- scenarios traced: {', '.join(sc.get('run', [])) or 'none'}")
        for s, why in sc.get("skipped", {}).items():
            out.append(f"  - `{s}` not run: {why}")
        for note in sc.get("notes", []):
            out.append(f"  - {note}")
        lacked = r.get("lacked", [])
        if lacked:
            out.append("- what the kernel lacked, and what mysqlio does instead (`mysqlio doctor`):")
            out += [f"  - {' '.join(item.split())}" for item in lacked]
        else:
            out.append("- `mysqlio doctor`: nothing lacking for the eBPF backend")
        checks = ((r.get("doctor") or {}).get("json") or {}).get("checks", [])
        ebpf_checks = [c for c in checks if c.get("section", "ebpf") == "ebpf"]
        if ebpf_checks:
            out += ["", "  <details><summary>every eBPF check of <code>mysqlio doctor</code></summary>", ""]
            for c in ebpf_checks:
                detail = " ".join(str(c.get("detail", "")).split())
                out.append(f"  - {c.get('status', '?')} {c.get('name')}: {detail}")
            out += ["", "  </details>", ""]
        elif r.get("doctor"):
            rc = r["doctor"].get("returncode")
            out.append(f"- `mysqlio doctor --json` gave no JSON (exit {rc}): `{_short(r['doctor'].get('stderr', ''))}`")
        for backend_name, backend in (("eBPF", r.get("ebpf", {})), ("SystemTap", r.get("stap") or {})):
            for mode, run in backend.items():
                if not isinstance(run, dict):
                    continue
                load = f", attached in {run['load_seconds']:.0f} s" if run.get("load_seconds") is not None else ""
                head = f"- {backend_name} `{mode}`: {run.get('status', '?')}{load}"
                if run.get("error"):
                    head += f": `{' '.join(str(run['error']).split())}`"
                out.append(head)
                if run.get("syscall_hook"):
                    out.append(f"  - syscall hook: {HOOKS.get(run['syscall_hook'], run['syscall_hook'])}")
                if run.get("via"):
                    out.append(f"  - how: {run['via']}")
                if run.get("status") == "ran":
                    bad = {s: v for s, v in run.get("cells", {}).items() if v != "exact"}
                    for s, v in bad.items():
                        out.append(f"  - `{s}`: {' '.join(v.split())}")
                    elsewhere = run.get("paths_elsewhere") or []
                    if bad and elsewhere:
                        shown = ", ".join(f"`{p}`" for p in elsewhere[:6])
                        out.append(f"  - traced outside iogen's directory: {shown}")
        out.append("")
    if not results:
        out += ["No results yet: run tests/test_kernel_matrix.py.", ""]
    text = "\n".join(out)
    # no checkout's own path in the doc (doctor names the BPF object by its full path)
    for repo in {str(REPO), *(r["repo"] for r in results if r.get("repo"))}:
        text = text.replace(repo + "/", "").replace(repo, ".")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=REPO / "build" / "matrix")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "compatibility.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when --out differs from what the results give")
    args = ap.parse_args(argv)
    results = load(args.results)
    text = render(results)
    lockdown = render_lockdown(load_lockdown(args.results.parent / "lockdown"))  # tests/test_lockdown_guest.py
    if lockdown:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lockdown)
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'differs from the results'}", file=sys.stderr)
        return 0 if same else 1
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(results)} kernels)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
