"""A primary and a replica: two `MariaDB` sandboxes replicating over 127.0.0.1.

`replica_pair()` starts both (the primary with its binary log and a TCP port on
127.0.0.1, the replica with another server_id), creates the replication user on
the primary, points the replica at it (CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos,
or a binlog file and offset with MASTER_USE_GTID=no) and waits until both replica
threads run. `wait_caught_up()` waits until the replica has applied everything the
primary has binlogged (its gtid_slave_pos, which the SQL thread keeps in either mode,
equals the primary's gtid_binlog_pos, and Exec_Master_Log_Pos equals Read_Master_Log_Pos).

The replica keeps MariaDB's default file names: relay logs
`<datadir>/mysqld-relay-bin.NNNNNN` (named after its pid file, mysqld.pid), their
index `mysqld-relay-bin.index`, `master.info` and `relay-log.info` in the datadir.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace

from .mariadb import MariaDB, MariaDBOptions, free_port

REPL_USER = "repl"
REPL_PASSWORD = "repl-sandbox"
POLL_S = 0.1


def replica_status(replica: MariaDB) -> dict[str, str]:
    """SHOW SLAVE STATUS of the default connection as {column: value} ({} when none)."""
    rows = replica.sql_named("SHOW SLAVE STATUS")
    return rows[0] if rows else {}


def _describe(status: dict[str, str]) -> str:
    keys = ("Slave_IO_Running", "Slave_SQL_Running", "Last_IO_Error", "Last_SQL_Error")
    return ", ".join(f"{k}={status.get(k, '?')!r}" for k in keys)


def start_replication(primary: MariaDB, replica: MariaDB, port: int, gtid: bool = True, timeout_s: float = 30) -> None:
    """Create the replication user on `primary` (listening on 127.0.0.1:`port`), point
    `replica` at it from the primary's current position (its GTID position, or with
    gtid=False its binlog file and offset: MASTER_USE_GTID=no), START SLAVE and wait
    until the I/O and SQL threads both run."""
    account = f"'{REPL_USER}'@'127.0.0.1'"
    primary.sql(f"CREATE USER {account} IDENTIFIED BY '{REPL_PASSWORD}'; GRANT REPLICATION SLAVE ON *.* TO {account}")
    if gtid:
        position = primary.sql("SELECT @@gtid_binlog_pos")[0][0]
        start = f"MASTER_USE_GTID=slave_pos; SET GLOBAL gtid_slave_pos = '{position}'"
    else:
        binlog = primary.sql_named("SHOW MASTER STATUS")[0]
        start = f"MASTER_LOG_FILE='{binlog['File']}', MASTER_LOG_POS={binlog['Position']}, MASTER_USE_GTID=no"
    replica.sql(
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='{REPL_USER}', "
        f"MASTER_PASSWORD='{REPL_PASSWORD}', MASTER_CONNECT_RETRY=1, {start}; START SLAVE"
    )
    deadline = time.monotonic() + timeout_s
    while True:
        status = replica_status(replica)
        if status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes":
            return
        if status.get("Last_IO_Error") or status.get("Last_SQL_Error") or time.monotonic() > deadline:
            raise RuntimeError(f"replication did not start: {_describe(status)}")
        time.sleep(POLL_S)


def wait_caught_up(primary: MariaDB, replica: MariaDB, timeout_s: float = 120) -> str:
    """Wait until the replica has applied all the primary has binlogged; return that GTID position."""
    deadline = time.monotonic() + timeout_s
    while True:
        target = primary.sql("SELECT @@gtid_binlog_pos")[0][0]
        applied = replica.sql("SELECT @@gtid_slave_pos")[0][0]
        status = replica_status(replica)
        if (
            applied == target
            and status.get("Read_Master_Log_Pos") == status.get("Exec_Master_Log_Pos")
            and status.get("Relay_Master_Log_File") == status.get("Master_Log_File")
        ):
            return target
        if status.get("Slave_IO_Running") != "Yes" or status.get("Slave_SQL_Running") != "Yes":
            raise RuntimeError(f"replication stopped: {_describe(status)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"replica at {applied!r}, primary at {target!r} after {timeout_s}s")
        time.sleep(POLL_S)


@contextlib.contextmanager
def replica_pair(
    primary: MariaDBOptions, replica: MariaDBOptions, gtid: bool = True
) -> Iterator[tuple[MariaDB, MariaDB]]:
    """Start a primary (binary log on, server_id 1, TCP on a free loopback port) and a
    replica (server_id 2) replicating from it (start_replication); stop both on exit."""
    port = free_port()
    with (
        MariaDB(replace(primary, log_bin=True, server_id=1, port=port)) as source,
        MariaDB(replace(replica, server_id=2)) as target,
    ):
        start_replication(source, target, port, gtid)
        yield source, target
