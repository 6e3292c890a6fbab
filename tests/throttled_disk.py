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
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")


@dataclass
class ThrottledDisk:
    mount: Path  # an empty ext4 filesystem
    cgroup: Path  # blkio cgroup whose writes to it are throttled
    write_iops: int

    def enter_cgroup(self) -> None:
        """In a child before exec (Popen preexec_fn): join the throttled group."""
        (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))


def _run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


@contextlib.contextmanager
def throttled_disk(write_iops: int, size_mb: int = 64) -> Iterator[ThrottledDisk]:
    if not (BLKIO_ROOT / "blkio.throttle.write_iops_device").exists():
        raise RuntimeError(f"no cgroup v1 blkio controller with throttling at {BLKIO_ROOT}")
    with contextlib.ExitStack() as stack:
        base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mysqlio-lat-")))
        image, mount = base / "disk.img", base / "mnt"
        mount.mkdir()
        with image.open("wb") as f:
            f.truncate(size_mb << 20)
        _run("mkfs.ext4", "-q", "-F", str(image))
        loop = _run("losetup", "--find", "--show", str(image))
        stack.callback(_run, "losetup", "-d", loop)
        _run("mount", loop, str(mount))
        stack.callback(_run, "umount", str(mount))
        rdev = os.stat(loop).st_rdev
        cgroup = BLKIO_ROOT / f"mysqlio-test-{os.getpid()}"
        cgroup.mkdir()
        stack.callback(cgroup.rmdir)
        (cgroup / "blkio.throttle.write_iops_device").write_text(f"{os.major(rdev)}:{os.minor(rdev)} {write_iops}")
        yield ThrottledDisk(mount=mount, cgroup=cgroup, write_iops=write_iops)
