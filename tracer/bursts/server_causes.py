"""A train's cause from what the server says (`--mysql`: server_timers.ServerFacts), a pure
function of (train, facts): `server_cause()`; None when the server names nothing, and
`explain` falls back on the generic timers the facts do not contradict (`generic_ok`).

The rules, in order (a period matches within EXPLAIN_TOL):

- an event of the scheduler (when it is ON) whose period matches: a train on a table's
  file (classify: `schema.table`) the event writes is that event ("event s.e (every 5 s,
  writes s.t)"); on the binary log, the event's statements (events that write a table);
  on the Aria log (aria_log.NNNNNNNN) or mysql.event's files, the scheduler's record of
  each run (LAST_EXECUTED in mysql.event, an Aria table in MariaDB 10.4+); on the redo
  log, the events that write InnoDB tables (their ENGINE, as the server gives it);
- the redo log's syncs at innodb_flush_log_at_timeout (1 s by default): with
  innodb_flush_log_at_trx_commit 0 or 2, that setting (commits do not sync); with 1, the
  background flush of the same timer (commits sync as well); its writes with 0 too. On
  MySQL 8.0.22+ (innodb_log_writer_threads, log0write.cc, srv0srv.cc) the thread is
  named: ON, the log flusher thread syncs every innodb_flush_log_at_timeout when
  trx_commit is 0 or 2 (with 1 it syncs as commits ask, on no timer: no cause; the log
  writer writes as the log buffer fills, on no timer either); OFF, no log thread runs and
  the master thread's 1 s loop writes and syncs the redo log (log_buffer_sync_in_background,
  whatever innodb_flush_log_at_timeout says);
- InnoDB page files (ibdataN, .ibd, undo, doublewrite, MySQL's mysql.ibd) at 1 s: the page
  cleaner's 1 s loop (the master thread's in 5.5), with innodb_io_capacity (pages per
  second), innodb_io_capacity_max, adaptive flushing and the dirty-page limits it flushes
  by, and on MySQL its innodb_page_cleaners threads (MariaDB 10.5 shows and ignores it);
- the binary log's syncs at binlog_group_commit_sync_delay (MySQL, µs; 0: none) with
  sync_binlog=1: each group of commits waits that long before its sync, so a steady load
  syncs it at that period;
- Aria files at aria_checkpoint_interval (0: no checkpoints);
- MyISAM files at flush_time (0, the default: never).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING

from ..classify import Classifier
from ..layout import ServerLayout
from .train import Train

if TYPE_CHECKING:
    from ..server_timers import ServerEvent, ServerFacts

EXPLAIN_TOL = 0.15  # as explain.EXPLAIN_TOL: a timer matches within +-15 % of its period
PAGE_KINDS = frozenset({"system", "doublewrite", "table", "undo", "dictionary"})  # MySQL's mysql.ibd too
# what made the kernel write back, for the server's timers: its syncs, its writes
_SYNC_BY = frozenset({"fsync", "fdatasync", "sync_file_range", "msync"})
_WRITE_BY = frozenset({"write", "server_other"})


def _near(period_s: float, timer_s: float | None) -> bool:
    return bool(timer_s) and abs(period_s - float(timer_s or 0)) <= EXPLAIN_TOL * float(timer_s or 0)


def _seconds(value: float) -> str:
    return f"{value:g} s"


@lru_cache(maxsize=8)
def _classifier(datadir: str | None) -> Classifier:
    return Classifier(ServerLayout(datadir=datadir))


def table_of(path: str, datadir: str | None) -> str | None:
    """`schema.table` of a table file (partitions folded): under the server's datadir when
    known (classify), else from its directory and name (`<schema>/<table>.MYD`)."""
    name = _classifier(datadir).table(path, fold_partitions=True)
    if name is None and datadir is not None and not path.startswith(datadir + os.sep):
        name = _classifier(os.path.dirname(os.path.dirname(path))).table(path, fold_partitions=True)
    return name


def _metric(t: Train) -> str | None:
    """The server's side of a train: "write" or "sync" (writeback: what made the kernel
    write it, when that was the server); None for the kernel flusher's own timers."""
    if t.metric != "writeback":
        return t.metric
    return "sync" if t.writeback_by in _SYNC_BY else "write" if t.writeback_by in _WRITE_BY else None


