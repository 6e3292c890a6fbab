"""tests/guest_lane.py's Lane: one run at a time, in the order queued; a run's exception re-raised
where its result is taken; a key never queued run by the caller."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError

import guest_lane
import pytest


def test_runs_one_at_a_time_in_order_and_reraises() -> None:
    running, order, overlap = set[str](), list[str](), list[str]()
    gate = threading.Event()
    lane = guest_lane.Lane()  # not the session's, which holds the guests

    def run(name: str) -> str:
        if running:
            overlap.append(name)
        running.add(name)
        gate.wait(5)
        order.append(name)
        running.discard(name)
        if name == "bad":
            raise ValueError("the guest wrote no result")
        return name.upper()

    for name in ("lane-a", "bad", "lane-b"):
        lane.submit(name, lambda name=name: run(name))
    lane.submit("lane-a", lambda: run("again"))  # queued once
    gate.set()
    assert lane.result("lane-b", lambda: "not queued") == "LANE-B"
    assert lane.result("lane-a", lambda: "not queued") == "LANE-A"
    with pytest.raises(ValueError, match="no result"):
        lane.result("bad", lambda: "not queued")
    assert order == ["lane-a", "bad", "lane-b"] and not overlap
    assert lane.result("never queued", lambda: threading.current_thread().name) == threading.current_thread().name


def test_cancel_pending_drops_the_runs_not_started() -> None:
    lane, gate, started, ran = guest_lane.Lane(), threading.Event(), threading.Event(), list[str]()

    def run(name: str) -> str:
        started.set()
        gate.wait(5)
        ran.append(name)
        return name

    lane.submit("first", lambda: run("first"))
    lane.submit("second", lambda: run("second"))
    assert started.wait(5)
    lane.cancel_pending()
    gate.set()
    assert lane.result("first", lambda: "not queued") == "first"  # it had started
    with pytest.raises(CancelledError):
        lane.result("second", lambda: "not queued")
    assert ran == ["first"]
