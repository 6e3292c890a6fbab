"""A throwaway Prometheus (Debian's `prometheus`) for tests: loopback only, its own
config and storage in a temp dir, scraping given targets every second; PromQL over
its HTTP API."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from .processes import die_with_parent, find_binary, tail, wait_or_kill
from .scrape import free_port

SCRAPE_S = 1


class Prometheus:
    """`with Prometheus({"iogen": ["127.0.0.1:9101"]}, rule_files=[...]) as prom:`"""

    def __init__(self, jobs: dict[str, list[str]], rule_files: list[Path] | None = None) -> None:
        self.jobs = jobs
        self.rule_files = rule_files or []
        self.port = 0
        self._dir = ""
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Prometheus:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def config_text(self) -> str:
        scrape = [
            {"job_name": job, "scrape_interval": f"{SCRAPE_S}s", "static_configs": [{"targets": targets}]}
            for job, targets in self.jobs.items()
        ]
        config = {
            "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": scrape,
        }
        return json.dumps(config, indent=1)  # YAML is a superset of JSON

    def start(self, timeout_s: float = 60) -> None:
        binary = find_binary("prometheus")
        self._dir = tempfile.mkdtemp(prefix="mysqlio-prom-")
        config = Path(self._dir) / "prometheus.yml"
        config.write_text(self.config_text())
        self.port = free_port()
        log = open(Path(self._dir) / "prometheus.log", "wb")  # noqa: SIM115 (the process owns it)
        self._proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self._dir}/data",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                text = tail(str(Path(self._dir) / "prometheus.log"))
                self.stop()
                raise RuntimeError(f"prometheus did not become ready: {text}")
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            wait_or_kill(proc, 20, group=False)
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""

    def _api(self, path: str, params: dict[str, str]) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                body = json.load(r)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        if body.get("status") != "success":
            raise AssertionError(f"PromQL {params.get('query')!r}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant vector: [{'metric': {...}, 'value': [t, 'v']}, ...]."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return list(self._api("query", params)["result"])

    def query_range(self, promql: str, start: float, end: float, step_s: float = 1.0) -> list[dict[str, Any]]:
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s}"}
        return list(self._api("query_range", params)["result"])

    def targets_up(self) -> dict[str, float]:
        """instance -> value of `up`."""
        return {r["metric"]["instance"]: float(r["value"][1]) for r in self.query("up")}

    def rule_groups(self) -> list[dict[str, Any]]:
        return list(self._api("rules", {})["groups"])
