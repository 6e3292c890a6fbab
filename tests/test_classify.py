"""File kinds from real file names of MySQL 5.5 - 9.7 and MariaDB 10.x / 11.x."""

from __future__ import annotations

import re

import pytest

from mysqlio.classify import KINDS, Classifier, classify, decode_filename
from mysqlio.kinds import KIND_DESCRIPTIONS
from mysqlio.layout import ServerLayout

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
    ("/var/lib/mysql/shop/mysql.ibd", "table"),  # a table `mysql`; the dictionary: DATADIR_CASES
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
    ("/var/lib/mysql/host1.err", "error_log"),
    ("/tmp/#9980600", "tmp"),
    ("/tmp/#sql-temptable-1-2-3.MAI", "aria"),
    ("/tmp/MLfd=41", "tmp"),
    ("/var/lib/mysql/ib_buffer_pool", "buffer_pool_dump"),
    ("/var/lib/mysql/shop/t.frm", "table_definition"),
    ("/var/lib/mysql/auto.cnf", "config"),
    ("/etc/passwd", "other"),
]


@pytest.mark.parametrize(("path", "kind"), CASES)
def test_kind_of_real_file_names(path: str, kind: str) -> None:
    assert classify(path) == kind


D = "/var/lib/mysql"

# Real file names per server version: (version, path, kind)
VERSION_CASES = [
    # MySQL 5.5: two redo files, everything InnoDB in ibdata1 unless file-per-table
    ("mysql-5.5", f"{D}/ib_logfile0", "redo"),
    ("mysql-5.5", f"{D}/ib_logfile1", "redo"),
    ("mysql-5.5", f"{D}/ibdata1", "system"),
    ("mysql-5.5", f"{D}/mysql/user.MYD", "myisam"),
    ("mysql-5.5", f"{D}/mysql/user.MYI", "myisam"),
    ("mysql-5.5", f"{D}/mysql/user.frm", "table_definition"),
    ("mysql-5.5", f"{D}/shop/db.opt", "table_definition"),
    ("mysql-5.5", f"{D}/shop/orders.TRG", "table_definition"),
    ("mysql-5.5", f"{D}/shop/orders_bi.TRN", "table_definition"),
    ("mysql-5.5", f"{D}/host1.pid", "pid_file"),
    ("mysql-5.5", f"{D}/db1-bin.000042", "binlog"),
    ("mysql-5.5", "/var/log/mysql/db1-bin.000042", "binlog"),
    ("mysql-5.5", f"{D}/db1-bin.index", "binlog_index"),
    ("mysql-5.5", f"{D}/db2-relay-bin.000002", "relay_log"),
    ("mysql-5.5", f"{D}/master.info", "replication_info"),
    ("mysql-5.5", f"{D}/relay-log.info", "replication_info"),
    ("mysql-5.5", f"{D}/ddl_log.log", "ddl_log"),
    ("mysql-5.5", f"{D}/db1.err", "error_log"),
    ("mysql-5.5", f"{D}/db1-slow.log", "slow_log"),
    ("mysql-5.5", f"{D}/db1.log", "server_log"),  # default general log name: not knowable
    ("mysql-5.5", "/tmp/#sql_4d2_0.MYD", "myisam"),
    ("mysql-5.5", "/tmp/MLUz8Y3k", "tmp"),
    # MySQL 5.6 / 5.7
    ("mysql-5.6", f"{D}/undo001", "undo"),
    ("mysql-5.6", f"{D}/auto.cnf", "config"),
    ("mysql-5.6", f"{D}/shop/orders.par", "table_definition"),
    ("mysql-5.6", f"{D}/shop/remote.isl", "table_definition"),
    ("mysql-5.6", f"{D}/shop/orders#P#p0.ibd", "table"),
    ("mysql-5.6", f"{D}/worker-relay-log.info.1", "replication_info"),
    ("mysql-5.7", f"{D}/ibtmp1", "temp"),
    ("mysql-5.7", f"{D}/ib_buffer_pool", "buffer_pool_dump"),
    ("mysql-5.7", f"{D}/ib_buffer_pool.incomplete", "buffer_pool_dump"),
    ("mysql-5.7", f"{D}/shop/#sql-4d2_3.frm", "tmp"),  # an ALTER's intermediate table
    ("mysql-5.7", "/tmp/#sql_4d2_0.frm", "tmp"),  # a temporary table
    ("mysql-5.7", f"{D}/mysql/general_log.CSV", "general_log"),  # log_output=TABLE
    ("mysql-5.7", f"{D}/mysql/slow_log.CSV", "slow_log"),
    ("mysql-5.7", f"{D}/shop/#sql-ib123-456789.ibd", "alter"),
    ("mysql-5.7", f"{D}/shop/#sql-4d2_3.ibd", "alter"),
    ("mysql-5.7", "/var/log/mysql/mysql-bin.000007", "binlog"),
    ("mysql-5.7", "/var/log/mysql/error.log", "error_log"),
    ("mysql-5.7", "/var/log/mysqld.log", "server_log"),  # RHEL's error log name, a general log elsewhere
    # MySQL 8.0 / 8.4
    ("mysql-8.0", f"{D}/undo_001", "undo"),
    ("mysql-8.0", f"{D}/undo_002", "undo"),
    ("mysql-8.0", f"{D}/undo_003.ibu", "undo"),
    ("mysql-8.0", f"{D}/my_undo.ibu", "undo"),
    ("mysql-8.0", f"{D}/sys/sys_config.ibd", "table"),
    ("mysql-8.0", f"{D}/#ib_16384_0.dblwr", "doublewrite"),
    ("mysql-8.0", f"{D}/#ib_16384_1.dblwr", "doublewrite"),
    ("mysql-8.0", f"{D}/#ib_16384_0.bdblwr", "doublewrite"),
    ("mysql-8.0", f"{D}/#innodb_temp/temp_1.ibt", "temp"),
    ("mysql-8.0", f"{D}/binlog.000001", "binlog"),
    ("mysql-8.0", f"{D}/binlog.index", "binlog_index"),
    ("mysql-8.0", f"{D}/host-relay-bin-chan.000001", "relay_log"),
    ("mysql-8.0", f"{D}/host-relay-bin-chan.index", "relay_index"),
    ("mysql-8.0", f"{D}/shop/orders#p#p0#sp#p0sp0.ibd", "table"),
    ("mysql-8.0", f"{D}/mysqld-auto.cnf", "config"),
    ("mysql-8.0", f"{D}/mysqld-auto.cnf.backup", "config"),
    ("mysql-8.0", f"{D}/mysql/general_log.CSV", "general_log"),
    ("mysql-8.0", f"{D}/shop/general_log.CSV", "other"),  # a CSV table of a schema
    ("mysql-8.0", f"{D}/shop/t.cfg", "table_definition"),  # FLUSH TABLES t FOR EXPORT
    ("mysql-8.0", f"{D}/innodb_status.4242", "server_log"),
    ("mysql-8.0.30", f"{D}/#innodb_redo/#ib_redo10", "redo"),
    ("mysql-8.0.30", f"{D}/#innodb_redo/#ib_redo11_tmp", "redo"),
    ("mysql-8.4", f"{D}/#innodb_redo/#ib_redo1234", "redo"),
    ("mysql-8.4", f"{D}/binlog.000123", "binlog"),
    # MySQL 9.7 (Debian sid's mysql-server): a fresh datadir and performance_schema.file_instances
    ("mysql-9.7", f"{D}/#innodb_redo/#ib_redo6", "redo"),
    ("mysql-9.7", f"{D}/#innodb_redo/#ib_redo37_tmp", "redo"),  # a spare, renamed into use
    ("mysql-9.7", f"{D}/#ib_16384_0.dblwr", "doublewrite"),
    ("mysql-9.7", f"{D}/#ib_16384_1.dblwr", "doublewrite"),
    ("mysql-9.7", f"{D}/#ib_16384_0.bdblwr", "doublewrite"),  # innodb_doublewrite=DETECT_ONLY
    ("mysql-9.7", f"{D}/#ib_8192_3.bdblwr", "doublewrite"),
    ("mysql-9.7", f"{D}/ibdata1", "system"),
    ("mysql-9.7", f"{D}/undo_001", "undo"),
    ("mysql-9.7", f"{D}/undo_002", "undo"),
    ("mysql-9.7", f"{D}/ibtmp1", "temp"),
    ("mysql-9.7", f"{D}/#innodb_temp/temp_10.ibt", "temp"),
    ("mysql-9.7", f"{D}/sys/sys_config.ibd", "table"),
    ("mysql-9.7", f"{D}/mysql-bin.000002", "binlog"),
    ("mysql-9.7", f"{D}/mysql-bin.index", "binlog_index"),
    ("mysql-9.7", f"{D}/mysql-bin.~rec~", "binlog_index"),
    ("mysql-9.7", f"{D}/mysql-bin.index_crash_safe", "binlog_index"),
    ("mysql-9.7", f"{D}/vm-relay-bin.000001", "relay_log"),
    ("mysql-9.7", f"{D}/vm-relay-bin.index", "relay_index"),
    ("mysql-9.7", f"{D}/vm-relay-bin-group_replication_applier.000001", "relay_log"),
    ("mysql-9.7", f"{D}/auto.cnf", "config"),
    ("mysql-9.7", f"{D}/mysqld-auto.cnf", "config"),
    ("mysql-9.7", f"{D}/mysql_upgrade_history", "config"),
    ("mysql-9.7", f"{D}/ca-key.pem", "config"),
    ("mysql-9.7", f"{D}/private_key.pem", "config"),
    ("mysql-9.7", f"{D}/ib_buffer_pool", "buffer_pool_dump"),
    ("mysql-9.7", f"{D}/mysql/general_log_224.sdi", "table_definition"),
    ("mysql-9.7", f"{D}/mysql/general_log.CSM", "general_log"),
    ("mysql-9.7", f"{D}/mysql/slow_log.CSM", "slow_log"),
    ("mysql-9.7", f"{D}/performance_schema/file_instances_98.sdi", "table_definition"),
    ("mysql-9.7", "/var/run/mysqld/mysqld.pid", "pid_file"),
    ("mysql-9.7", "/var/run/mysqld/mysqld.sock.lock", "pid_file"),
    ("mysql-9.7", "/var/log/mysql/error.log", "error_log"),
    # Percona
    ("percona-5.7", f"{D}/xb_doublewrite", "doublewrite"),
    ("percona-8.0", "/var/log/mysql/mysql-slow.log", "slow_log"),
    ("percona-8.0", f"{D}/audit.log", "server_log"),
    # MariaDB 10.x
    ("mariadb-10.4", f"{D}/aria_log.00000001", "aria"),
    ("mariadb-10.4", f"{D}/aria_log_control", "aria"),
    ("mariadb-10.4", f"{D}/mysql/db.MAI", "aria"),
    ("mariadb-10.4", f"{D}/ib_logfile1", "redo"),
    ("mariadb-10.5", f"{D}/ib_logfile0", "redo"),
    ("mariadb-10.5", f"{D}/ib_logfile101", "redo"),
    ("mariadb-10.6", f"{D}/ddl_recovery.log", "ddl_log"),
    ("mariadb-10.6", f"{D}/tc.log", "tc_log"),
    ("mariadb-10.6", f"{D}/undo001", "undo"),
    ("mariadb-10.11", f"{D}/multi-master.info", "replication_info"),
    ("mariadb-10.11", f"{D}/master-chan1.info", "replication_info"),
    ("mariadb-10.11", f"{D}/relay-log-chan1.info", "replication_info"),
    ("mariadb-10.11", f"{D}/mysqld-relay-bin-chan1.000002", "relay_log"),
    ("mariadb-10.11", f"{D}/mysqld-relay-bin-chan1.index", "relay_index"),
    ("mariadb-10.11", "/var/log/mysql/mariadb-bin.000001", "binlog"),
    ("mariadb-10.11", "/var/log/mysql/mariadb-bin.index", "binlog_index"),
    ("mariadb-10.11", "/var/log/mysql/mariadb-slow.log", "slow_log"),
    ("mariadb-10.11", "/var/log/mysql/general.log", "general_log"),
    ("mariadb-10.11", "/tmp/#sql-temptable-1-2-3.MAD", "aria"),
    ("mariadb-10.11", f"{D}/mysql_upgrade_info", "config"),
    ("mariadb-10.11", f"{D}/sbtest/sbtest1.frm", "table_definition"),
    ("mariadb-10.11", f"{D}/sbtest/db.opt", "table_definition"),
    ("mariadb-10.11", f"{D}/shop/orders.par", "table_definition"),
    ("mariadb-10.11", f"{D}/shop/#sql-alter-1f2-3.frm", "tmp"),
    ("mariadb-10.11", f"{D}/shop/#sql-backup-1f2-3.frm", "tmp"),
    ("mariadb-10.11", f"{D}/ib_buffer_pool", "buffer_pool_dump"),
    ("mariadb-10.11", "/run/mysqld/mysqld.pid", "pid_file"),
    # MariaDB 11.x
    ("mariadb-11.4", f"{D}/mysql-bin.000001.idx", "binlog_gtid_index"),
    ("mariadb-11.4", f"{D}/ibtmp1", "temp"),
    ("mariadb-11.4", f"{D}/galera.cache", "other"),
    ("mariadb-11.8", f"{D}/mariadb_upgrade_info", "config"),
    ("mariadb-11.8", f"{D}/mysql/general_log.CSV", "general_log"),
]


