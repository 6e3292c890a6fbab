"""The kernel lockdown section of docs/compatibility.md (tools/compat_table.py calls it), from
build/lockdown/RELEASE.json, written by tests/test_lockdown_guest.py: what doctor, the
backend choice and `top` said at each stage of one boot, beside the kernel's own answer."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STAGES = {
    "none": "as booted (lockdown none)",
    "io_uring_off": "`kernel.io_uring_disabled = 2`",
    "integrity": "`integrity` written to `/sys/kernel/security/lockdown`",
    "confidentiality": "`confidentiality` written there",
}


def load(directory: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(directory.glob("*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


def _said(ret: int) -> str:
    return "succeeded" if ret == 0 else f"failed with {errno.errorcode.get(-ret, str(-ret))}"


def _check(stage: dict[str, Any], name: str) -> str:
    checks = {c["name"]: c for c in ((stage.get("doctor") or {}).get("json") or {}).get("checks", [])}
    c = checks.get(name)
    if c is None:
        return f"{name}: not shown"
    fix = f" (fix: {c['fix']})" if c.get("fix") and c["status"] in ("warn", "fail") else ""
    return f"{c['status']} {name}: {' '.join(str(c['detail']).split())}{fix}"


def _stage_lines(name: str, stage: dict[str, Any]) -> list[str]:
    doctor = stage.get("doctor") or {}
    report = doctor.get("json") or {}
    lines = [
        f"- {STAGES[name]}: `doctor` exit {doctor.get('returncode')}, `--backend auto` would use "
        f"{report.get('backend') or 'nothing'} ({doctor.get('seconds', 0):.0f} s)"
    ]
    shown = {"none": ["kernel lockdown", "SystemTap"], "io_uring_off": ["io_uring allowed", "io_uring tracepoints"]}
    for check in shown.get(name, ["kernel lockdown", "SystemTap", "probe attach"]):
        lines.append(f"  - {_check(stage, check)}")
    for key, what in (("top_stap", "top --backend stap"), ("top_auto", "top")):
        if key in stage:
            said = " ".join(stage[key]["stderr"].split())
            lines.append(f"  - `mysqlio {what}`: exit {stage[key]['returncode']}, `{said}`")
    kernel = []
    if "io_uring_setup" in stage:
        kernel.append(f"io_uring_setup(2) {_said(stage['io_uring_setup'])}")
    if "unsigned_module" in stage:
        kernel.append(f"finit_module(2) of an unsigned copy of the kernel's dummy.ko {_said(stage['unsigned_module'])}")
    if "signed_module" in stage:
        kernel.append(f"of the signed original {_said(stage['signed_module'])}")
    if "bpf_refusal" in stage:
        first = next((line for line in stage["bpf_refusal"].splitlines() if line.strip()), "")
        kernel.append(f"the probes loaded past mysqlio's checks: `{first}`")
    if kernel:
        lines.append(f"  - the kernel itself: {'; '.join(kernel)}")
    return lines


def render_lockdown(results: list[dict[str, Any]]) -> list[str]:
    if not results:
        return []
    out = [
        "## Kernel lockdown and io_uring refused",
        "",
        "`tests/test_lockdown_guest.py`: one guest boot, its state raised stage by stage (lockdown is",
        "never lowered), `mysqlio doctor --json`, the backend choice and `mysqlio top` run at each,",
        "and the kernel asked the same question directly. Only this kernel was run. The verifier",
        "names bpf_probe_read, not the probes' bpf_probe_read_kernel: libbpf's own probe of the",
        "latter is refused too, so it rewrites the calls to the older helper before loading.",
        "",
    ]
    for r in results:
        out += [f"### `{r['kernel']}`, {r.get('seconds', 0):.0f} s in the script", ""]
        for name in STAGES:
            if name in r.get("stages", {}):
                out += _stage_lines(name, r["stages"][name])
        out.append("")
    # no checkout's own path in the doc (the BPF object is named by its full path)
    return [line.replace(str(REPO) + "/", "") for line in out]
