"""How long record waits between two reads of the events (`record.poll_wait_s`)."""

from __future__ import annotations

import pytest

from mysqlio.record import FLUSH_S, POLL_MIN_S, RING_FILL_AT_READ, SUDDEN_RATE, poll_wait_s
from mysqlio.ringbuf import RECORD

RING_EVENTS = (64 << 20) // RECORD  # the default ring's


def test_a_reader_of_unknown_capacity_is_read_at_the_shortest_wait() -> None:
    assert poll_wait_s(0, 1.0, None) == POLL_MIN_S
    assert poll_wait_s(10, 1.0, None) == POLL_MIN_S


def test_an_idle_or_slow_ring_is_read_once_a_flush() -> None:
    assert poll_wait_s(0, FLUSH_S, RING_EVENTS) == FLUSH_S
    assert poll_wait_s(6_000, FLUSH_S, RING_EVENTS) == FLUSH_S  # 12k events/s: MariaDB 11.8 under sysbench


@pytest.mark.parametrize("rate", [300_000, 1_000_000, 2_000_000])
def test_a_fast_ring_is_read_before_it_is_an_eighth_full(rate: int) -> None:
    waited = 0.2
    wait = poll_wait_s(int(rate * waited), waited, RING_EVENTS)
    assert POLL_MIN_S <= wait < FLUSH_S
    assert rate * wait <= RING_FILL_AT_READ * RING_EVENTS * 1.0001


def test_an_idle_ring_holds_a_wait_of_a_sudden_load() -> None:
    for capacity in (RING_EVENTS, RING_EVENTS // 4, 50_000):
        assert poll_wait_s(0, FLUSH_S, capacity) * SUDDEN_RATE <= max(capacity, POLL_MIN_S * SUDDEN_RATE)


def test_never_shorter_than_the_shortest_wait() -> None:
    # a small ring (1 MiB: 16k events), idle or at a high rate: read every POLL_MIN_S
    assert poll_wait_s(0, FLUSH_S, 16_384) == POLL_MIN_S
    assert poll_wait_s(100_000, 0.05, 16_384) == POLL_MIN_S
    assert poll_wait_s(1, 0.0, RING_EVENTS) <= FLUSH_S  # no division by zero