@pytest.mark.parametrize(("version", "path", "kind"), VERSION_CASES)
def test_kind_per_version(version: str, path: str, kind: str) -> None:
    assert classify(path) == kind, version
    assert kind in KINDS


@pytest.mark.parametrize(("path", "kind"), CASES + [(p, k) for _, p, k in VERSION_CASES])
def test_empty_layout_is_the_basename_rules(path: str, kind: str) -> None:
    assert Classifier().kind(path) == kind
    assert Classifier(ServerLayout(datadir=D)).kind(path) == kind


CUSTOM = ServerLayout(
    datadir=D,
    log_bin=True,
    log_bin_basename="/binlogs/prod",
    log_bin_index="/binlogs/prod.index",
    relay_log_basename=f"{D}/r-relay",
    relay_log_index=f"{D}/ridx.index",
    log_error="/var/log/mysql/mysqld.log",
    slow_log="/var/log/mysql/queries.log",
    general_log="/var/log/mysql/all.log",
    tc_log=f"{D}/xa.log",
    data_files=["ibsys1", "ibsys2", "/dev/sdb1"],
    data_home_dir="/ibdata",
    temp_data_files=["ibtemp9"],
    doublewrite_file="/ssd/dblwr",
    tmpdir=["/var/tmp/mysql", "/tmp"],
)

