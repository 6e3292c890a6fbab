"""The event stream's bulk readers, on maps laid out as the kernel's. A ring buffer
(kernel/bpf/ringbuf.c): committed events in order, a record being written ends the read,
discarded ones are left out, and the consumer position moves past exactly what was read.
Event slots (probes/mysqlio.bpf.c, struct event_slot): published slots in order, one not
yet published ends the read, the tail moves past exactly what was read. The CPUs'
streams read as one, in time order."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

import numpy as np
import pytest

from mysqlio import abi
from mysqlio.bpf_probe import MIN_RING_BYTES, ring_bytes_per_cpu
from mysqlio.events import EVENT_DTYPE
from mysqlio.ringbuf import (
    BUSY_BIT,
    DISCARD_BIT,
    RECORD,
    SLOT_DTYPE,
    CpuEventSlots,
    EventSlots,
    PerCpuRingsReader,
    RingBufferReader,
)

SIZE = 16 * mmap.PAGESIZE
PAGE = mmap.PAGESIZE


class FakeRing:
    """A memfd as the ring map's pages: consumer_pos, producer_pos, then the data area
    (once: these tests never wrap)."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("ring")
        os.ftruncate(self.fd, 2 * PAGE + 2 * SIZE)
        self.written = 0

    def put(self, ino: int, flags: int = 0, ts_ns: int = 0) -> None:
        event = np.zeros(1, EVENT_DTYPE)
        event["ino"], event["tid"], event["offset"], event["ts_ns"] = ino, 7, ino * 4096, ts_ns
        header = np.array([EVENT_DTYPE.itemsize | flags, 0], "<u4").tobytes()
        os.pwrite(self.fd, header + event.tobytes(), 2 * PAGE + self.written)
        self.written += RECORD
        os.pwrite(self.fd, np.uint64(self.written).tobytes(), PAGE)  # producer_pos

    def consumer_pos(self) -> int:
        return int(np.frombuffer(os.pread(self.fd, 8, 0), np.uint64)[0])


@pytest.fixture
def ring() -> Iterator[FakeRing]:
    r = FakeRing()
    yield r
    os.close(r.fd)


def test_committed_events_in_order(ring: FakeRing) -> None:
    reader = RingBufferReader(ring.fd, SIZE)
    assert len(reader.read()) == 0
    for ino in range(1, 201):
        ring.put(ino)
    events = reader.read()
    assert events.dtype == EVENT_DTYPE and events.flags.c_contiguous
    assert events["ino"].tolist() == list(range(1, 201))
    assert events["offset"].tolist() == [ino * 4096 for ino in range(1, 201)]
    assert set(events["tid"].tolist()) == {7}
    assert ring.consumer_pos() == 200 * RECORD
    ring.put(201)
    assert reader.read()["ino"].tolist() == [201]  # from where the last read stopped
    reader.close()


def test_a_record_being_written_ends_the_read(ring: FakeRing) -> None:
    reader = RingBufferReader(ring.fd, SIZE)
    ring.put(1)
    ring.put(2)
    ring.put(3, BUSY_BIT)
    ring.put(4)
    assert reader.read()["ino"].tolist() == [1, 2]
    assert ring.consumer_pos() == 2 * RECORD  # the busy record and the one after it wait
    reader.close()


def test_discarded_records_are_skipped_and_freed(ring: FakeRing) -> None:
    reader = RingBufferReader(ring.fd, SIZE)
    for ino in range(1, 6):
        ring.put(ino, DISCARD_BIT if ino % 2 == 0 else 0)
    assert reader.read()["ino"].tolist() == [1, 3, 5]
    assert ring.consumer_pos() == 5 * RECORD
    reader.close()


def test_a_record_of_another_size_is_an_error(ring: FakeRing) -> None:
    reader = RingBufferReader(ring.fd, SIZE)
    ring.put(1)
    os.pwrite(ring.fd, np.array([EVENT_DTYPE.itemsize + 8], "<u4").tobytes(), 2 * PAGE)
    with pytest.raises(RuntimeError, match="unexpected record size"):
        reader.read()
    reader.close()


def test_the_cpus_rings_merge_in_time_order() -> None:
    rings = [FakeRing(), FakeRing()]
    try:
        reader = PerCpuRingsReader([RingBufferReader(r.fd, SIZE) for r in rings])
        per_ring = SIZE // RECORD
        assert reader.capacity == per_ring  # nothing read yet: a burst may come from one CPU
        for ts in (10, 30, 50, 60):
            rings[0].put(ts, ts_ns=ts)
        for ts in (20, 40):
            rings[1].put(ts, ts_ns=ts)
        events = reader.read()
        assert events.dtype == EVENT_DTYPE and events["ts_ns"].tolist() == [10, 20, 30, 40, 50, 60]
        assert events["ino"].tolist() == [10, 20, 30, 40, 50, 60]
        # 6 events, 4 of them in the fullest ring: the rings fill after 6/4 of one ring's worth
        assert reader.capacity == per_ring * 6 // 4
        assert [r.consumer_pos() for r in rings] == [4 * RECORD, 2 * RECORD]
        rings[1].put(70, ts_ns=70)
        assert reader.read()["ts_ns"].tolist() == [70]
        assert reader.capacity == per_ring
        assert len(reader.read()) == 0
        reader.close()
    finally:
        for r in rings:
            os.close(r.fd)


