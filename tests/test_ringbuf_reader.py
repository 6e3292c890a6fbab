"""The ring buffer's bulk reader on a ring laid out as the kernel's (kernel/bpf/ringbuf.c):
committed events in order, a record being written ends the read, discarded ones are left out,
and the consumer position moves past exactly what was read; the CPUs' rings read as one
stream in time order."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

import numpy as np
import pytest

from mysqlio.bpf_probe import MIN_RING_BYTES, ring_bytes_per_cpu
from mysqlio.events import EVENT_DTYPE
from mysqlio.ringbuf import BUSY_BIT, DISCARD_BIT, RECORD, PerCpuRingsReader, RingBufferReader

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