CUSTOM_CASES = [
    ("/binlogs/prod.000001", "binlog"),
    ("/binlogs/prod.1000000", "binlog"),
    ("/binlogs/prod.index", "binlog_index"),
    ("/binlogs/prod.000001.idx", "binlog_gtid_index"),
    ("/binlogs/prod.000001.tmp", "other"),
    ("/elsewhere/prod.000001", "other"),
    (f"{D}/r-relay.000003", "relay_log"),
    (f"{D}/r-relay-chan1.000003", "relay_log"),
    (f"{D}/r-relay.index", "relay_index"),
    (f"{D}/ridx.index", "relay_index"),
    (f"{D}/ridx-chan1.index", "relay_index"),
    ("/var/log/mysql/mysqld.log", "error_log"),
    ("/var/log/mysql/queries.log", "slow_log"),
    ("/var/log/mysql/all.log", "general_log"),
    ("/var/log/mysql/other.log", "server_log"),
    (f"{D}/xa.log", "tc_log"),
    ("/ibdata/ibsys1", "system"),
    ("/ibdata/ibsys2", "system"),
    ("/ibdata/ibsys3", "other"),
    ("/dev/sdb1", "system"),
    ("/ibdata/ibtemp9", "temp"),
    (f"{D}/ibtemp9", "temp"),
    ("/ssd/dblwr", "doublewrite"),
    ("/var/tmp/mysql/ibA1b2C3", "tmp"),
    ("/var/tmp/mysql/MYzx81Qa", "tmp"),
    ("/tmp/ibQwErTy", "tmp"),
    ("/var/tmp/mysql/sub/file", "other"),
    ("/var/tmp/mysql/#sql-temptable-1-2-3.MAI", "aria"),
    (f"{D}/ib_buffer_pool", "buffer_pool_dump"),
    (f"{D}/ibdata1", "system"),
    (f"{D}/mysql.ibd", "dictionary"),
    (f"{D}/shop/mysql.ibd", "table"),
    (f"{D}/db1-bin.000001", "binlog"),
    (f"{D}/shop/t.ibd", "table"),
]


