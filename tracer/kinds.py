"""The kinds of file the classifier names, with what each holds (shown in --help and docs)."""

from __future__ import annotations

KIND_DESCRIPTIONS: dict[str, str] = {
    "redo": "InnoDB redo log (ib_logfileN, #innodb_redo/#ib_redoN)",
    "doublewrite": "InnoDB doublewrite file (MySQL 8.0.20+ .dblwr, Percona xb_doublewrite)",
    "system": "InnoDB system tablespace (ibdataN; holds the doublewrite buffer in MariaDB and MySQL <= 8.0.19)",
    "undo": "InnoDB undo tablespace",
    "temp": "InnoDB temporary tablespace",
    "alter": "intermediate table of an ALTER TABLE (#sql-*.ibd)",
    "table": "a table's own tablespace (.ibd)",
    "binlog": "binary log",
    "binlog_index": "binary log index",
    "binlog_gtid_index": "binary log GTID index (MariaDB 11.4+ .idx)",
    "relay_log": "relay log",
    "relay_index": "relay log index",
    "replication_info": "master.info / relay-log.info",
    "aria": "Aria table or log",
    "myisam": "MyISAM table",
    "ddl_log": "DDL recovery log",
    "tc_log": "transaction coordinator log (tc.log)",
    "error_log": "server error log",
    "slow_log": "slow query log",
    "general_log": "general query log",
    "server_log": "another server log",
    "tmp": "temporary file (sort, temptable, deleted O_TMPFILE)",
    "other": "not recognised",
}
KINDS = tuple(KIND_DESCRIPTIONS)
