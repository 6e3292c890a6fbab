"""Server layout from option files, the command line and the binary, without credentials."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mysqlio import layout as layout_mod
from mysqlio.classify import Classifier
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.layout import ServerLayout, binary_version, layout_from, read_layout

D = "/var/lib/mysql"
MARIADB = "10.11.19-MariaDB"
MYSQL8 = "8.0.36"


def write(root: Path, path: str, text: str) -> None:
    """Write a file at server path `path` under the fake root."""
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def lay(root: Path, *args: str, cwd: str | None = D, version: str | None = MARIADB, **kw: object) -> ServerLayout:
    return layout_from(["/usr/sbin/mysqld", *args], cwd, version=version, root=str(root), **kw)  # type: ignore[arg-type]


# -- option files ----------------------------------------------------------------


def test_debian_layout_with_includedirs(tmp_path: Path) -> None:
    write(
        tmp_path,
        "/etc/mysql/my.cnf",
        "[client-server]\nsocket = /run/mysqld/mysqld.sock\n"
        "!includedir /etc/mysql/conf.d/\n!includedir /etc/mysql/mariadb.conf.d/\n",
    )
    write(tmp_path, "/etc/mysql/conf.d/mysql.cnf", "[mysql]\n")
    write(tmp_path, "/etc/mysql/conf.d/mysqldump.cnf", "[mysqldump]\nquick\n")
    write(
        tmp_path,
        "/etc/mysql/mariadb.conf.d/50-server.cnf",
        "[server]\n\n[mysqld]\npid-file                = /run/mysqld/mysqld.pid\nbasedir = /usr\n"
        "#datadir = /wrong\n"
        "log_error = /var/log/mysql/error.log\n"
        "log_bin                = /var/log/mysql/mysql-bin.log\n"
        "[embedded]\n[mariadb]\n[mariadb-10.11]\n",
    )
    write(tmp_path, "/etc/mysql/mariadb.conf.d/50-client.cnf", "[client]\nlog_error = /wrong.err\n")
    write(tmp_path, "/etc/mysql/mariadb.conf.d/60-galera.cnf", "[galera]\n#wsrep_on = ON\n")
    write(tmp_path, "/etc/mysql/mariadb.conf.d/99-local.cnf.dpkg-old", "[mysqld]\ndatadir = /wrong\n")
    got = lay(tmp_path)
    assert got.datadir == D
    assert got.log_error == "/var/log/mysql/error.log"
    assert got.log_bin and got.log_bin_basename == "/var/log/mysql/mysql-bin"
    assert got.log_bin_index == "/var/log/mysql/mysql-bin.index"
    assert got.relay_log_basename == f"{D}/mysqld-relay-bin"  # MariaDB: named after the pid file
    assert got.tmpdir == ["/tmp"]
    assert got.version == MARIADB
    assert got.option_files == [
        "/etc/mysql/my.cnf",
        "/etc/mysql/conf.d/mysql.cnf",
        "/etc/mysql/conf.d/mysqldump.cnf",
        "/etc/mysql/mariadb.conf.d/50-client.cnf",
        "/etc/mysql/mariadb.conf.d/50-server.cnf",
        "/etc/mysql/mariadb.conf.d/60-galera.cnf",
    ]


def test_option_files_through_absolute_links_are_read_in_the_root(tmp_path: Path) -> None:
    """A Debian or Ubuntu image's /etc/mysql/my.cnf -> /etc/alternatives/my.cnf ->
    /etc/mysql/mariadb.cnf: opened through the root, the kernel would follow the absolute
    links from *our* root and read the host's files (or none); mysqlio follows them inside
    the server's root, !includedir's directory too (itself a link here)."""
    write(tmp_path, "/etc/mysql/mariadb.cnf", "[mysqld]\ntmpdir = /in-the-root\n!includedir /etc/mysql/conf.d/\n")
    write(tmp_path, "/srv/conf/50-server.cnf", "[mysqld]\nlog_error = /var/log/in-the-root.err\n")
    (tmp_path / "etc/alternatives").mkdir(parents=True)
    (tmp_path / "etc/alternatives/my.cnf").symlink_to("/etc/mysql/mariadb.cnf")
    (tmp_path / "etc/mysql/my.cnf").symlink_to("/etc/alternatives/my.cnf")
    (tmp_path / "etc/mysql/conf.d").symlink_to("/srv/conf")
    got = lay(tmp_path)
    assert got.tmpdir == ["/in-the-root"]
    assert got.log_error == "/var/log/in-the-root.err"
    # the names the server uses, not where the links led
    assert got.option_files == ["/etc/mysql/my.cnf", "/etc/mysql/conf.d/50-server.cnf"]


def test_search_order_later_files_win(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\ntmpdir=/t1\nlog_error=/e1.err\nslow_query_log_file=/s1\n")
    write(tmp_path, "/etc/mysql/my.cnf", "[mysqld]\ntmpdir=/t2\nlog_error=/e2.err\n")
    write(tmp_path, "/home/db/my.cnf", "[mysqld]\ntmpdir=/t3\n")
    write(tmp_path, "/extra.cnf", "[mysqld]\ntmpdir=/t4\n")
    got = lay(tmp_path, "--defaults-extra-file=/extra.cnf", environ={"MYSQL_HOME": "/home/db"})
    assert got.tmpdir == ["/t4"]
    assert got.log_error == "/e2.err"
    assert got.slow_log == "/s1"
    assert got.option_files == ["/etc/my.cnf", "/etc/mysql/my.cnf", "/home/db/my.cnf", "/extra.cnf"]


def test_defaults_file_alone(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\ntmpdir=/wrong\n")
    write(tmp_path, "/srv/my.cnf", "[mysqld]\ntmpdir=/right\n")
    write(tmp_path, "/extra.cnf", "[mysqld]\ntmpdir=/wrong-too\n")
    got = lay(tmp_path, "--defaults-file=/srv/my.cnf", "--defaults-extra-file=/extra.cnf")
    assert got.tmpdir == ["/right"]
    assert got.option_files == ["/srv/my.cnf"]


def test_no_defaults_reads_nothing(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\nlog_error=/wrong.err\n")
    got = lay(tmp_path, "--no-defaults", "--log-error=/right.err")
    assert got.log_error == "/right.err"
    assert got.option_files == []


def test_syntax_names_prefixes_quotes_comments(tmp_path: Path) -> None:
    write(
        tmp_path,
        "/etc/my.cnf",
        "# comment\n; other comment\n"
        "datadir = /before/any/group\n"
        "[MYSQLD]\n"
        "loose-general-log-file = /logs/general.log   # trailing comment\n"
        'slow-query-log_file="/logs/with # hash.log"\n'
        "log_error = '/logs/quoted.err'\n"
        "innodb-data-home-dir = /data\\shome\n"
        "loose_innodb_undo_directory=undo\n"
        "skip-name-resolve\n"
        "  log_tc = /xa/tc.log  \n",
    )
    got = lay(tmp_path)
    assert got.datadir == D
    assert got.general_log == "/logs/general.log"
    assert got.slow_log == "/logs/with # hash.log"
    assert got.log_error == "/logs/quoted.err"
    assert got.data_home_dir == "/data home"
    assert got.undo_dir == f"{D}/undo"
    assert got.tc_log == "/xa/tc.log"


def test_include_relative_path(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\ntmpdir=/a\n!include sub/more.cnf\nlog_error=/after.err\n")
    write(tmp_path, "/etc/sub/more.cnf", "tmpdir=/no-group\n[mysqld]\ntmpdir=/b\n[client]\n")
    got = lay(tmp_path)
    assert got.tmpdir == ["/b"]
    assert got.log_error == "/after.err"  # the including file's group goes on after the include
    assert got.option_files == ["/etc/my.cnf", "/etc/sub/more.cnf"]


def test_include_loop_terminates(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\ntmpdir=/a\n!include /etc/my.cnf\n")
    got = lay(tmp_path)
    assert got.tmpdir == ["/a"]
    assert len(got.option_files) == 11  # the include depth limit of mysys


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (MARIADB, "/mariadb-10.11"),
        ("10.6.18-MariaDB", "/mariadbd-10.6"),
        (None, "/mariadbd-10.6"),  # unknown version: all version groups, last wins
        (MYSQL8, "/mysqld-8.0"),
    ],
)
def test_version_groups(tmp_path: Path, version: str | None, expected: str) -> None:
    write(
        tmp_path,
        "/etc/my.cnf",
        "[client]\ntmpdir=/client\n[mysqld]\ntmpdir=/mysqld\n[mysqld-8.0]\ntmpdir=/mysqld-8.0\n"
        "[mariadb]\ntmpdir=/mariadb\n[mariadb-10.11]\ntmpdir=/mariadb-10.11\n[mariadbd-10.6]\ntmpdir=/mariadbd-10.6\n"
        "[mysqld_safe]\ntmpdir=/safe\n",
    )
    assert lay(tmp_path, version=version).tmpdir == [expected]


def test_mysql_ignores_mariadb_groups(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[server]\nlog_error=/server.err\n[mariadb]\nlog_error=/mariadb.err\n")
    assert lay(tmp_path, version=MYSQL8).log_error == "/server.err"
    assert lay(tmp_path, version=MARIADB).log_error == "/mariadb.err"


def test_group_suffix(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\ntmpdir=/plain\n[mysqld_b]\ntmpdir=/suffixed\n[mysqld_c]\ntmpdir=/c\n")
    assert lay(tmp_path, "--defaults-group-suffix=_b").tmpdir == ["/suffixed"]
    assert lay(tmp_path, environ={"MYSQL_GROUP_SUFFIX": "_c"}).tmpdir == ["/c"]


# -- command line ------------------------------------------------------------------


def test_cmdline_overrides_files(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\nlog_error=/file.err\ntmpdir=/file\nrelay_log=file-relay\n")
    got = lay(
        tmp_path,
        "--log-error=/cmd.err",
        "--tmpdir",
        "/cmd1:/cmd2",
        "--loose-relay_log=cmd-relay",
        "--innodb-tmpdir=/ddl",
        "--",
        "--log-bin=/ignored",
    )
    assert got.log_error == "/cmd.err"
    assert got.tmpdir == ["/cmd1", "/cmd2", "/ddl"]
    assert got.relay_log_basename == f"{D}/cmd-relay"
    assert not got.log_bin


def test_datadir_from_cmdline_without_cwd(tmp_path: Path) -> None:
    assert lay(tmp_path, "--datadir=/srv/db", cwd=None).datadir == "/srv/db"
    assert lay(tmp_path, "--datadir", "/srv/db2", cwd=None).datadir == "/srv/db2"
    assert lay(tmp_path, "-h/srv/db3", cwd=None).datadir == "/srv/db3"
    assert lay(tmp_path, "--basedir=/opt/m", "--datadir=data", cwd=None).datadir == "/opt/m/data"
    assert lay(tmp_path, "--datadir=data", cwd=None).datadir is None
    # a running mysqld has chdir()ed to its datadir: cwd wins
    assert lay(tmp_path, "--datadir=/configured").datadir == D


# -- names derived like the server derives them -----------------------------------


@pytest.mark.parametrize(
    ("args", "version", "basename", "index"),
    [
        (["--log-bin=/binlogs/prod"], MARIADB, "/binlogs/prod", "/binlogs/prod.index"),
        (["--log_bin=mysql-bin.log"], MARIADB, f"{D}/mysql-bin", f"{D}/mysql-bin.index"),
        (["--log-bin=prod.log", "--log-bin-index=bidx"], MARIADB, f"{D}/prod", f"{D}/bidx.index"),
        (["--log-bin=db1-bin", "--log-bin-index=/i/x.idx"], MYSQL8, f"{D}/db1-bin", "/i/x.idx"),
        (["--log-bin", "--pid-file=/run/mysqld/mysqld.pid"], MARIADB, f"{D}/mysqld-bin", f"{D}/mysqld-bin.index"),
        (["--log-bin", "--log-basename=lb"], MARIADB, f"{D}/lb-bin", f"{D}/lb-bin.index"),
        (["--log-bin", "--pid-file=/p/x.pid", "--log-basename=lb"], MARIADB, f"{D}/x-bin", f"{D}/lb-bin.index"),
        (["--log-bin"], MARIADB, None, None),  # <hostname>-bin: left to the basename rules
        (["--log-bin", "--pid-file=/run/x.pid"], MYSQL8, None, None),
        ([], MYSQL8, f"{D}/binlog", f"{D}/binlog.index"),  # on by default since MySQL 8.0
    ],
)
def test_binlog_names(tmp_path: Path, args: list[str], version: str, basename: str | None, index: str | None) -> None:
    got = lay(tmp_path, *args, version=version)
    assert got.log_bin
    assert (got.log_bin_basename, got.log_bin_index) == (basename, index)


@pytest.mark.parametrize(
    ("args", "version"),
    [([], MARIADB), ([], "5.7.44"), ([], None), (["--skip-log-bin"], MYSQL8), (["--disable-log-bin"], MYSQL8)],
)
def test_binlog_off(tmp_path: Path, args: list[str], version: str | None) -> None:
    got = lay(tmp_path, *args, version=version)
    assert (got.log_bin, got.log_bin_basename, got.log_bin_index) == (False, None, None)


def test_binlog_on_from_file_off_on_cmdline(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\nlog_bin = /binlogs/prod\n")
    assert lay(tmp_path).log_bin_basename == "/binlogs/prod"
    assert not lay(tmp_path, "--skip-log-bin").log_bin


def test_mariadb_flavour_from_binary_name(tmp_path: Path) -> None:
    got = layout_from(["/usr/sbin/mariadbd", "--log-bin", "--pid-file=/run/m.pid"], D, root=str(tmp_path))
    assert got.log_bin_basename == f"{D}/m-bin"
    assert got.version is None


def test_relay_log_names(tmp_path: Path) -> None:
    got = lay(tmp_path, "--relay-log=r-relay.log", "--relay-log-index=ridx")
    assert got.relay_log_basename == f"{D}/r-relay"
    assert got.relay_log_index == f"{D}/ridx.index"
    got = lay(tmp_path, "--relay_log=/relay/r-relay")
    assert (got.relay_log_basename, got.relay_log_index) == ("/relay/r-relay", "/relay/r-relay.index")
    assert lay(tmp_path, version=MYSQL8).relay_log_basename is None  # <hostname>-relay-bin


def test_replication_info_file_names(tmp_path: Path) -> None:
    got = lay(tmp_path, "--master-info-file=repl/src.info", "--relay_log_info_file", "/ri/applier.state")
    assert (got.master_info_file, got.relay_log_info_file) == (f"{D}/repl/src.info", "/ri/applier.state")
    classifier = Classifier(got)
    assert classifier.kind(f"{D}/repl/src.info") == "replication_info"
    assert classifier.kind(f"{D}/repl/src-chan1.info") == "replication_info"  # a named connection's
    assert classifier.kind("/ri/applier.state") == "replication_info"
    assert classifier.kind("/ri/applier-chan1.state") == "replication_info"
    assert classifier.kind(f"{D}/repl/other.info") == "other"
    default = lay(tmp_path)  # the defaults are left to the basename rules
    assert (default.master_info_file, default.relay_log_info_file) == (None, None)
    assert (
        Classifier(default).kind(f"{D}/master.info")
        == Classifier(default).kind(f"{D}/relay-log.info")
        == ("replication_info")
    )


def test_log_file_names(tmp_path: Path) -> None:
    got = lay(tmp_path, "--log-error=errfile", "--slow-query-log-file=slow.log", "--general_log_file=/g/all")
    assert got.log_error == f"{D}/errfile.err"  # the server adds .err
    assert got.slow_log == f"{D}/slow.log"
    assert got.general_log == "/g/all"
    assert lay(tmp_path, "--log-error").log_error is None  # <hostname>.err
    assert lay(tmp_path, "--log_slow_query_file=/s.log").slow_log == "/s.log"  # MariaDB 10.11 alias


def test_log_basename_sets_names_where_it_stands(tmp_path: Path) -> None:
    write(tmp_path, "/etc/my.cnf", "[mariadb]\nlog_error=/early.err\nlog-basename=lb\ngeneral_log_file=/late.log\n")
    got = lay(tmp_path)
    assert got.log_error == f"{D}/lb.err"
    assert got.slow_log == f"{D}/lb-slow.log"
    assert got.general_log == "/late.log"
    assert got.relay_log_basename == f"{D}/lb-relay-bin"
    assert got.relay_log_index == f"{D}/lb-relay-bin.index"


def test_innodb_files_and_dirs(tmp_path: Path) -> None:
    write(
        tmp_path,
        "/etc/my.cnf",
        "[mysqld]\ninnodb_data_file_path = ibsys1:12M;ibsys2:1G:autoextend:max:4G\n"
        "innodb_temp_data_file_path=ibtmp9:12M:autoextend\ninnodb_data_home_dir=/ibdata/\n"
        "innodb_log_group_home_dir=./redo\ninnodb_undo_directory=/undo\ninnodb_doublewrite_dir=/dblwr\n"
        "innodb_parallel_doublewrite_path=xb_dw\n",
    )
    got = lay(tmp_path)
    assert got.data_files == ["ibsys1", "ibsys2"]
    assert got.temp_data_files == ["ibtmp9"]
    assert got.data_home_dir == "/ibdata"
    assert got.log_group_home_dir == f"{D}/redo"
    assert (got.undo_dir, got.doublewrite_dir, got.doublewrite_file) == ("/undo", "/dblwr", f"{D}/xb_dw")
    raw = lay(tmp_path, "--innodb-data-file-path=/dev/sdb1:10Gnewraw;/dev/sdc1:10Graw")
    assert raw.data_files == ["/dev/sdb1", "/dev/sdc1"]


def test_tmpdir_default_from_environment(tmp_path: Path) -> None:
    assert lay(tmp_path, environ={"TMPDIR": "/scratch"}).tmpdir == ["/scratch"]


def test_realpath_is_applied(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    got = layout_from(
        ["mysqld", f"--log-bin={tmp_path}/link/b", f"--datadir={tmp_path}/link"], realpath=os.path.realpath
    )
    assert got.datadir == f"{tmp_path}/real"
    assert got.log_bin_basename == f"{tmp_path}/real/b"


@pytest.mark.parametrize(
    "auto",
    [
        {
            "Version": 1,
            "mysql_server": {"mysql_server_static_options": {"innodb_undo_directory": {"Value": "/persisted"}}},
        },
        {"Version": 2, "mysql_static_variables": {"innodb_undo_directory": {"Value": "/persisted", "Metadata": {}}}},
    ],
)
def test_mysql8_persisted_variables(tmp_path: Path, auto: dict[str, object]) -> None:
    write(tmp_path, "/etc/my.cnf", "[mysqld]\ninnodb_undo_directory=/from-file\n")
    write(tmp_path, f"{D}/mysqld-auto.cnf", json.dumps(auto))
    got = lay(tmp_path, "--innodb-undo-directory=/from-cmdline", version=MYSQL8)
    assert got.undo_dir == "/persisted"
    assert got.option_files[-1] == f"{D}/mysqld-auto.cnf"
    assert lay(tmp_path, "--persisted-globals-load=OFF", version=MYSQL8).undo_dir == "/from-file"
    assert lay(tmp_path, "--no-defaults", version=MYSQL8).undo_dir is None


def test_unreadable_sources_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "etc" / "my.cnf").mkdir(parents=True)  # a directory where a file is expected
    write(tmp_path, f"{D}/mysqld-auto.cnf", "{not json")
    got = lay(tmp_path, "--defaults-extra-file=/missing.cnf", version=MYSQL8)
    assert got.option_files == []
    assert got.datadir == D


def test_classifier_from_layout(tmp_path: Path) -> None:
    write(
        tmp_path,
        "/etc/my.cnf",
        "[mysqld]\nlog_bin=/binlogs/prod\nrelay_log=r-relay\nlog_error=/var/log/mysql/error.log\n"
        "innodb_data_file_path=ibdata1:12M;ibsys2:1G:autoextend\n",
    )
    classifier = Classifier(lay(tmp_path))
    assert classifier.kind("/binlogs/prod.000001") == "binlog"
    assert classifier.kind(f"{D}/r-relay.000001") == "relay_log"
    assert classifier.kind("/var/log/mysql/error.log") == "error_log"
    assert classifier.kind(f"{D}/ibsys2") == "system"
    assert classifier.kind("/tmp/ib8Yz2Lq") == "tmp"


# -- a live process and its binary -------------------------------------------------


def test_not_a_server_gives_an_empty_layout() -> None:
    assert read_layout(os.getpid()) == ServerLayout()
    assert read_layout(2**31 - 2) == ServerLayout()


def _fake_binary(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "mysqld"
    path.write_bytes(b"\x7fELF" + b"\0" * 4096 + content + b"\0" * 4096)
    return str(path)


@pytest.mark.parametrize(
    ("content", "version"),
    [
        (b"for example 10.1.1-MariaDB-mariadb1precise-log.\0-0+deb12u1\x0010.11.19-MariaDB\0x86_64\0", MARIADB),
        (b"\x0011.4.2-MariaDB\0", "11.4.2-MariaDB"),
        (b"\x008.0.36\0MySQL Community Server - GPL\0", "8.0.36"),
        (b"\x008.0.36-28\0\x008.0.36\0Percona Server (GPL)\0", "8.0.36-28"),
        (b"\x005.5.62\0", "5.5.62"),
        (b"\x008.0.36\0\x005.7.31\0", None),  # ambiguous: no guess
        (b"zlib 1.2.13\0\x003.23.57\0", None),
        (b"", None),
    ],
)
def test_version_from_binary_strings(tmp_path: Path, content: bytes, version: str | None) -> None:
    assert binary_version(_fake_binary(tmp_path, content)) == version


def test_version_cache_follows_the_file(tmp_path: Path) -> None:
    path = _fake_binary(tmp_path, b"\x008.0.36\0")
    assert binary_version(path) == "8.0.36"
    os.utime(path, ns=(0, 0))
    Path(path).write_bytes(Path(path).read_bytes().replace(b"8.0.36", b"8.0.37"))
    assert binary_version(path) == "8.0.37"
    assert binary_version(str(tmp_path / "missing")) is None


def test_version_of_installed_mariadbd() -> None:
    """The version from the binary's strings. (How long the scan takes is a benchmark
    figure, `make bench`'s startup scenario, not a timed test: it failed a CI run on a
    busy machine.)"""
    exe = "/usr/sbin/mariadbd"
    layout_mod._version_cache.clear()
    version = binary_version(exe)
    assert version is not None and version.endswith("-MariaDB")


@pytest.mark.mariadb
def test_read_layout_of_a_live_mariadb() -> None:
    with MariaDB(MariaDBOptions(performance_schema=False)) as db:
        got = read_layout(db.pid)
        assert got.datadir == db.datadir
        assert got.log_bin and got.log_bin_basename == os.path.join(db.datadir, "mysql-bin")
        assert got.log_bin_index == os.path.join(db.datadir, "mysql-bin.index")
        assert got.log_error == db.error_log
        assert got.tmpdir == [db.tmpdir]
        assert got.option_files == [db.config_file]
        assert got.version is not None and db.version().startswith(got.version)
        classifier = Classifier(got)
        binlogs = sorted(p for p in os.listdir(db.datadir) if p.startswith("mysql-bin."))
        assert binlogs
        for name in binlogs:
            expected = "binlog_index" if name.endswith(".index") else "binlog"
            assert classifier.kind(os.path.join(db.datadir, name)) == expected
        assert classifier.kind(db.error_log) == "error_log"
        assert classifier.table(os.path.join(db.datadir, "mysql", "innodb_table_stats.ibd")) == (
            "mysql.innodb_table_stats"
        )
