"""A throwaway block device for tests that need one: an ext4 image attached to a loop
device and mounted (`loop_ext4`), the device's I/O counters (`device_stat`, from
/sys/block/NAME/stat), the kernel's page counters (`vm_stat`, /proc/vmstat) and its
writeback timing made short for a while (`dirty_expire`). All need root.

The image lives in a temporary directory (on whatever filesystem holds it); the filesystem
under test is the ext4 on the loop device, whose writes /sys/block/loopN/stat counts.
With `direct_io`, the loop device reads and writes its image with O_DIRECT, so the image's
own page cache does not dirty and write back every page a second time (which would count
twice in /proc/vmstat's global nr_dirtied and nr_written).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SECTOR = 512  # /sys/block/*/stat counts 512-byte sectors, whatever the device's block size
VM_SYSCTL = Path("/proc/sys/vm")


@dataclass(frozen=True)
class LoopDisk:
    mount: Path  # an empty ext4 filesystem, mounted
    device: str  # /dev/loopN
    name: str  # loopN, as in /sys/block
    rdev: int  # the device number (os.major / os.minor)


@dataclass(frozen=True)
class DeviceStat:
    """The first fields of /sys/block/NAME/stat (the kernel's Documentation/block/stat.rst)."""

    reads: int  # read I/Os completed
    sectors_read: int
    writes: int  # write I/Os completed
    sectors_written: int

    @property
    def bytes_read(self) -> int:
        return self.sectors_read * SECTOR

    @property
    def bytes_written(self) -> int:
        return self.sectors_written * SECTOR

    def __sub__(self, before: DeviceStat) -> DeviceStat:
        return DeviceStat(
            reads=self.reads - before.reads,
            sectors_read=self.sectors_read - before.sectors_read,
            writes=self.writes - before.writes,
            sectors_written=self.sectors_written - before.sectors_written,
        )


def _run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


@contextlib.contextmanager
def loop_ext4(size_mb: int = 64, direct_io: bool = False) -> Iterator[LoopDisk]:
    """A new ext4 filesystem of `size_mb` MiB on a loop device, mounted in a temporary
    directory; unmounted, detached and removed on leaving, also on error."""
    with contextlib.ExitStack() as stack:
        base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mysqlio-loop-")))
        image, mount = base / "disk.img", base / "mnt"
        mount.mkdir()
        with image.open("wb") as f:
            f.truncate(size_mb << 20)
        # inode tables and journal zeroed now, not by a kernel thread writing to the device later
        # 4 KiB blocks, as a server's filesystem has (mkfs picks 1 KiB for a small image): a
        # page written back is one block
        _run("mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(image))
        device = _run("losetup", "--find", "--show", *(["--direct-io=on"] if direct_io else []), str(image))
        stack.callback(_run, "losetup", "-d", device)
        _run("mount", device, str(mount))
        stack.callback(_run, "umount", str(mount))
        yield LoopDisk(mount=mount, device=device, name=Path(device).name, rdev=os.stat(device).st_rdev)


def device_stat(name: str) -> DeviceStat:
    """The I/O a block device (e.g. "loop3", "vda") has completed since it appeared."""
    fields = [int(v) for v in Path(f"/sys/block/{name}/stat").read_text().split()]
    # reads, reads merged, sectors read, ms reading, writes, writes merged, sectors written, ...
    return DeviceStat(reads=fields[0], sectors_read=fields[2], writes=fields[4], sectors_written=fields[6])


def vm_stat() -> dict[str, int]:
    """/proc/vmstat (global counters such as nr_dirtied and nr_written, in pages), with
    the CPUs' pending differences folded in first (vm.stat_refresh, root): otherwise each
    CPU holds back up to its threshold for a second or so."""
    with contextlib.suppress(OSError):
        (VM_SYSCTL / "stat_refresh").write_text("1\n")
    return {
        name: int(value) for name, value in (line.split() for line in Path("/proc/vmstat").read_text().splitlines())
    }


@contextlib.contextmanager
def dirty_expire(expire_cs: int, writeback_cs: int) -> Iterator[None]:
    """vm.dirty_expire_centisecs (age at which the flusher writes dirty data back) and
    vm.dirty_writeback_centisecs (how often it wakes up) set for a while, then restored."""
    settings = {"dirty_expire_centisecs": expire_cs, "dirty_writeback_centisecs": writeback_cs}
    with contextlib.ExitStack() as stack:
        for name, value in settings.items():
            path = VM_SYSCTL / name
            old = path.read_text().strip()
            path.write_text(f"{value}\n")
            stack.callback(path.write_text, f"{old}\n")
        yield
