"""What `Performance_schema_file_instances_lost` says about files without a row.

performance_schema counts a file instance lost when it cannot make one: its table of
file instances is full (performance_schema_max_file_instances), or it cannot track the
file at all. MariaDB 10.11 counts one for every CREATE INDEX, in-place ALTER TABLE or
OPTIMIZE TABLE (each, its temporary merge file) while the instances in use stay far
below the limit and no table's file lacks its row: on a server made by sysbench with
20,000 tables the counter reads 20,000 (tools/bench_tables.py). So the counter alone
does not mean the setting is too small: verify blames the setting only when the
instances in use reach it, and tells a loss during the window from one before it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pymysql

from ..mysql_conn import query
from .pfs import LOST_STATUS

LIMIT_VARIABLE = "performance_schema_max_file_instances"


@dataclass(frozen=True)
class LostInstances:
    """The lost counter at both edges of the window, and at the end the file instances
    in use and their limit (-1: sized automatically, no fixed limit; None: unknown)."""

    before: int
    after: int
    in_use: int | None = None
    limit: int | None = None

    @property
    def during(self) -> int:
        return max(0, self.after - self.before)

    def at_limit(self) -> bool:
        return self.limit is not None and self.limit >= 0 and self.in_use is not None and self.in_use >= self.limit


def read_instances(conn: pymysql.connections.Connection) -> tuple[int | None, int | None]:
    """(file instances in use, performance_schema_max_file_instances); None when unreadable."""
    try:
        in_use = query(conn, "SELECT COUNT(*) AS n FROM performance_schema.file_instances")[0]["n"]
        limit = query(conn, f"SELECT @@{LIMIT_VARIABLE} AS n")[0]["n"]
        return int(in_use), int(limit)
    except (pymysql.MySQLError, IndexError, KeyError, TypeError, ValueError):
        return None, None


def lost_warning(lost: LostInstances, rowless: Sequence[str]) -> str | None:
    """The warning for files mysqlio saw that have no performance_schema row, given the
    lost counter; None when there is nothing to explain (no such file, nothing lost)."""
    if not rowless or not lost.after:
        return None
    names = ", ".join(rowless[:5]) + (", ..." if len(rowless) > 5 else "")
    counted = f"{LOST_STATUS} = {lost.after:,}" + (
        f" ({lost.during:,} during the window)" if lost.during else " (none during the window)"
    )
    if lost.at_limit():
        return (
            f"{counted}, and performance_schema holds {lost.in_use:,} file instances, its limit "
            f"({LIMIT_VARIABLE} = {lost.limit:,}): {names} may have no row for that reason; raise {LIMIT_VARIABLE}"
        )
    if lost.in_use is None or lost.limit is None:  # the instances could not be read: what the counter says
        when = "during the window" if lost.during else "all before the window"
        return (
            f"{counted}: performance_schema could not track some files ({when}), so {names} may have "
            f"no row for that reason ({LIMIT_VARIABLE}, or a file it cannot track)"
        )
    room = (
        f"{lost.in_use:,} of {lost.limit:,} file instances in use"
        if lost.limit >= 0
        else f"{lost.in_use:,} file instances in use, sized automatically ({LIMIT_VARIABLE} = -1)"
    )
    if lost.during:
        return (
            f"{counted}, with {room}: not for want of room; performance_schema could not track a file "
            f"(MariaDB counts one for the temporary file of each CREATE INDEX or in-place ALTER TABLE), "
            f"so {names} may be such a file"
        )
    return (
        f"{counted}, with {room}: not for want of room, and not why {names} {'has' if len(rowless) == 1 else 'have'} "
        f"no row (MariaDB counts one for each CREATE INDEX or in-place ALTER TABLE though no file lacks its row); "
        f"a file performance_schema does not instrument, or one deleted, has none"
    )
