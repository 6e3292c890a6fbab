"""Bulk consumers of record's event stream through mmap, without libbpf callbacks:
each CPU's event slots (x86-64, `CpuEventSlots`) or BPF ring buffer
(`RingBufferReader`), merged in time order (`PerCpuRingsReader`).

Ring buffers:

Records are fixed-size mio_event structs submitted with BPF_RB_NO_WAKEUP, so
the consumer polls on a timer and turns everything committed since the last
poll into one numpy array (no per-event Python). Layout (kernel/bpf/ringbuf.c):
page 0 holds consumer_pos (we write it), page 1 producer_pos, then the data
area mapped twice in a row, so any record range is contiguous in memory. Each
record has an 8-byte header: u32 length with BUSY (bit 31, not committed yet)
and DISCARD (bit 30) flags, and u32 page offset; records are 8-byte aligned.
"""

from __future__ import annotations

import mmap

import numpy as np

from . import abi
from .events import EVENT_DTYPE

BUSY_BIT = 1 << 31
DISCARD_BIT = 1 << 30
HEADER = 8
RECORD = HEADER + EVENT_DTYPE.itemsize  # 64 bytes, already 8-aligned
_OPAQUE_EVENT = np.dtype((np.void, EVENT_DTYPE.itemsize))
_RECORD_DTYPE = np.dtype([("len", "<u4"), ("pg_off", "<u4"), ("event", EVENT_DTYPE)])


