"""`mysqlio verify`, the command: connect, check performance_schema, trace the window,
compare, print the result (mysqlio.verify describes the method)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

import pymysql

from .. import mapped_files, target
from ..classify import Classifier
from ..errors import TargetGone, UserError
from ..layout import read_layout, to_server_path
from ..mysql_conn import ConnectionOptions, Connector, error_text, query
from ..sampling import IntervalSampler
from ..session import choose_target, open_session
from .compare import MIN_BYTES, TOLERANCE, MappedFile, compare, redo_reference, relative_to_datadir, verdict
from .lost import LostInstances, lost_warning, read_instances
from .pfs import LOST_STATUS, REDO_STATUS, check_performance_schema, read_file_summary, server_paths, status_value
from .result import VerifyResult, shown_names, write_text
from .window import DRAIN_EVERY_S, Reading, measure_window

VERIFY_TIMEOUT_S = 10.0  # file_summary_by_instance of a server with many tables takes a while


def run_verify(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Exit 0 when every judged file agrees, 1 when one differs or nothing could be judged."""
    pid, backend = choose_target(args.pid, getattr(args, "backend", "auto"))  # before a password prompt
    connector = Connector.resolve(ConnectionOptions.from_args(args), pid, timeout_s=VERIFY_TIMEOUT_S)
    conn = connector.open()
    try:
        warnings = check_performance_schema(conn, connector.user)
        lost_before = status_value(conn, LOST_STATUS) or 0
        layout = read_layout(pid)
        here = server_paths(pid)  # performance_schema's names are the server's: its datadir, inside its root
        if layout.datadir:
            server_datadir, datadir = to_server_path(layout.datadir, layout.root), layout.datadir
        else:
            server_datadir = str(query(conn, "SELECT @@datadir AS d")[0]["d"]).rstrip("/") or "/"
            datadir = here(server_datadir)
        has_redo_counter = status_value(conn, REDO_STATUS) is not None
        classifier = Classifier(layout)
        mapped = [
            MappedFile(f.path, relative_to_datadir(f.path, datadir), f.kind, f.mapped_bytes)
            for f in mapped_files.mapped_files(pid, classifier) or []
        ]

        def read_server() -> Reading:
            try:
                files, instances = read_file_summary(conn, server_datadir, here)
                redo = status_value(conn, REDO_STATUS) if has_redo_counter else None
            except pymysql.MySQLError as exc:
                raise UserError(f"lost the connection to {connector.describe()}: {error_text(exc)}") from None
            return Reading(files, redo, instances)

        # compared with performance_schema's names as paths here (`here`), as the layout's
        with open_session(backend, pid, layout=layout, server_names=False) as session:
            sampler = IntervalSampler(session)
            # on stderr in both modes: the probes are attached, the window starts now
            print(
                f"mysqlio: comparing with performance_schema for {args.duration:g} s ...", file=sys.stderr, flush=True
            )
            sampler.early.start(DRAIN_EVERY_S)  # mid-interval drains where the maps call for them, as top's
            try:
                window = measure_window(sampler, read_server, args.duration)
            finally:
                # its mid-interval drains (started once an interval lost rows) end before
                # the probe closes: else that thread drains closed maps (EBADF, a traceback)
                sampler.early.close()
        if not target.is_alive(pid):
            raise TargetGone(f"process {pid} exited during the window; nothing to compare")
        lost = LostInstances(lost_before, status_value(conn, LOST_STATUS) or 0, *read_instances(conn))
    finally:
        conn.close()
    rows = compare(window, datadir, classifier.kind, mapped={f.path for f in mapped})
    redo = redo_reference(window, rows, mapped)
    # compared as paths here; shown as the server names its files, as top shows them (a
    # container's /proc/PID/root/... is no name its DBA knows, and changes with each restart)
    rows, mapped, redo = shown_names(rows, mapped, redo, layout.root)
    mapped_paths = {f.path for f in mapped}
    rowless = [
        r.name
        for r in rows
        if r.pfs_bytes is None and r.kind != "redo" and r.mysqlio_bytes and r.path not in mapped_paths
    ]
    lost_note = lost_warning(lost, rowless)
    if lost_note:
        warnings.append(lost_note)
    name = target.process_name(pid)
    result = VerifyResult(
        pid=pid,
        server=f"{name} {layout.version}" if layout.version else name,
        endpoint=connector.endpoint.describe(),
        window=window,
        rows=rows,
        redo=redo,
        verdict=verdict(rows, window.lost_events, MIN_BYTES, TOLERANCE, [f.name for f in mapped]),
        warnings=warnings,
        mapped=mapped,
    )
    if args.json:
        out.write(json.dumps(result.to_json()) + "\n")
        out.flush()
    else:
        write_text(result, out)
    return 0 if result.verdict.state == "agree" else 1