@pytest.mark.parametrize(("path", "kind"), CUSTOM_CASES)
def test_kind_from_layout(path: str, kind: str) -> None:
    assert Classifier(CUSTOM).kind(path) == kind


# MySQL 8.0+'s data dictionary is the datadir's own mysql.ibd: known only with the datadir
DICTIONARY_CASES = [
    (ServerLayout(datadir=D), f"{D}/mysql.ibd", "dictionary"),
    (ServerLayout(datadir=D), f"{D}/shop/mysql.ibd", "table"),  # CREATE TABLE shop.mysql
    (ServerLayout(datadir=D), f"{D}/mysql/mysql.ibd", "table"),
    (ServerLayout(datadir=D), "/elsewhere/mysql.ibd", "table"),
    (ServerLayout(datadir="/srv/db/data"), "/srv/db/data/mysql.ibd", "dictionary"),
    (ServerLayout(datadir="/srv/db/data"), f"{D}/mysql.ibd", "table"),
    (ServerLayout(), f"{D}/mysql.ibd", "table"),  # no datadir: a tablespace of tables, not a guess
]


@pytest.mark.parametrize(("layout", "path", "kind"), DICTIONARY_CASES)
def test_dictionary_only_in_the_datadir(layout: ServerLayout, path: str, kind: str) -> None:
    assert Classifier(layout).kind(path) == kind
    assert classify(path) == "table"


