"""File kinds from real file names of MySQL 5.5 - 8.4 and MariaDB 10.x / 11.x."""

from __future__ import annotations

import pytest

from mysqlio.classify import classify

CASES = [
    ("/var/lib/mysql/ib_logfile0", "redo"),
    ("/var/lib/mysql/ib_logfile1", "redo"),
    ("/var/lib/mysql/ib_logfile101", "redo"),
    ("/var/lib/mysql/#innodb_redo/#ib_redo12", "redo"),
    ("/var/lib/mysql/#innodb_redo/#ib_redo13_tmp", "redo"),
    ("/var/lib/mysql/#ib_16384_0.dblwr", "doublewrite"),
    ("/var/lib/mysql/#ib_16384_1.bdblwr", "doublewrite"),
    ("/var/lib/mysql/xb_doublewrite", "doublewrite"),
    ("/var/lib/mysql/ibdata1", "system"),
    ("/var/lib/mysql/ibdata2", "system"),
    ("/var/lib/mysql/undo_001", "undo"),
    ("/var/lib/mysql/undo001", "undo"),
    ("/var/lib/mysql/undo_002.ibu", "undo"),
    ("/var/lib/mysql/ibtmp1", "temp"),
    ("/var/lib/mysql/#innodb_temp/temp_3.ibt", "temp"),
    ("/var/lib/mysql/sbtest/sbtest1.ibd", "table"),
    ("/var/lib/mysql/shop/orders#p#p2024.ibd", "table"),
    ("/var/lib/mysql/mysql.ibd", "table"),
    ("/var/lib/mysql/shop/#sql-ib1234-5678.ibd", "alter"),
    ("/var/lib/mysql/shop/#sql-alter-1f2-3.ibd", "alter"),
    ("/var/lib/mysql/binlog.000001", "binlog"),
    ("/var/log/mysql/mysql-bin.000042", "binlog"),
    ("/var/lib/mysql/binlog.index", "binlog_index"),
    ("/var/lib/mysql/mysql-bin.index", "binlog_index"),
    ("/var/lib/mysql/db2-relay-bin.000003", "relay_log"),
    ("/var/lib/mysql/db2-relay-bin-chan1.000003", "relay_log"),
    ("/var/lib/mysql/db2-relay-bin.index", "relay_index"),
    ("/var/lib/mysql/master.info", "replication_info"),
    ("/var/lib/mysql/relay-log.info", "replication_info"),
    ("/var/lib/mysql/multi-master.info", "replication_info"),
    ("/var/lib/mysql/aria_log.00000001", "aria"),
    ("/var/lib/mysql/aria_log_control", "aria"),
    ("/var/lib/mysql/mysql/db.MAI", "aria"),
    ("/var/lib/mysql/mysql/db.MAD", "aria"),
    ("/var/lib/mysql/legacy/t.MYD", "myisam"),
    ("/var/lib/mysql/legacy/t.MYI", "myisam"),
    ("/var/lib/mysql/ddl_recovery.log", "ddl_log"),
    ("/var/lib/mysql/host1.err", "server_log"),
    ("/tmp/#9980600", "tmp"),
    ("/tmp/#sql-temptable-1-2-3.MAI", "aria"),
    ("/tmp/MLfd=41", "tmp"),
    ("/var/lib/mysql/ib_buffer_pool", "other"),
    ("/etc/passwd", "other"),
]


@pytest.mark.parametrize(("path", "kind"), CASES)
def test_kind_of_real_file_names(path: str, kind: str) -> None:
    assert classify(path) == kind
