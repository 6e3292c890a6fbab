"""A doctor check (one line of its output) and the verdict drawn from a list of them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

STATUSES = ("ok", "warn", "fail", "skip")
SECTIONS = {
    "ebpf": "Kernel and eBPF backend",
    "deploy": "Container (what a DaemonSet must grant)",
    "tools": "Build tools and SystemTap fallback",
    "server": "Server",
}


@dataclass(frozen=True)
class Check:
    """One line of the doctor's output."""

    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str = ""
    required: bool = False  # a "fail" here means the eBPF backend cannot run
    value: str | None = None  # the finding for scripts (a version, a backend, a setting)
    section: str = "ebpf"

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} not in {STATUSES}")


def ebpf_ready(checks: Iterable[Check]) -> bool:
    return not any(c.required and c.status == "fail" for c in checks)


def exit_code(checks: Sequence[Check]) -> int:
    """0 when every required check passed (the eBPF backend works), else 1."""
    return 0 if ebpf_ready(checks) else 1


def auto_backend(checks: Sequence[Check]) -> str | None:
    """What --backend auto would use, as seen by these checks."""
    if ebpf_ready(checks):
        return "bpf"
    stap = next((c for c in checks if c.name == "SystemTap"), None)
    return "stap" if stap is not None and stap.status == "ok" else None


def doctor_json(checks: Sequence[Check]) -> dict[str, Any]:
    return {
        "ebpf_ready": ebpf_ready(checks),
        "backend": auto_backend(checks),
        "exit_code": exit_code(checks),
        "checks": [asdict(c) for c in checks],
    }
