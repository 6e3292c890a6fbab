"""A disk with a known write latency: an ext4 image on a loop device whose
writes, from processes in one cgroup v1 blkio group, are throttled to N IOPS
(blkio.throttle.write_iops_device), so each block write of a queue-depth-1
stream waits about 1/N s. This kernel has no device-mapper (no dm-delay).

blk-throttle grants I/O per time slice rounded to jiffies: at 5 IOPS each
O_DIRECT write of a QD1 stream measured 207-208 ms here (+4 % on 1/N); at
10 IOPS and more, writes start to come in pairs within one slice.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mysqlio.devtools.loop_disk import loop_ext4

BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")


@dataclass
class ThrottledDisk:
    mount: Path  # an empty ext4 filesystem
    cgroup: Path  # blkio cgroup whose writes to it are throttled
    write_iops: int

    def enter_cgroup(self) -> None:
        """In a child before exec (Popen preexec_fn): join the throttled group."""
        (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))


@contextlib.contextmanager
def throttled_disk(write_iops: int, size_mb: int = 64) -> Iterator[ThrottledDisk]:
    if not (BLKIO_ROOT / "blkio.throttle.write_iops_device").exists():
        raise RuntimeError(f"no cgroup v1 blkio controller with throttling at {BLKIO_ROOT}")
    with contextlib.ExitStack() as stack:
        disk = stack.enter_context(loop_ext4(size_mb))
        cgroup = BLKIO_ROOT / f"mysqlio-test-{os.getpid()}"
        cgroup.mkdir()
        stack.callback(cgroup.rmdir)
        (cgroup / "blkio.throttle.write_iops_device").write_text(
            f"{os.major(disk.rdev)}:{os.minor(disk.rdev)} {write_iops}"
        )
        yield ThrottledDisk(mount=disk.mount, cgroup=cgroup, write_iops=write_iops)
