"""One background lane for the suite's emulated guests (tools/guest.py).

A guest on a Debian kernel takes 2-7 minutes of emulation (TCG), most of it CPU-bound in
its two vCPU threads, while most host tests spend their time waiting on timers, servers
and intervals. conftest's pytest_collection_finish submits every selected guest run here,
in the order the tests will ask for them (the kernel matrix, the lockdown guest, the
SystemTap guests); one worker runs them one after another, so at most one guest runs at a
time. A test then takes its run's result with `result(key, ...)`, waiting if the run is not
done yet; a run that raised re-raises in that test (pytest.fail included). A key nobody
submitted (a test run on its own without conftest's hook, say) runs in the caller.

The guests' console and output go to their files under build/matrix as before; nothing is
streamed (it would interleave with the host tests' own output)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Lane:
    """Runs queued by key, one after another in one worker thread."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._runs: dict[str, Future[Any]] = {}

    def submit(self, key: str, run: Callable[[], Any]) -> None:
        """Queue run() under key (once: a key already queued is left as it is)."""
        if key in self._runs:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guest-lane")
        self._runs[key] = self._pool.submit(run)

    def cancel_pending(self) -> None:
        """Drop the runs not started (a session ended early, by -x or Ctrl-C, would otherwise
        wait at exit for every guest still queued); one running ends on its own timeout."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def result(self, key: str, run: Callable[[], Any]) -> Any:
        """run()'s value for key: from the lane when queued there (waiting for it), else run here."""
        future = self._runs.get(key)
        return run() if future is None else future.result()


_lane = Lane()  # the session's: conftest queues, the tests take
submit = _lane.submit
result = _lane.result
cancel_pending = _lane.cancel_pending