def _events_text(events: list[ServerEvent], period_s: float, what: str) -> str:
    names = ", ".join(e.qualified for e in events)
    head = f"event{'s' * (len(events) > 1)} {names} (every {_seconds(events[0].interval_s or period_s)}"
    return f"{head}{', ' + what if what else ''})"


def _event_cause(t: Train, facts: ServerFacts) -> str | None:
    if not facts.scheduler_on:
        return None
    due = [e for e in facts.events if _near(t.period_s, e.interval_s)]
    if not due:
        return None
    table = table_of(t.file, facts.datadir)
    if table is not None:
        writers = [e for e in due if table in e.writes]
        if writers:
            return _events_text(writers, t.period_s, f"writes {table}")
    base = os.path.basename(t.file)
    if table == "mysql.event" or (t.kind == "aria" and base.startswith("aria_log.")):
        return _events_text(due, t.period_s, "") + ": the scheduler records each run in mysql.event"
    if t.kind == "binlog":
        writers = [e for e in due if e.writes]
        if writers:
            tables = sorted({x for e in writers for x in e.writes})
            return _events_text(writers, t.period_s, f"writes {', '.join(tables)}") + ": its statements"
    if t.kind == "redo":  # the events that change InnoDB tables (their ENGINE, as the server said)
        innodb = {e: [x for x in e.writes if facts.engines.get(x, "").lower() == "innodb"] for e in due}
        writers = [e for e in due if innodb[e]]
        if writers:
            tables = sorted({x for e in writers for x in innodb[e]})
            return _events_text(writers, t.period_s, f"writes {', '.join(tables)}") + ": its InnoDB changes"
    return None


def _master_redo_cause(t: Train, metric: str, trx: str) -> str | None:
    """MySQL 8.0.22+ with innodb_log_writer_threads=OFF: the master thread writes and syncs
    the redo log in its 1 s loop (innodb_flush_log_at_timeout is not read then)."""
    if not _near(t.period_s, 1.0):
        return None
    loop, off = "the InnoDB master thread's 1 s loop", "innodb_log_writer_threads=OFF: no log flusher thread"
    if metric == "sync" and trx in ("0", "2"):
        return f"innodb_flush_log_at_trx_commit={trx}: the redo log is synced by {loop}, not at commit ({off})"
    if metric == "write" and trx == "0":
        return f"innodb_flush_log_at_trx_commit=0: the redo log is written and synced by {loop} ({off})"
    if metric == "sync" and trx == "1":
        return f"{loop} syncs what commits have not (innodb_flush_log_at_trx_commit=1 syncs at commit; {off})"
    return None


def _redo_cause(t: Train, metric: str, facts: ServerFacts) -> str | None:
    trx = facts.text("innodb_flush_log_at_trx_commit")
    if trx is None:
        return None
    writer_threads = facts.on("innodb_log_writer_threads")  # MySQL 8.0.22+ only
    if writer_threads is False:
        return _master_redo_cause(t, metric, trx)
    timeout = facts.number("innodb_flush_log_at_timeout")
    timeout = timeout if timeout is not None else 1.0
    if not _near(t.period_s, timeout):
        return None
    every = f"innodb_flush_log_at_timeout={timeout:g} s"
    if writer_threads:  # the log flusher's timer, with trx_commit 0 or 2 only
        if metric == "sync" and trx in ("0", "2"):
            return (
                f"innodb_flush_log_at_trx_commit={trx}: the redo log is synced by the log flusher thread every "
                f"{every}, not at commit"
            )
        return None
    if metric == "sync" and trx in ("0", "2"):
        return f"innodb_flush_log_at_trx_commit={trx}: the redo log is synced every {every}, not at commit"
    if metric == "write" and trx == "0":
        return f"innodb_flush_log_at_trx_commit=0: the redo log is written and synced every {every}"
    if metric == "sync" and trx == "1":
        return f"InnoDB's background redo flush every {every} (innodb_flush_log_at_trx_commit=1 also syncs at commit)"
    return None