class RingBufferReader:
    """Drain committed events of a ring buffer map (fd) of `size` bytes."""

    def __init__(self, fd: int, size: int) -> None:
        page = mmap.PAGESIZE
        self.size = size
        self.capacity: int | None = size // RECORD  # events it holds between two reads
        self._mask = size - 1
        self._consumer = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        self._producer = mmap.mmap(fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        self._page = page
        self._data = np.frombuffer(self._producer, dtype=np.uint8)
        # The positions are read and written as whole aligned 8-byte words: the
        # kernel reads consumer_pos while we write it, and a byte-wise store
        # (struct.pack_into) can show it a torn, smaller value when a carry
        # crosses a byte — the ring then looks full and events are dropped
        # (seen in the 10-minute soak). x86-64 orders these plain accesses.
        self._consumer_pos = np.frombuffer(self._consumer, dtype=np.uint64, count=1)
        self._producer_pos = np.frombuffer(self._producer, dtype=np.uint64, count=1)

    def _positions(self) -> tuple[int, int]:
        return int(self._consumer_pos[0]), int(self._producer_pos[0])

    def read(self) -> np.ndarray:
        """Every event committed since the last read, in order; frees their space."""
        cons, prod = self._positions()
        if prod == cons:
            return np.empty(0, dtype=EVENT_DTYPE)
        count = (prod - cons) // RECORD
        start = self._page + (cons & self._mask)
        raw = self._data[start : start + count * RECORD]
        lens = raw.view(_RECORD_DTYPE)["len"]
        usual = bool(np.all(lens == EVENT_DTYPE.itemsize))  # all committed, none discarded
        if not usual:
            # stop at the first record still being written
            busy = np.flatnonzero(lens & BUSY_BIT)
            if busy.size:
                count = int(busy[0])
                raw, lens = raw[: count * RECORD], lens[:count]
            if np.any((lens & ~np.uint32(DISCARD_BIT)) != EVENT_DTYPE.itemsize):
                raise RuntimeError("unexpected record size in the ring buffer")
        # The events' bytes as one block copy, then viewed as events: copying the strided
        # structured field instead (records["event"][mask].copy()) took 9-16x longer, a
        # third of record's active CPU samples on MariaDB 11.8 (issue 19).
        events = raw.reshape(count, RECORD)[:, HEADER:].copy().view(EVENT_DTYPE).reshape(count)
        if not usual:
            events = events[(lens & DISCARD_BIT) == 0]
        # release the space only after copying the events out
        self._consumer_pos[0] = cons + count * RECORD
        return events

    def close(self) -> None:
        del self._data, self._consumer_pos, self._producer_pos
        self._producer.close()
        self._consumer.close()


# an event slot (probes/mysqlio.bpf.c, struct event_slot): the event, then its seq
SLOT_DTYPE = np.dtype([("event", EVENT_DTYPE), ("seq", "<u8")])
assert SLOT_DTYPE.itemsize == abi.SLOT_BYTES
_POS_DTYPE = np.dtype(abi.SlotPos)


class EventSlots:
    """The mappings of the event slots of every CPU (maps event_slots and event_pos,
    BPF_F_MMAPABLE): `per_cpu` slots for each of `cpus` CPUs, CPU c's from slot
    c x per_cpu; its head (written by the programs) at position 2c, its tail
    (written here) at 2c + 1. Slot memory is page-aligned, each slot a cache line."""

    def __init__(self, slots_fd: int, pos_fd: int, cpus: int, per_cpu: int) -> None:
        self.cpus = cpus
        self.per_cpu = per_cpu
        self._slots_map = mmap.mmap(slots_fd, cpus * per_cpu * SLOT_DTYPE.itemsize, mmap.MAP_SHARED)
        self._pos_map = mmap.mmap(pos_fd, 2 * cpus * _POS_DTYPE.itemsize, mmap.MAP_SHARED)
        self.slots = np.frombuffer(self._slots_map, dtype=np.uint8).reshape(cpus * per_cpu, SLOT_DTYPE.itemsize)
        self.seqs = np.frombuffer(self._slots_map, dtype=np.uint64).reshape(cpus * per_cpu, -1)[:, -1]
        # each position read and written as one aligned 8-byte word (see RingBufferReader)
        self.pos = np.frombuffer(self._pos_map, dtype=np.uint64).reshape(2 * cpus, -1)[:, 0]

    def close(self) -> None:
        del self.slots, self.seqs, self.pos  # the mappings cannot close while a view holds them
        self._slots_map.close()
        self._pos_map.close()


class CpuEventSlots:
    """One CPU's event slots, read from its tail: every event published since the
    last read, in order, up to the first slot not yet published (a program writing
    it now). A slot is published by its seq, written after its event: the slot's
    index plus one; x86-64 loads in order, so the event read after it is whole."""

    def __init__(self, slots: EventSlots, cpu: int) -> None:
        self._slots = slots
        self._cpu = cpu
        self._first = cpu * slots.per_cpu
        self._mask = slots.per_cpu - 1
        self.capacity: int | None = slots.per_cpu

    def read(self) -> np.ndarray:
        pos = self._slots.pos
        tail = int(pos[2 * self._cpu + 1])
        count = min(int(pos[2 * self._cpu]) - tail, self._slots.per_cpu)
        if count <= 0:
            return np.empty(0, dtype=EVENT_DTYPE)
        start = tail & self._mask
        # their seqs first, then their events (in that order: see the class)
        seqs = np.concatenate([self._slots.seqs[run] for run in self._runs(start, count)])
        published = seqs == np.arange(tail + 1, tail + 1 + count, dtype=np.uint64)
        if not published.all():
            count = int(np.argmin(published))
        rows = [self._slots.slots[run, : EVENT_DTYPE.itemsize] for run in self._runs(start, count)]
        events = np.concatenate(rows).view(EVENT_DTYPE).reshape(count)
        # the slots freed only after their events were copied out
        pos[2 * self._cpu + 1] = tail + count
        return events

    def _runs(self, start: int, count: int) -> list[slice]:
        """The `count` slots from slot `start` of this CPU's: one run, or two when
        they wrap to its first slot."""
        first = self._first + start
        stop = min(start + count, self._slots.per_cpu)
        return [slice(first, self._first + stop), slice(self._first, self._first + count - (stop - start))]

    def close(self) -> None:
        """The mappings are EventSlots': closed by whoever opened them."""


class PerCpuRingsReader:
    """Drain the ring buffers of every CPU as one stream, in time order.

    `capacity` is what record's poll interval is computed from: the events all the
    rings hold between two reads when they fill as the last read found them (the
    fullest ring fills first); one ring's worth when the last read found none, as
    a sudden burst may come from one CPU."""

    def __init__(self, rings: list[RingBufferReader] | list[CpuEventSlots], slots: EventSlots | None = None) -> None:
        self._rings = rings
        self._slots = slots  # the rings' shared mappings, closed with them
        self._ring_capacity = min(r.capacity or 0 for r in rings)
        self.capacity: int | None = self._ring_capacity

    def read(self) -> np.ndarray:
        parts = [events for events in (ring.read() for ring in self._rings) if events.size]
        if not parts:
            self.capacity = self._ring_capacity
            return np.empty(0, dtype=EVENT_DTYPE)
        fullest = max(len(events) for events in parts)
        total = sum(len(events) for events in parts)
        self.capacity = self._ring_capacity * total // fullest
        if len(parts) == 1:
            return parts[0]
        # Merged as opaque records: numpy copies and gathers a structured dtype field
        # by field, 8-15x slower (a gather of 55k events: 5.2 ms, as records 0.2 ms).
        # Each ring is (nearly) in time order: a stable sort (timsort) merges the runs.
        records = np.concatenate([events.view(_OPAQUE_EVENT) for events in parts])
        order = np.argsort(np.concatenate([events["ts_ns"] for events in parts]), kind="stable")
        return np.take(records, order).view(EVENT_DTYPE)

    def close(self) -> None:
        for ring in self._rings:
            ring.close()
        if self._slots:
            self._slots.close()
