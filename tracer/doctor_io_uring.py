"""Doctor's io_uring tracepoint, needed only where a server can use io_uring.

The probes count io_uring requests at io_uring_complete; without it they load all the
same (that program left out: bpf_probe.py) and count everything else. A kernel without
io_uring (CONFIG_IO_URING off), or one that refuses every io_uring_setup
(kernel.io_uring_disabled = 2), leaves servers on libaio or synchronous I/O: the
tracepoint's absence costs nothing there, said as a note. It fails doctor only for a
server that holds io_uring instances.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .btf import BTF_KIND_STRUCT, kernel_btf_has
from .doctor_check import Check
from .errors import BpfError

IO_URING_SYSCTL = "/proc/sys/kernel/io_uring_disabled"
NAME = "io_uring tracepoints"


def io_uring_unavailable(btf_path: str, sysctl: str = IO_URING_SYSCTL) -> str | None:
    """Why no process can create an io_uring instance on this kernel, or None."""
    try:
        if Path(sysctl).read_text().strip() == "2":
            return "kernel.io_uring_disabled = 2 refuses every io_uring_setup"
    except OSError:
        pass
    try:
        in_kernel = kernel_btf_has(["io_ring_ctx"], btf_path, BTF_KIND_STRUCT)["io_ring_ctx"]
    except (OSError, BpfError):
        return None
    return None if in_kernel else "this kernel has no io_uring (no struct io_ring_ctx in its BTF)"


def optional_io_uring(missing: Check, unavailable: str | None) -> Check:
    """The failed io_uring tracepoint check made a note: not required, unless a server
    turns out to use io_uring (server_needs_io_uring)."""
    if unavailable:
        return replace(
            missing,
            status="ok",
            detail=f"{missing.detail}; not needed: {unavailable}, so no server here uses it",
            fix="",
            required=False,
            value="not needed",
        )
    return replace(
        missing,
        status="warn",
        detail=f"{missing.detail}; io_uring requests would not be counted (a server using libaio or "
        "synchronous I/O is traced in full)",
        required=False,
        value="missing",
    )


def server_needs_io_uring(checks: list[Check]) -> list[Check]:
    """A missing io_uring tracepoint made a required failure when the server uses io_uring
    (doctor's "InnoDB AIO" line: its error log or its io_uring instances)."""
    aio = next((c for c in checks if c.name == "InnoDB AIO" and c.section == "server"), None)
    if aio is None or aio.value != "io_uring":
        return checks
    out = []
    for c in checks:
        if c.name == NAME and c.value in ("missing", "not needed"):
            detail = c.detail.split(";")[0]  # what is missing, without the note
            c = replace(
                c,
                status="fail",
                detail=f"{detail}, and the server uses io_uring: its requests would not be counted",
                fix="a kernel with io_uring's tracepoints in its BTF, or the server on libaio (innodb_linux_aio=aio)"
                " or --backend stap",
                required=True,
            )
        out.append(c)
    return out
