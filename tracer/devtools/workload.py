"""A periodic bulk writer for the sandbox: every N s, a MariaDB (or MySQL) event rewrites a MyISAM table.

This is the periodic burst of the demo and of the end-to-end burst tests: real
periodic I/O made by the server itself, with a known file, size and period.

Why a MyISAM table: MyISAM keeps no rows in a buffer pool, so `INSERT ... SELECT`
writes its rows itself while the statement runs, through a write cache of
`read_buffer_size` (128 KiB by default): each run is one burst of
ceil(DATA_LENGTH / read_buffer_size) writes into one file,
`<datadir>/<schema>/<table>.MYD`, at the event's time. The pages of an InnoDB
table would be written later by the page cleaner, on its own schedule.

Why the event scheduler: it starts runs on whole seconds of the wall clock, so
the bursts are `period_s` apart within milliseconds (observed: the first write
2-5 ms after the second, the burst over in 20-40 ms).

Each run also does, by the same job and at the same period (observed on MariaDB
10.11, worth knowing when reading `top`): `DELETE FROM` truncates the .MYD (so
every burst has the same size) and writes the table's state into the .MYI
header; the INSERT ends with one fdatasync of the .MYD and one of the .MYI; the
scheduler records the run in mysql.event (LAST_EXECUTED), an Aria transactional
table: a few KiB to `aria_log.NNNNNNNN` and an fdatasync. The binary log gets the
two statements (a few hundred bytes: binlog_format MIXED logs them as statements).

On Oracle MySQL 9.7 (RootedMySQL) the same event differs in three ways, measured by
its performance_schema: the rows come from a recursive CTE (no Sequence engine); its
INSERT ... SELECT does not use MyISAM's write cache, so a run is `rows` writes of one
row each (4000 × 1012 B) into the .MYD; and each run sets binlog_format=STATEMENT for
itself (deprecated, still honoured): the run logs 752 bytes of binary log, where
MySQL's default ROW format logged every row deleted and inserted (8.1 MB a run) and
its DELETE made 7,999 more writes to the .MYD. The scheduler records each run in the
data dictionary (mysql.ibd, InnoDB), not in Aria.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass

from ..units import human_bytes
from .mariadb import MariaDB

_IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass
class PeriodicBulkWriter:
    """An event that, every `period_s` s, empties `schema.table` (MyISAM) and inserts
    `rows` rows of `row_bytes` bytes into it. `create_table()` once, then `start()`
    and `stop()` (the event; the table stays)."""

    db: MariaDB
    period_s: int = 5
    rows: int = 4000
    row_bytes: int = 1000
    schema: str = "mysqlio_periodic"
    table: str = "bulk_load"
    event: str = "bulk_load_every_n_s"

    def __post_init__(self) -> None:
        if not isinstance(self.period_s, int) or self.period_s < 1:
            raise ValueError(
                f"period_s must be a whole number of seconds >= 1 (the event scheduler's), got {self.period_s!r}"
            )
        if self.rows < 1 or not 1 <= self.row_bytes <= 16000:  # utf8mb4: 4 bytes a character, rows < 64 KiB
            raise ValueError(f"rows >= 1 and 1 <= row_bytes <= 16000, got {self.rows}, {self.row_bytes}")
        for name in (self.schema, self.table, self.event):
            if not _IDENTIFIER.match(name):
                raise ValueError(f"not a plain identifier: {name!r}")

    @property
    def data_file(self) -> str:
        """The file each run writes (MyISAM data file)."""
        return os.path.join(self.db.datadir, self.schema, f"{self.table}.MYD")

    def create_table(self) -> None:
        self.db.sql(
            f"CREATE DATABASE IF NOT EXISTS {self.schema}; "
            f"CREATE TABLE IF NOT EXISTS {self.schema}.{self.table} "
            f"(id INT NOT NULL, pad VARCHAR({self.row_bytes}) NOT NULL) ENGINE=MyISAM"
        )

    def start(self, delay_s: int = 1) -> float:
        """Turn the event scheduler on and create the event; its first run is `delay_s`
        whole seconds after the current one (give a tracer that long to attach).
        Returns the unix time of the first run."""
        if delay_s < 1:
            raise ValueError("delay_s must be >= 1")
        body = f"BEGIN {self._prelude()}DELETE FROM {self.schema}.{self.table}; {self._insert()}; END"
        # the mariadb client splits statements at ';': the compound body needs another delimiter
        self.db.sql(
            "SET GLOBAL event_scheduler = ON;\nDELIMITER //\n"
            f"CREATE EVENT {self.schema}.{self.event} ON SCHEDULE EVERY {self.period_s} SECOND "
            f"STARTS CURRENT_TIMESTAMP + INTERVAL {delay_s} SECOND DO {body}//\nDELIMITER ;"
        )
        rows = self.db.sql(
            "SELECT UNIX_TIMESTAMP(STARTS) FROM information_schema.EVENTS "
            f"WHERE EVENT_SCHEMA = '{self.schema}' AND EVENT_NAME = '{self.event}'"
        )
        return float(rows[0][0])

    @property
    def on_mysql(self) -> bool:
        """Oracle MySQL (RootedMySQL runs mysqld), not MariaDB."""
        return self.db.SERVER == "mysqld"

    def _prelude(self) -> str:
        """Session settings of each run: none on MariaDB. On MySQL, statement logging
        (its default ROW format logs every row deleted and inserted, 8.1 MB of binary log
        a run, where MariaDB's MIXED logs the two statements) and a recursion depth for
        the rows' CTE (1000 by default)."""
        if not self.on_mysql:
            return ""
        return f"SET SESSION binlog_format = 'STATEMENT'; SET SESSION cte_max_recursion_depth = {self.rows}; "

    def _insert(self) -> str:
        """The INSERT of `rows` rows: from MariaDB's Sequence engine (seq_1_to_N), or on
        MySQL, which has none, from a recursive CTE."""
        target, pad = f"{self.schema}.{self.table}", f"REPEAT('x', {self.row_bytes})"
        if not self.on_mysql:
            return f"INSERT INTO {target} SELECT seq, {pad} FROM {self.schema}.seq_1_to_{self.rows}"
        return (
            f"INSERT INTO {target} WITH RECURSIVE seq (n) AS "
            f"(SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {self.rows}) SELECT n, {pad} FROM seq"
        )

    def stop(self) -> None:
        """Drop the event (no more runs; one already running finishes)."""
        if self.db.running:
            self.db.sql(f"DROP EVENT IF EXISTS {self.schema}.{self.event}")

    def burst_bytes(self) -> int:
        """Bytes one run writes to the data file: the table's DATA_LENGTH once a run
        has filled it (the DELETE truncates the file first)."""
        deadline = time.monotonic() + self.period_s + 10
        while True:
            length, rows = self.db.sql(
                "SELECT DATA_LENGTH, TABLE_ROWS FROM information_schema.TABLES "
                f"WHERE TABLE_SCHEMA = '{self.schema}' AND TABLE_NAME = '{self.table}'"
            )[0]
            if int(rows) == self.rows:
                return int(length)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.schema}.{self.table} never held {self.rows} rows")
            time.sleep(0.1)

    def burst_writes(self) -> int:
        """Write requests of one run: the write cache is read_buffer_size (MariaDB); one a
        row on MySQL (no write cache)."""
        if self.on_mysql:
            return self.rows
        cache = int(self.db.sql("SELECT @@GLOBAL.read_buffer_size")[0][0])
        return math.ceil(self.burst_bytes() / cache)

    def describe(self) -> str:
        return (
            f"every {self.period_s} s an event rewrites {self.schema}.{self.table} "
            f"(MyISAM, {self.rows} rows of {human_bytes(self.row_bytes)})"
        )
