"""Reads the server's timer settings and recurring events (server_timers.ServerFacts)
on a `--mysql` connection: the part of server_timers that talks to the server, apart so
that reports and views of stored facts need no MySQL driver."""

from __future__ import annotations

import pymysql

from .mysql_conn import error_text, query
from .server_timers import VARIABLES, ServerEvent, ServerFacts, event_of_row


def read_facts(conn: pymysql.connections.Connection) -> ServerFacts:
    """The settings and recurring events of the server behind `conn` (two queries).
    A connection error raises (the caller reconnects); EVENTS refused or missing
    leaves the events unknown (`events_error`)."""
    names = ", ".join(f"'{n}'" for n in VARIABLES)
    rows = query(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
    variables = {str(r["Variable_name"]).lower(): str(r["Value"]) for r in rows if r["Value"] is not None}
    events: list[ServerEvent] = []
    error = None
    try:
        rows = query(
            conn,
            "SELECT EVENT_SCHEMA, EVENT_NAME, STATUS, EVENT_TYPE, INTERVAL_VALUE, INTERVAL_FIELD, "
            "EVENT_DEFINITION FROM information_schema.EVENTS ORDER BY EVENT_SCHEMA, EVENT_NAME",
        )
    except (pymysql.err.OperationalError, pymysql.err.ProgrammingError, pymysql.err.InternalError) as exc:
        if isinstance(exc, pymysql.err.OperationalError) and exc.args and exc.args[0] >= 2000:
            raise  # the connection itself (CR_* client errors): the caller reconnects
        error = f"information_schema.EVENTS: {error_text(exc)}"
        rows = []
    for row in rows:
        e = event_of_row(row)
        if e is not None:
            events.append(e)
    written = sorted({t for e in events for t in e.writes})
    return ServerFacts(variables, tuple(events), error, _engines(conn, written) if written else {})


def _engines(conn: pymysql.connections.Connection, tables: list[str]) -> dict[str, str]:
    """ENGINE of the tables the events write (that exist): which of them write the redo
    log. information_schema.TABLES, by schema and name (the server opens those alone)."""
    pairs = [t.split(".", 1) for t in tables[:100]]
    where = " OR ".join("(TABLE_SCHEMA = %s AND TABLE_NAME = %s)" for _ in pairs)
    try:
        rows = query(
            conn,
            f"SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE {where}",
            [x for pair in pairs for x in pair],
        )
    except (pymysql.err.OperationalError, pymysql.err.ProgrammingError, pymysql.err.InternalError) as exc:
        if isinstance(exc, pymysql.err.OperationalError) and exc.args and exc.args[0] >= 2000:
            raise
        return {}
    out = {}
    for row in rows:
        keys = {str(k).upper(): v for k, v in row.items()}
        if keys.get("ENGINE"):
            out[f"{keys['TABLE_SCHEMA']}.{keys['TABLE_NAME']}"] = str(keys["ENGINE"])
    return out