def test_every_kind_is_described_and_classified() -> None:
    cases = [*CASES, *((p, k) for _, p, k in VERSION_CASES), *CUSTOM_CASES, *((p, k) for _, p, k in DICTIONARY_CASES)]
    assert set(KINDS) == {kind for _, kind in cases}
    assert all(re.fullmatch(r"[a-z_]+", kind) and KIND_DESCRIPTIONS[kind] for kind in KINDS)


def test_relative_data_files_without_home_dir_are_in_datadir() -> None:
    classifier = Classifier(ServerLayout(datadir=D, data_files=["ibsys1"], temp_data_files=["t/ibtmp7"]))
    assert classifier.kind(f"{D}/ibsys1") == "system"
    assert classifier.kind(f"{D}/t/ibtmp7") == "temp"
    assert classifier.kind("/other/ibsys1") == "other"


def test_tmpdir_equal_to_datadir_adds_no_rule() -> None:
    classifier = Classifier(ServerLayout(datadir=D, tmpdir=[D, "/"]))
    assert classifier.kind(f"{D}/grastate.dat") == "other"
    assert classifier.kind("/unknown") == "other"


TABLE_CASES = [
    (f"{D}/sbtest/sbtest1.ibd", False, "sbtest.sbtest1"),
    (f"{D}/shop/orders#p#p2024.ibd", False, "shop.orders (p2024)"),
    (f"{D}/shop/orders#p#p2024.ibd", True, "shop.orders"),
    (f"{D}/shop/orders#P#p0.ibd", False, "shop.orders (p0)"),
    (f"{D}/shop/orders#P#p0#SP#p0sp0.ibd", False, "shop.orders (p0, p0sp0)"),
    (f"{D}/shop/orders#p#p0#sp#p0sp0.ibd", True, "shop.orders"),
    (f"{D}/my@002ddb/t@0024x.ibd", False, "my-db.t$x"),
    (f"{D}/shop/@4e2d@6587.ibd", False, "shop.中文"),
    (f"{D}/shop/caf@0i.ibd", False, "shop.caf@0i"),  # two-letter codes are kept as written
    (f"{D}/shop/a@002eb#p#p@002d1.ibd", False, "shop.a.b (p-1)"),
    (f"{D}/mysql/db.MAI", False, "mysql.db"),
    (f"{D}/mysql/db.MAD", False, "mysql.db"),
    (f"{D}/legacy/t.MYD", False, "legacy.t"),
    (f"{D}/legacy/t.MYI", False, "legacy.t"),
    (f"{D}/mysql.ibd", False, None),
    (f"{D}/ibdata1", False, None),
    (f"{D}/shop/#sql-ib12-34.ibd", False, None),
    (f"{D}/shop/t.frm", False, None),
    (f"{D}/#innodb_temp/temp_1.ibt", False, None),
    (f"{D}/shop/sub/t.ibd", False, None),
    ("/data/shop/t.ibd", False, None),
]


@pytest.mark.parametrize(("path", "fold", "table"), TABLE_CASES)
def test_table_of_data_files(path: str, fold: bool, table: str | None) -> None:
    assert Classifier(ServerLayout(datadir=D)).table(path, fold_partitions=fold) == table


def test_no_table_without_datadir() -> None:
    assert Classifier().table(f"{D}/sbtest/sbtest1.ibd") is None


def test_decode_filename() -> None:
    assert decode_filename("plain_name") == "plain_name"
    assert decode_filename("a@0020b@002fc") == "a b/c"
    assert decode_filename("con@@@") == "con"
    assert decode_filename("50@0025") == "50%"
    assert decode_filename("x@zz") == "x@zz"
