"""An Oracle MySQL primary and replica (two `RootedMySQL` sandboxes in the same root)
replicating with GTIDs over 127.0.0.1, as devtools/replication.py does for MariaDB.

MySQL's words and settings differ from MariaDB's: gtid_mode=ON with
enforce_gtid_consistency on both servers, CHANGE REPLICATION SOURCE TO ...
SOURCE_AUTO_POSITION=1, START REPLICA, SHOW REPLICA STATUS (Replica_IO_Running,
Replica_SQL_Running). The replication user authenticates with caching_sha2_password over
TCP: GET_SOURCE_PUBLIC_KEY=1 lets the replica fetch the primary's RSA key when the
connection is not encrypted. `wait_caught_up()` waits with WAIT_FOR_EXECUTED_GTID_SET for
the primary's gtid_executed.

The replica keeps MySQL's default file names: relay logs `<host name>-relay-bin.NNNNNN`
and their index in the datadir; the connection metadata is in tables (mysql.ibd), not
files, since 8.0.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace

from .mariadb import MariaDBOptions, free_port
from .rooted_mysql import RootedMySQL

REPL_USER = "repl"
REPL_PASSWORD = "repl-sandbox"
GTID = {"gtid_mode": "ON", "enforce_gtid_consistency": "ON"}
POLL_S = 0.1


def replica_status(replica: RootedMySQL) -> dict[str, str]:
    rows = replica.sql_named("SHOW REPLICA STATUS")
    return rows[0] if rows else {}


def _describe(status: dict[str, str]) -> str:
    keys = ("Replica_IO_Running", "Replica_SQL_Running", "Last_IO_Error", "Last_SQL_Error")
    return ", ".join(f"{k}={status.get(k, '?')!r}" for k in keys)


def start_replication(primary: RootedMySQL, replica: RootedMySQL, port: int, timeout_s: float = 30) -> None:
    account = f"'{REPL_USER}'@'127.0.0.1'"
    primary.sql(f"CREATE USER {account} IDENTIFIED BY '{REPL_PASSWORD}'; GRANT REPLICATION SLAVE ON *.* TO {account}")
    replica.sql(
        f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={port}, SOURCE_USER='{REPL_USER}', "
        f"SOURCE_PASSWORD='{REPL_PASSWORD}', SOURCE_CONNECT_RETRY=1, SOURCE_AUTO_POSITION=1, "
        "GET_SOURCE_PUBLIC_KEY=1; START REPLICA"
    )
    deadline = time.monotonic() + timeout_s
    while True:
        status = replica_status(replica)
        if status.get("Replica_IO_Running") == "Yes" and status.get("Replica_SQL_Running") == "Yes":
            return
        if status.get("Last_IO_Error") or status.get("Last_SQL_Error") or time.monotonic() > deadline:
            raise RuntimeError(f"replication did not start: {_describe(status)}")
        time.sleep(POLL_S)


def wait_caught_up(primary: RootedMySQL, replica: RootedMySQL, timeout_s: float = 120) -> str:
    """Wait until the replica has applied every transaction the primary has; return that GTID set."""
    target = primary.sql("SELECT @@GLOBAL.gtid_executed")[0][0].replace("\n", "")
    timed_out = replica.sql(f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{target}', {timeout_s:g})")[0][0]
    if timed_out != "0":
        raise TimeoutError(f"replica not at {target!r} after {timeout_s:g}s: {_describe(replica_status(replica))}")
    return target


@contextlib.contextmanager
def mysql_replica_pair(
    root: str, primary: MariaDBOptions, replica: MariaDBOptions
) -> Iterator[tuple[RootedMySQL, RootedMySQL]]:
    """A primary (binary log on, server_id 1, TCP on a free loopback port) and a replica
    (server_id 2) of the same root, replicating with GTIDs; both stopped on exit."""
    port = free_port()
    with (
        RootedMySQL(
            root, replace(primary, log_bin=True, server_id=1, port=port, extra={**primary.extra, **GTID})
        ) as source,
        RootedMySQL(root, replace(replica, server_id=2, extra={**replica.extra, **GTID})) as target,
    ):
        start_replication(source, target, port)
        yield source, target
