"""The block devices' bios by owner, as the BPF programs keep them: per CPU, a device in
a slot of its own found from its number (struct dev_slot), which may differ from one CPU
to another when slots collide. Userspace sums each device over every CPU and slot."""

from __future__ import annotations

import ctypes

from mysqlio import abi
from mysqlio.bpf_probe import device_bios
from mysqlio.probe import dev_from_kernel

SDA = (8 << 20) | 0  # kernel dev_t: major above bit 20
LOOP0 = (7 << 20) | 0
CPUS = 2


def slots(filled: dict[tuple[int, int], tuple[int, dict[tuple[int, int], tuple[int, int]]]]) -> ctypes.Array:
    """A per-CPU array as the kernel hands it: [slot][cpu] of struct dev_slot; `filled`
    maps (slot, cpu) to (dev, {(dir, owner): (bytes, count)})."""
    words = ctypes.sizeof(abi.DevSlot) // 8
    raw = (ctypes.c_uint64 * (abi.DEV_SLOTS * CPUS * words))()
    for (slot, cpu), (dev, cells) in filled.items():
        value = abi.DevSlot.from_buffer(raw, (slot * CPUS + cpu) * words * 8)
        value.dev = dev
        for (d, owner), (nbytes, count) in cells.items():
            value.bytes[d][owner] = nbytes
            value.count[d][owner] = count
    return raw


def test_a_device_is_summed_over_cpus_and_slots() -> None:
    w, r = abi.Dir.WRITE, abi.Dir.READ
    server, fs = abi.Owner.SERVER_FILE, abi.Owner.FS
    raw = slots(
        {
            (3, 0): (SDA, {(w, server): (8192, 2), (r, fs): (4096, 1)}),
            (4, 1): (SDA, {(w, server): (4096, 1)}),  # the same disk, another slot on CPU 1
            (3, 1): (LOOP0, {(w, abi.Owner.OTHER): (512, 1)}),
            (9, 0): (0, {(w, server): (1, 1)}),  # a free slot: never read
        }
    )
    got = {(c.dev, c.dir, c.owner): (c.bytes, c.count) for c in device_bios(raw)}
    assert got == {
        (dev_from_kernel(SDA), w, server): (12288, 3),
        (dev_from_kernel(SDA), r, fs): (4096, 1),
        (dev_from_kernel(LOOP0), w, abi.Owner.OTHER): (512, 1),
    }


def test_no_device_no_rows() -> None:
    assert device_bios(slots({})) == []