def _flushing_settings(facts: ServerFacts) -> str:
    """innodb_io_capacity=200 pages/s (max 2000), adaptive flushing ON from 10% of the redo log, ..."""
    parts = []
    cap, cap_max = facts.text("innodb_io_capacity"), facts.text("innodb_io_capacity_max")
    if cap is not None:
        parts.append(f"innodb_io_capacity={cap} pages/s" + (f" (max {cap_max})" if cap_max is not None else ""))
    adaptive = facts.on("innodb_adaptive_flushing")
    if adaptive is not None:
        lwm = facts.text("innodb_adaptive_flushing_lwm")
        at = f" from {float(lwm):g}% of the redo log" if adaptive and lwm is not None else ""
        parts.append(f"adaptive flushing {'ON' if adaptive else 'OFF'}{at}")
    pct, pct_lwm = facts.text("innodb_max_dirty_pages_pct"), facts.text("innodb_max_dirty_pages_pct_lwm")
    if pct is not None:
        lwm_text = f", lwm {float(pct_lwm):g}%" if pct_lwm is not None else ""
        parts.append(f"dirty pages max {float(pct):g}%{lwm_text}")
    return "; ".join(parts)


def _page_cause(t: Train, facts: ServerFacts) -> str | None:
    if not _near(t.period_s, 1.0):
        return None
    version = facts.text("version") or ""
    loop = "the InnoDB master thread's 1 s loop" if version.startswith("5.5") else "the page cleaner's 1 s loop"
    cleaners = facts.text("innodb_page_cleaners")
    if cleaners is not None and facts.mariadb is False and not version.startswith("5.5"):
        loop += f" (innodb_page_cleaners={cleaners})"  # MySQL's; MariaDB 10.5 ignores it
    settings = _flushing_settings(facts)
    return f"{loop}: {settings}" if settings else loop


def _binlog_cause(t: Train, metric: str, facts: ServerFacts) -> str | None:
    """MySQL's binlog_group_commit_sync_delay: no timer, but with sync_binlog=1 each group of
    commits waits that long before its sync (binlog.cc, ordered_commit), so under a steady
    load the syncs come at that period; not when binlog_group_commit_sync_no_delay_count
    commits may end the wait first, nor with sync_binlog > 1 (only the syncing group waits)."""
    delay_us = facts.number("binlog_group_commit_sync_delay")
    if metric != "sync" or not delay_us or facts.number("sync_binlog") != 1:
        return None
    if facts.number("binlog_group_commit_sync_no_delay_count") or not _near(t.period_s, delay_us / 1e6):
        return None
    return f"binlog group commit: each group waits binlog_group_commit_sync_delay={delay_us:g} µs before its sync"


def server_cause(t: Train, facts: ServerFacts) -> str | None:
    """What the server's settings and events say made this train; None: they say nothing."""
    metric = _metric(t)
    if metric is None:
        return None
    cause = _event_cause(t, facts)
    if cause:
        return cause
    if t.kind == "redo":
        return _redo_cause(t, metric, facts)
    if t.kind == "binlog":
        return _binlog_cause(t, metric, facts)
    if t.kind in PAGE_KINDS:
        return _page_cause(t, facts)
    if t.kind == "aria":
        interval = facts.number("aria_checkpoint_interval")
        if interval and _near(t.period_s, interval):
            return f"Aria checkpoint, aria_checkpoint_interval={interval:g} s"
    if t.kind == "myisam":
        flush_time = facts.number("flush_time")
        if flush_time and _near(t.period_s, flush_time):
            return f"flush_time={flush_time:g} s: MyISAM tables are closed and flushed every {flush_time:g} s"
    return None


def generic_ok(kind: str, metric: str, facts: ServerFacts | None) -> bool:
    """May a generic timer (explain._TIMERS) of this kind and metric still be said? Not
    when the server's own setting covers it: its redo sync rule, its Aria checkpoint
    interval (0: none), its page cleaner at 1 s."""
    if facts is None:
        return True
    if kind == "redo" and metric == "sync" and facts.text("innodb_flush_log_at_trx_commit") is not None:
        return False
    return not (kind == "aria" and facts.text("aria_checkpoint_interval") is not None)
