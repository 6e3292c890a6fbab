"""The kinds of file the classifier names, with what each holds (in docs/usage.md; `--kind`'s
help lists the names)."""

from __future__ import annotations

KIND_DESCRIPTIONS: dict[str, str] = {
    "redo": "InnoDB redo log (ib_logfileN, #innodb_redo/#ib_redoN and its spares #ib_redoN_tmp)",
    "doublewrite": "InnoDB doublewrite file (MySQL 8.0.20+ #ib_<page size>_<n>.dblwr / .bdblwr, Percona xb_doublewrite)",
    "system": "InnoDB system tablespace (ibdataN; holds the doublewrite buffer in MariaDB and MySQL <= 8.0.19)",
    "dictionary": "MySQL 8.0+ data dictionary tablespace (mysql.ibd in the datadir; also the mysql.* system tables)",
    "undo": "InnoDB undo tablespace",
    "temp": "InnoDB temporary tablespace (ibtmp1, MySQL 8.0+ #innodb_temp/temp_N.ibt)",
    "alter": "intermediate table of an ALTER TABLE (#sql-*.ibd)",
    "table": "a table's own tablespace (.ibd)",
    "table_definition": "table definition (.frm, .par, .TRG / .TRN, .isl; MySQL 8.0+ .sdi, .cfg), a schema's db.opt",
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
    "slow_log": "slow query log (also the log table mysql/slow_log.CSV)",
    "general_log": "general query log (also the log table mysql/general_log.CSV)",
    "server_log": "another server log (also innodb_status.<pid>)",
    "config": "option files (*.cnf: auto.cnf's server UUID, mysqld-auto.cnf's SET PERSIST), "
    "generated TLS / RSA keys (*.pem), upgrade markers (mysql_upgrade_info, mysql_upgrade_history)",
    "buffer_pool_dump": "InnoDB buffer pool dump (ib_buffer_pool)",
    "pid_file": "pid file (*.pid; MySQL's <socket>.lock)",
    "tmp": "temporary file (sort, temptable, deleted O_TMPFILE)",
    "other": "not recognised",
}
KINDS = tuple(KIND_DESCRIPTIONS)
# the width that shows every kind whole (a cut one reads as another name: "binlog_gtid_")
KIND_WIDTH = max(len(kind) for kind in KINDS)
KIND_HELP = f"only these kinds (comma-separated): {', '.join(KINDS)}"
