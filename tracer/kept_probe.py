"""--follow: the eBPF probe kept loaded across a restart of the traced server (issue 61).

Opening a probe (the object's load, the verifier, the attach) takes one to two seconds,
and a restarted server reads its buffer pool back (innodb_buffer_pool_load_at_startup)
within a second of its start: a probe opened anew for the restarted process would miss
that load. So when the traced process exits, its probe is not closed but kept, and the
next process found (mysqlio.follow) is traced by re-targeting it: parked at the exit
(BpfProbe.park: counting nothing, its tables emptied), the pid filter moved when the new
process is found (BpfProbe.retarget: one write of the control line). SystemTap's module
is started again, as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from . import backend
from .errors import TargetGone
from .probe import Probe


class KeptProbe:
    """The probe of the process traced last, kept after it exited (eBPF), until the next
    process of the same server is opened with it or `close`."""

    def __init__(self) -> None:
        self.probe: Any = None  # a BpfProbe waiting for the next process
        self._target = 0  # the pid the kept probe was re-targeted at (`retarget`), 0: none yet

    def retarget(self, pid: int) -> None:
        """Count `pid` with the kept probe from now on (mysqlio.follow's `found`: the
        restarted server found, its session opened a little later); nothing without one."""
        if self.probe is not None and self._target != pid:
            try:
                self.probe.retarget(pid)
            except BaseException:
                self.close()
                raise
            self._target = pid

    @contextlib.contextmanager
    def open(
        self,
        backend_name: str,
        pid: int,
        record_ring_bytes: int = 0,
        stop: threading.Event | None = None,
        timed: bool = True,
        connections: bool = False,
    ) -> Iterator[Probe]:
        """backend.open_probe's probe, or the kept one re-targeted at `pid`; when the block
        ends with TargetGone an eBPF probe is kept (still attached, counting nothing),
        otherwise closed."""
        self.retarget(pid)
        probe, self.probe = self.probe, None
        self._target = 0
        if probe is not None:
            try:
                if timed:
                    probe.start_timing()
            except BaseException:
                probe.close()
                raise
        else:
            probe = backend.open_probe(backend_name, pid, record_ring_bytes, stop, timed, connections)
        try:
            yield probe
        except TargetGone:
            if hasattr(probe, "park"):
                try:  # emptied now, while the next process is looked for
                    probe.park()
                except BaseException:
                    probe.close()
                    raise
                self.probe = probe
            else:
                probe.close()
            raise
        except BaseException:
            probe.close()
            raise
        probe.close()

    def close(self) -> None:
        """Close the kept probe (the server did not come back, or tracing stopped)."""
        probe, self.probe = self.probe, None
        if probe is not None:
            probe.close()
