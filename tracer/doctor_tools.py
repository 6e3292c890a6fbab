"""Doctor's tools section: clang and bpftool (only to build probes/) and the SystemTap fallback."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence

from .doctor_check import Check

_RUN_TOOL_TIMEOUT_S = 15.0


def tool_version(argv: Sequence[str], pattern: str) -> str | None:
    """The version a tool prints for `argv` (the first match of `pattern`), or None."""
    try:
        out = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=_RUN_TOOL_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out.stdout + out.stderr)
    return match[1] if match else None


def check_build_tool(name: str, object_built: bool, which: Callable[[str], str | None] = shutil.which) -> Check:
    """clang or bpftool: needed only to build probes/ (and bpftool to dump vmlinux.h)."""
    path = which(name)
    if path:
        pattern = r"clang version (\S+)" if name == "clang" else r"bpftool v?(\S+)"
        version = tool_version([path, "--version"], pattern)
        return Check(
            name, "ok", f"{path}" + (f", version {version}" if version else ""), value=version, section="tools"
        )
    if object_built:
        return Check(
            name, "skip", "not installed; only needed to rebuild the BPF object, which is built", section="tools"
        )
    return Check(
        name,
        "warn",
        "not installed, and the BPF object is not built",
        f"apt-get install {name} (Debian/Ubuntu) or dnf install {name} (RHEL/Fedora), then make setup",
        section="tools",
    )


def check_stap(ebpf_works: bool, problem: Callable[[], str | None] | None = None) -> Check:
    """The SystemTap fallback (--backend stap; auto picks it when eBPF cannot run)."""
    if problem is None:
        from .backend import stap_problem as problem
    path = shutil.which("stap")
    version = tool_version([path, "--version"], r"version (\d[\w.]*)") if path else None
    why_not = problem()
    found = f"stap {version} ({path})" if version else (path or "stap")
    if why_not is None:
        use = "fallback usable" if ebpf_works else "usable: --backend auto will use it"
        return Check(
            "SystemTap",
            "ok",
            f"{found}; {use} (its first run compiles a module: minutes)",
            value=version,
            section="tools",
        )
    if ebpf_works:
        return Check(
            "SystemTap", "skip", f"not usable ({why_not}); not needed, eBPF works", value=version, section="tools"
        )
    detail = f"{found}, but not usable here either" if path else "not installed"
    return Check("SystemTap", "warn", detail, why_not, value=version, section="tools")