def test_each_cpu_gets_a_power_of_two_share_of_the_ring_bytes() -> None:
    assert ring_bytes_per_cpu(64 << 20, 2) == 32 << 20
    assert ring_bytes_per_cpu(64 << 20, 3) == 16 << 20  # 21.3 MiB rounded down
    assert ring_bytes_per_cpu(1 << 20, 64) == MIN_RING_BYTES


class FakeSlots:
    """Memfds as the event-slot maps' pages (struct event_slot, struct mio_slot_pos):
    `per_cpu` slots for each of `cpus` CPUs, written as a CPU's programs write them."""

    def __init__(self, cpus: int = 2, per_cpu: int = 64) -> None:
        self.cpus, self.per_cpu = cpus, per_cpu
        self.slots_fd = os.memfd_create("event_slots")
        os.ftruncate(self.slots_fd, cpus * per_cpu * SLOT_DTYPE.itemsize)
        self.pos_fd = os.memfd_create("event_pos")
        os.ftruncate(self.pos_fd, 2 * cpus * abi.SLOT_BYTES)
        self.mapping = EventSlots(self.slots_fd, self.pos_fd, cpus, per_cpu)

    def head(self, cpu: int) -> int:
        return int(np.frombuffer(os.pread(self.pos_fd, 8, 2 * cpu * abi.SLOT_BYTES), np.uint64)[0])

    def tail(self, cpu: int) -> int:
        return int(np.frombuffer(os.pread(self.pos_fd, 8, (2 * cpu + 1) * abi.SLOT_BYTES), np.uint64)[0])

    def put(self, cpu: int, ino: int, ts_ns: int = 0, publish: bool = True) -> None:
        """The CPU's next event: its head moves, its slot is written, then published."""
        idx = self.head(cpu)
        slot = np.zeros(1, SLOT_DTYPE)
        slot["event"]["ino"], slot["event"]["tid"], slot["event"]["ts_ns"] = ino, 7, ts_ns
        slot["seq"] = idx + 1 if publish else 0
        os.pwrite(self.slots_fd, slot.tobytes(), (cpu * self.per_cpu + idx % self.per_cpu) * SLOT_DTYPE.itemsize)
        os.pwrite(self.pos_fd, np.uint64(idx + 1).tobytes(), 2 * cpu * abi.SLOT_BYTES)

    def publish(self, cpu: int, idx: int) -> None:
        at = (cpu * self.per_cpu + idx % self.per_cpu) * SLOT_DTYPE.itemsize + EVENT_DTYPE.itemsize
        os.pwrite(self.slots_fd, np.uint64(idx + 1).tobytes(), at)

    def close(self) -> None:
        os.close(self.slots_fd)
        os.close(self.pos_fd)


@pytest.fixture
def slots() -> Iterator[FakeSlots]:
    s = FakeSlots()
    yield s
    s.close()


def test_published_slots_in_order_and_the_tail_moves_past_them(slots: FakeSlots) -> None:
    reader = CpuEventSlots(slots.mapping, 1)
    assert len(reader.read()) == 0
    for ino in range(1, 41):
        slots.put(1, ino)
    events = reader.read()
    assert events.dtype == EVENT_DTYPE and events.flags.c_contiguous
    assert events["ino"].tolist() == list(range(1, 41)) and set(events["tid"].tolist()) == {7}
    assert (slots.tail(1), slots.tail(0)) == (40, 0)  # the other CPU's stream untouched
    slots.put(1, 41)
    assert reader.read()["ino"].tolist() == [41]


def test_a_slot_not_yet_published_ends_the_read_until_it_is(slots: FakeSlots) -> None:
    reader = CpuEventSlots(slots.mapping, 0)
    slots.put(0, 1)
    slots.put(0, 2)
    slots.put(0, 3, publish=False)  # a program is writing it
    slots.put(0, 4)
    assert reader.read()["ino"].tolist() == [1, 2]
    assert slots.tail(0) == 2
    slots.publish(0, 2)
    assert reader.read()["ino"].tolist() == [3, 4]
    assert slots.tail(0) == 4


def test_slots_wrapping_to_the_first_are_read_in_order(slots: FakeSlots) -> None:
    reader = CpuEventSlots(slots.mapping, 0)
    for ino in range(1, 51):
        slots.put(0, ino)
    assert len(reader.read()) == 50
    # 50 + 40 written: the last 26 wrap to slots 0-25, over events already read
    for ino in range(51, 91):
        slots.put(0, ino)
    assert reader.read()["ino"].tolist() == list(range(51, 91))
    assert slots.tail(0) == 90
    # a slot left from the last lap is not published for this one: the read stops at it
    os.pwrite(slots.pos_fd, np.uint64(91).tobytes(), 0)
    assert len(reader.read()) == 0 and slots.tail(0) == 90


def test_the_cpus_slots_merge_in_time_order(slots: FakeSlots) -> None:
    reader = PerCpuRingsReader([CpuEventSlots(slots.mapping, cpu) for cpu in range(2)], slots.mapping)
    assert reader.capacity == slots.per_cpu
    for ts in (10, 30, 50):
        slots.put(0, ts, ts_ns=ts)
    for ts in (20, 40):
        slots.put(1, ts, ts_ns=ts)
    assert reader.read()["ts_ns"].tolist() == [10, 20, 30, 40, 50]
    assert (slots.tail(0), slots.tail(1)) == (3, 2)
    reader.close()
