"""Two users on one sandbox server (tests/test_server_threads.py, tools/capture_users.py):
alice runs a query that sorts through files in tmpdir, bob runs sysbench."""

from __future__ import annotations

import threading
import time

import pymysql

from .mariadb import MariaDB, MariaDBOptions
from .sysbench import Sysbench

ALICE, BOB, PASSWORD = "alice", "bob", "secret-1"
# a sort of 120k rows of 100 bytes with a 32 KiB sort buffer: merge files in tmpdir (kind tmp)
SPILL_SQL = "SELECT SQL_BIG_RESULT pad, COUNT(*) FROM big GROUP BY pad HAVING COUNT(*) > 1"
SORT_BUFFER = 32768
LINGER_S = 0.6  # connected this long after the last query (top and record sample at 4 Hz)
# MariaDB 10.11 has performance_schema's statement consumers off by default; the query of a thread needs them
CONSUMERS = {
    "performance_schema_consumer_events_statements_current": "ON",
    "performance_schema_consumer_events_statements_history": "ON",
}


def options(**extra: str) -> MariaDBOptions:
    return MariaDBOptions(extra={**CONSUMERS, **extra})


def setup(db: MariaDB, rows: int = 120_000) -> Sysbench:
    """alice (SELECT on alice_db, whose table `big` she sorts) and bob (ALL on sbtest);
    bob's sysbench, prepared."""
    db.sql(
        "CREATE DATABASE alice_db; CREATE TABLE alice_db.big (id INT PRIMARY KEY, pad CHAR(100)) ENGINE=InnoDB;"
        " INSERT INTO alice_db.big SELECT seq, CONCAT(MD5(seq), MD5(seq + 1), MD5(seq + 2), 'x')"
        f" FROM alice_db.seq_1_to_{rows};"
        f" CREATE USER {ALICE}@localhost IDENTIFIED BY '{PASSWORD}'; GRANT SELECT ON alice_db.* TO {ALICE}@localhost;"
        f" CREATE USER {BOB}@localhost IDENTIFIED BY '{PASSWORD}'; GRANT ALL ON sbtest.* TO {BOB}@localhost"
    )
    bench = Sysbench(db, tables=2, table_size=10000, threads=2, user=BOB, password=PASSWORD)
    bench.prepare()
    return bench


class Spiller:
    """alice's connection running SPILL_SQL again and again in a thread until stop()."""

    def __init__(self, db: MariaDB) -> None:
        self._db = db
        self._stop = threading.Event()
        self.queries = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="alice", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = pymysql.connect(unix_socket=self._db.socket, user=ALICE, password=PASSWORD, database="alice_db")
            try:
                with conn.cursor() as cur:
                    cur.execute(f"SET SESSION sort_buffer_size = {SORT_BUFFER}")
                    while not self._stop.is_set():
                        cur.execute(SPILL_SQL)
                        cur.fetchall()
                        self.queries += 1
                # performance_schema forgets a thread's statements when it disconnects: stay a
                # sampling period longer, so that the last query is seen (docs/usage.md says so)
                time.sleep(LINGER_S)
            finally:
                conn.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self, timeout_s: float = 60) -> int:
        self._stop.set()
        self._thread.join(timeout_s)
        if self.error is not None:
            raise RuntimeError(f"alice's query failed: {self.error}")
        return self.queries
