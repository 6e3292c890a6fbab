"""What top and doctor say about a memory-mapped redo log (MariaDB 11.8, innodb_log_file_mmap):
with the eBPF page-cache accounting its writes are seen as dirtied and written-back bytes;
without it (SystemTap, a kernel without the hooks, --no-page-cache) they are not seen at all."""

from __future__ import annotations

from dataclasses import dataclass, field

from mysqlio import mapped_files
from mysqlio.top import page_cache_counted

REDO = [mapped_files.MappedFile("/srv/root/data/ib_logfile0", "redo", 96 << 20)]
LOG = b"2026-11-23 18:58:45 0 [Note] InnoDB: log sequence number 45538 (memory-mapped); transaction id 14\n"
MMAP_NOTE = "the redo log (ib_logfile0) is memory-mapped"


@dataclass
class _Probe:
    page_cache: bool
    limits: list[str] = field(default_factory=list)

    def uncounted(self) -> list[str]:
        return self.limits


class _StapLike:
    def uncounted(self) -> list[str]:
        return ["page cache, writeback, devices and msync are counted by the eBPF backend only, not SystemTap"]


def test_page_cache_counted() -> None:
    assert page_cache_counted(_Probe(True))
    assert not page_cache_counted(_Probe(False))  # --no-page-cache, or shaped off at load
    missing = "page cache, writeback and devices are not counted on this kernel (a tracepoint is missing)"
    assert not page_cache_counted(_Probe(True, [missing]))
    assert page_cache_counted(_Probe(True, ["msync is not counted on this kernel (no way to find the file)"]))
    assert not page_cache_counted(_StapLike())  # no page_cache attribute at all


def test_redo_note_with_and_without_the_page_cache() -> None:
    seen = mapped_files.redo_note(REDO, page_cache=True)
    assert seen is not None and seen.startswith(MMAP_NOTE)
    assert "dirtied and written back" in seen and "no redo writes" not in seen
    unseen = mapped_files.redo_note(REDO)
    assert unseen is not None and unseen.startswith(MMAP_NOTE) and "shows no redo writes or syncs" in unseen
    assert mapped_files.redo_note([], page_cache=True) is None
    assert mapped_files.redo_note(None, page_cache=True) is None


def test_doctor_check_ok_when_the_page_cache_is_counted() -> None:
    seen = mapped_files.doctor_check(REDO, LOG, page_cache=True)
    assert (seen["status"], seen["value"]) == ("ok", "mmap")
    assert "dirtied and written back" in seen["detail"] and "ib_logfile0 mapped shared" in seen["detail"]
    assert "'InnoDB: log sequence number 45538 (memory-mapped); transaction id 14'" in seen["detail"]
    assert not seen.get("fix")
    # the log alone says so: the same
    assert mapped_files.doctor_check([], LOG, page_cache=True)["status"] == "ok"
    # without the hooks: the old warning and its fix
    unseen = mapped_files.doctor_check(REDO, LOG, page_cache=False)
    assert (unseen["status"], unseen["value"], unseen["fix"]) == ("warn", "mmap", mapped_files.FIX)
    assert "cannot see the redo log's writes" in unseen["detail"]
    # nothing mapped: unchanged either way
    plain = b"InnoDB: log sequence number 1; transaction id 1\n"
    assert mapped_files.doctor_check([], plain, page_cache=True)["status"] == "ok"
    assert mapped_files.doctor_check([], plain, page_cache=True)["value"] == "syscalls"
    assert mapped_files.doctor_check(None, None, page_cache=True)["status"] == "skip"
