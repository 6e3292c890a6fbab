"""Scraping `mysqlio exporter`: its metrics parsed, a scrape that includes a workload,
and the per-file counters next to iogen's ground truth (tests and tools/matrix_guest.py)."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

EXPORTER_INTERVAL_S = 0.3  # the exporter's -i in the tests and the kernel matrix
FILE_COUNTERS = ("write_bytes", "write_ops", "read_bytes", "read_ops", "errors")
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range")


@dataclass
class Metrics:
    """One scrape: sample name -> list of (labels, value)."""

    families: set[str]
    samples: dict[str, list[tuple[dict[str, str], float]]]

    def value(self, name: str, **labels: str) -> float:
        found = [v for lab, v in self.samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
        assert len(found) == 1, (name, labels, found)
        return found[0]

    def by_path(self, name: str, **labels: str) -> dict[str, float]:
        """path -> value of a per-file sample, summed over the labels not given."""
        out: dict[str, float] = {}
        for lab, v in self.samples.get(name, []):
            if all(lab.get(k) == x for k, x in labels.items()):
                out[lab["path"]] = out.get(lab["path"], 0) + v
        return out

    def total(self, name: str, **labels: str) -> float:
        return sum(v for lab, v in self.samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items()))


def parse(text: str) -> Metrics:
    families: set[str] = set()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for s in family.samples:
            samples.setdefault(s.name, []).append((dict(s.labels), s.value))
    return Metrics(families, samples)


# one scrape's socket timeout: an emulated guest's exporter once took over 10 s to answer
# (Debian 12's 6.1 under TCG, a fresh CI run: every cell "TimeoutError: timed out")
SCRAPE_TIMEOUT_S = 30


def scrape(port: int) -> Metrics:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SCRAPE_TIMEOUT_S) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse(response.read().decode())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, predicate: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


def scrape_after(port: int, t: float) -> Metrics:
    """A scrape whose counts include everything done before time t: the first sample
    stamped after t may have drained just before t, the one after it cannot."""
    first = 0.0

    def sampled_after_t() -> bool:
        nonlocal first
        first = scrape(port).value("mysqlio_last_sample_timestamp_seconds")
        return first > t

    wait_for("a sample after the workload", sampled_after_t)
    wait_for("the next sample", lambda: scrape(port).value("mysqlio_last_sample_timestamp_seconds") > first)
    return scrape(port)


def iogen_files(expected: dict, directory: Path) -> dict[str, dict[str, int]]:
    """iogen's ground truth per path under `directory`, in the exporter's counter names."""
    out: dict[str, dict[str, int]] = {}
    for f in expected["files"]:
        assert f["path"].startswith(str(directory) + "/")
        row = out.setdefault(f["path"], dict.fromkeys((*FILE_COUNTERS, *SYNC_CALLS), 0))
        for c in FILE_COUNTERS:
            row[c] += f[c]
        for call in SYNC_CALLS:
            row[call] += f.get(f"{call}_ops", 0)  # msync_ops: page-cache scenarios only
    return out


def exported_files(m: Metrics, directory: Path) -> dict[str, dict[str, int]]:
    """The exporter's per-file counters of the files under `directory`."""
    out: dict[str, dict[str, int]] = {}
    prefix = str(directory) + "/"
    names = [(c, f"mysqlio_file_{c}_total", {}) for c in FILE_COUNTERS]
    names += [(call, "mysqlio_file_sync_ops_total", {"call": call}) for call in SYNC_CALLS]
    for key, name, labels in names:
        for path, value in m.by_path(name, **labels).items():
            if path.startswith(prefix):
                out.setdefault(path, dict.fromkeys((*FILE_COUNTERS, *SYNC_CALLS), 0))[key] = int(value)
    return out
