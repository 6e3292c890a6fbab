"""The read-only server connection and the status sampler, against a real MariaDB.

Ground truth: the client option files are read as `my_print_defaults` (the
MariaDB client library's own reader) reads them; connections are checked with
CURRENT_USER(); sampled counters equal what the mariadb client reads when the
server is idle, binlog commits equal the transactions sysbench reports, and
the rates sum back to the counters' growth.

The server runs with performance_schema=OFF: the sampler does not need it, and
it gives `mysqlio verify`'s "performance_schema is OFF" error a real server
(test_verify.py's server has it on; two servers in all).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions, free_port
from mysqlio.devtools.processes import find_binary
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import assert_one_line_error
from mysqlio.errors import UserError
from mysqlio.mysql_conn import (
    ClientDefaults,
    ConnectionOptions,
    Connector,
    Endpoint,
    query,
    read_client_defaults,
    resolve_endpoint,
    server_socket,
    server_tcp_port,
)
from mysqlio.server_status import COUNTERS, GAUGES, BackgroundSampler, PeriodicSampler, ServerStatus, StatusSampler

pytestmark = [pytest.mark.mariadb]

MYSQLIO = [sys.executable, "-m", "mysqlio"]
RO_USER = "mysqlio_ro"
RO_PASSWORD = "pa#ss'w\"rd"  # a comment sign and both quotes: the option-file quoting must hold
CLIENT_GROUPS = ("client", "client-server", "client-mariadb", "mysql", "mariadb-client")
LOAD_S = 4


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[MariaDB, Sysbench]]:
    # innodb_max_dirty_pages_pct=1: the page cleaner writes during the load, not only at shutdown
    options = MariaDBOptions(performance_schema=False, extra={"innodb_max_dirty_pages_pct": "1"})
    with MariaDB(options) as db:
        db.create_user(RO_USER, RO_PASSWORD)
        bench = Sysbench(db, tables=2, table_size=10000, threads=2)
        try:
            bench.prepare()
            yield db, bench
        finally:
            bench.stop()


def _option_value(text: str) -> str:
    """Quote a value for an option file the way the mysql client unquotes it."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_cnf(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def _print_defaults(path: Path) -> dict[str, str]:
    """What the MariaDB client library reads from `path`: the last value of each option."""
    proc = subprocess.run(
        [find_binary("my_print_defaults"), f"--defaults-file={path}", *CLIENT_GROUPS],
        capture_output=True,
        text=True,
        check=True,
    )
    out = {}
    for line in proc.stdout.splitlines():
        name, _, value = line.removeprefix("--").partition("=")
        out[name.replace("-", "_")] = value
    return out


# -- option files ----------------------------------------------------------------


def test_option_files_read_like_the_client(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    included = _write_cnf(
        tmp_path / "conf.d" / "x.cnf", "[mysql]\nsocket = /run/other.sock\nport=3307\n[mysqld]\nuser = server_only\n"
    )
    _write_cnf(tmp_path / "extra.cnf", "[client-mariadb]\nhost = db.example\n")
    main = _write_cnf(
        tmp_path / "my.cnf",
        "# comment\n[client]\nuser = first\npassword = 'old'\n"
        f"[mysqld]\npassword = server_secret\n"
        f"[client-server]\nuser = u1   # trailing comment\npassword = {_option_value(RO_PASSWORD)}\n"
        f"!includedir {tmp_path / 'conf.d'}\n!include {tmp_path / 'extra.cnf'}\n",
    )
    ours = read_client_defaults(str(main))
    truth = _print_defaults(main)
    assert (ours.user, ours.password, ours.socket, ours.port, ours.host) == (
        truth["user"],
        truth["password"],
        truth["socket"],
        int(truth["port"]),
        truth["host"],
    )
    assert ours.password == RO_PASSWORD
    assert ours.password_file == str(main)
    assert ours.files == [str(main), str(included), str(tmp_path / "extra.cnf")]
    assert not ours.password_prompt


def test_bare_password_prompts_and_world_writable_files_are_ignored(tmp_path: Path) -> None:
    bare = _write_cnf(tmp_path / "bare.cnf", "[client]\nuser = x\npassword\n")
    assert read_client_defaults(str(bare)).password_prompt
    writable = _write_cnf(tmp_path / "ww.cnf", "[client]\nuser = evil\n")
    writable.chmod(0o666)
    included = _write_cnf(tmp_path / "inc.cnf", f"[client]\nuser = good\n!include {writable}\n")
    assert read_client_defaults(str(included)).user == "good"  # the world-writable include is skipped
    with pytest.raises(UserError, match="world-writable"):
        read_client_defaults(str(writable))
    with pytest.raises(UserError, match="cannot read --defaults-file"):
        read_client_defaults(str(tmp_path / "missing.cnf"))


# -- endpoints ---------------------------------------------------------------------


def test_listening_sockets_of_a_process(tmp_path: Path) -> None:
    """Found in /proc/PID/net/unix and psutil for this very process: listening ones only."""
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as unix, socket.socket(socket.AF_UNIX) as other:
        other.bind(str(tmp_path / "bound-not-listening.sock"))
        assert server_socket(os.getpid()) is None
        unix.bind(path)
        unix.listen()
        assert server_socket(os.getpid()) == path
    with socket.socket(socket.AF_INET) as tcp:
        tcp.bind(("127.0.0.1", 0))
        assert server_tcp_port(os.getpid()) is None
        tcp.listen()
        assert server_tcp_port(os.getpid()) == ("127.0.0.1", tcp.getsockname()[1])


def test_endpoint_precedence(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    defaults = ClientDefaults(socket="/run/from-option-file.sock", host="db.example", port=3310)
    with socket.socket(socket.AF_UNIX) as unix:
        unix.bind(path)
        unix.listen()
        pid = os.getpid()
        assert resolve_endpoint(ConnectionOptions(), pid, defaults) == Endpoint(socket=path)
        assert resolve_endpoint(ConnectionOptions(socket="/x.sock"), pid, defaults) == Endpoint(socket="/x.sock")
        assert resolve_endpoint(ConnectionOptions(host="h", port=1), pid, defaults) == Endpoint(host="h", port=1)
        assert resolve_endpoint(ConnectionOptions(host="localhost"), pid, defaults) == Endpoint(socket=path)
    assert resolve_endpoint(ConnectionOptions(), None, defaults) == Endpoint(host="db.example", port=3310)
    assert resolve_endpoint(ConnectionOptions(), None, ClientDefaults()) == Endpoint(socket="/run/mysqld/mysqld.sock")


def test_nothing_listening_is_one_line(tmp_path: Path) -> None:
    connector = Connector.resolve(
        ConnectionOptions(host="127.0.0.1", port=1, defaults_file=str(_write_cnf(tmp_path / "e.cnf", ""))), None
    )
    with pytest.raises(UserError) as info:
        connector.open()
    message = str(info.value)
    assert message.startswith("cannot connect to the server on 127.0.0.1:1 as ") and "\n" not in message
    assert "Connection refused" in message and "--host and --port" in message


# -- connections -------------------------------------------------------------------


def test_connect_through_the_socket_of_the_pid(server: tuple[MariaDB, Sysbench]) -> None:
    db, _ = server
    # the machine's /etc/mysql/my.cnf names /run/mysqld/mysqld.sock: the traced server's socket wins
    connector = Connector.resolve(ConnectionOptions(), db.pid)
    assert connector.endpoint.socket == db.socket
    assert connector.user == "root"
    conn = connector.open()
    try:
        row = query(conn, "SELECT CURRENT_USER() AS who, @@SESSION.tx_read_only AS ro")[0]
        assert row == {"who": "root@localhost", "ro": 1}
        with pytest.raises(ValueError, match="only reads"):
            query(conn, "SET GLOBAL innodb_max_dirty_pages_pct = 0")
    finally:
        conn.close()


def test_unix_socket_authentication(server: tuple[MariaDB, Sysbench]) -> None:
    """Debian's root@localhost: IDENTIFIED VIA unix_socket. PyMySQL needs no plugin for it:
    the server checks the peer's uid on the socket and asks the client for nothing."""
    db, _ = server
    db.sql("ALTER USER root@localhost IDENTIFIED VIA unix_socket")
    try:
        assert "unix_socket" in db.sql("SHOW CREATE USER root@localhost")[0][0]
        conn = Connector.resolve(ConnectionOptions(), db.pid).open()
        try:
            assert query(conn, "SELECT CURRENT_USER() AS who")[0]["who"] == "root@localhost"
        finally:
            conn.close()
    finally:
        db.sql("ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('')")


def test_password_from_defaults_file(server: tuple[MariaDB, Sysbench], tmp_path: Path) -> None:
    db, _ = server
    cnf = _write_cnf(tmp_path / "client.cnf", f"[client]\nuser = {RO_USER}\npassword = {_option_value(RO_PASSWORD)}\n")
    assert oct(cnf.stat().st_mode & 0o777) == "0o600"
    # the real client accepts the same file: our reading of the quoting is the client's
    real = subprocess.run(
        [
            find_binary("mariadb"),
            f"--defaults-file={cnf}",
            f"--socket={db.socket}",
            "-N",
            "-e",
            "SELECT CURRENT_USER()",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert real.stdout.strip() == f"{RO_USER}@localhost", real.stderr
    connector = Connector.resolve(ConnectionOptions(defaults_file=str(cnf)), db.pid)
    assert (connector.user, connector.password, connector.password_source) == (
        RO_USER,
        RO_PASSWORD,
        f"option file {cnf}",
    )
    conn = connector.open()
    try:
        assert query(conn, "SELECT CURRENT_USER() AS who")[0]["who"] == f"{RO_USER}@localhost"
        # PROCESS is enough for everything the sampler reads
        status = StatusSampler(connector).sample()
        assert status.error is None and status.gauges["dirty_pages"] is not None
    finally:
        conn.close()


def test_bad_password_is_one_line(server: tuple[MariaDB, Sysbench], tmp_path: Path) -> None:
    db, _ = server
    cnf = _write_cnf(tmp_path / "bad.cnf", f"[client]\nuser = {RO_USER}\npassword = wrong\n")
    proc = subprocess.run(
        [*MYSQLIO, "verify", "-p", str(db.pid), "-d", "1", "--defaults-file", str(cnf)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert_one_line_error(proc, "cannot connect", db.socket, RO_USER, "Access denied", str(cnf), "--ask-password")
    assert "wrong" not in proc.stderr  # the password itself is never printed


def _run_on_terminal(cmd: list[str], answer: str, timeout_s: float = 30) -> tuple[int, str]:
    """Run `cmd` with a new pty as its controlling terminal; type `answer` at the prompt."""
    master, slave = os.openpty()

    def own_terminal() -> None:
        os.setsid()
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal)
    os.close(slave)
    output = b""
    answered = False
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
                if not answered and b"Enter password" in output:
                    os.write(master, answer.encode() + b"\n")
                    answered = True
            elif proc.poll() is not None:
                break
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert answered, output
    return proc.returncode, output.decode(errors="replace")


def test_ask_password_on_the_terminal(server: tuple[MariaDB, Sysbench]) -> None:
    db, _ = server
    cmd = [*MYSQLIO, "verify", "-p", str(db.pid), "-d", "1", "--user", RO_USER, "--ask-password"]
    # right password: connected, then stopped by this server's performance_schema=OFF
    code, output = _run_on_terminal(cmd, RO_PASSWORD)
    assert code == 2, output
    assert "performance_schema is OFF" in output and "Traceback" not in output
    assert RO_PASSWORD not in output  # not echoed
    code, output = _run_on_terminal(cmd, "not-the-password")
    assert code == 2, output
    assert "Access denied" in output and "password from prompt" in output


def test_verify_without_performance_schema(server: tuple[MariaDB, Sysbench]) -> None:
    db, _ = server
    proc = subprocess.run(
        [*MYSQLIO, "verify", "-p", str(db.pid), "-d", "1"], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 2
    assert_one_line_error(proc, "performance_schema is OFF", "performance_schema=ON", "restart")


# -- the sampler -----------------------------------------------------------------


def _status_now(db: MariaDB) -> dict[str, int]:
    names = [s[0] for sources in (*GAUGES.values(), *COUNTERS.values()) for s in sources if len(s) == 1]
    rows = db.sql("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(f"'{n}'" for n in names) + ")")
    return {name: int(value) for name, value in rows}


def _sysbench_transactions(output: str) -> int:
    match = re.search(r"transactions:\s+(\d+)", output)
    assert match, output
    return int(match[1])


def test_status_under_load(server: tuple[MariaDB, Sysbench]) -> None:
    db, bench = server
    sampler = StatusSampler.open(Connector.resolve(ConnectionOptions(), db.pid))
    try:
        db.wait_clean()
        first = sampler.sample()
        truth = _status_now(db)
        assert first.error is None and first.interval_s is None
        assert all(v is None for v in first.rates.values())  # no rates on a first sample
        # idle: the sampler read exactly what the mariadb client reads
        assert first.counters["redo_written_bytes"] == truth["Innodb_os_log_written"]
        assert first.counters["data_written_bytes"] == truth["Innodb_data_written"]
        assert first.counters["binlog_commits"] == truth["Binlog_commits"]
        assert first.gauges["redo_lsn"] == truth["Innodb_lsn_current"]
        assert first.gauges["dirty_pages"] == 0  # wait_clean() flushed everything

        bench.start(LOAD_S)
        samples = []
        for _ in range(LOAD_S):
            time.sleep(1.0)
            samples.append(sampler.sample())
        transactions = _sysbench_transactions(bench.wait(timeout_s=60))
        db.wait_clean()
        last = sampler.sample()
        truth = _status_now(db)
    finally:
        sampler.close()
    samples.append(last)
    busy = samples[1:-2]  # full seconds of load: not the ramp-up, not the tail
    for s in samples:
        assert s.error is None, s.error
        g = s.gauges
        assert g["checkpoint_age_bytes"] == g["redo_lsn"] - g["checkpoint_lsn"]  # one export, consistent
        assert 0 <= g["dirty_pages"] <= g["buffer_pool_pages"]
        assert g["checkpoint_age_bytes"] < g["checkpoint_max_age_bytes"]
    for s in busy:
        assert s.gauges["dirty_pages"] > 0
        assert s.rates["redo_written_bytes"] > 10_000, s.summary()
        assert s.rates["data_written_bytes"] > 100_000, s.summary()
        assert s.rates["binlog_commits"] > 50, s.summary()
        assert s.rates["data_written_bytes"] >= 16384 * s.rates["pages_flushed"] * 0.99  # pages are 16 KiB
        summary = s.summary()
        for part in ("dirty ", "checkpoint age ", "redo ", "data ", "binlog commits "):
            assert part in summary, summary
    # idle again: exact, and the rates add up to the counters' growth
    assert last.counters["redo_written_bytes"] == truth["Innodb_os_log_written"]
    assert last.counters["data_written_bytes"] == truth["Innodb_data_written"]
    assert last.gauges["dirty_pages"] == 0
    for name in ("redo_written_bytes", "data_written_bytes", "binlog_commits", "pages_flushed"):
        summed = sum(s.rates[name] * s.interval_s for s in samples)
        growth = last.counters[name] - first.counters[name]
        assert summed == pytest.approx(growth, rel=1e-9), name
    # every oltp_write_only transaction is one binlog commit, nothing else committed
    assert last.counters["binlog_commits"] - first.counters["binlog_commits"] == transactions


def test_json_fields_are_stable(server: tuple[MariaDB, Sysbench]) -> None:
    db, _ = server
    sampler = StatusSampler.open(Connector.resolve(ConnectionOptions(), db.pid))
    try:
        sampler.sample()
        status = sampler.sample()
    finally:
        sampler.close()
    obj = json.loads(json.dumps(status.to_json()))
    assert list(obj) == ["time", "interval_s", "error", "gauges", "counters", "rates"]
    assert list(obj["gauges"]) == list(GAUGES)
    assert list(obj["counters"]) == list(COUNTERS) == list(obj["rates"])
    # MariaDB 10.11 has no redo fsync counter (MySQL's Innodb_os_log_fsyncs): null, not 0
    assert obj["counters"]["redo_fsyncs"] is None and obj["rates"]["redo_fsyncs"] is None
    assert obj["counters"]["binlog_written_bytes"] is not None  # MariaDB's Binlog_bytes_written
    assert ServerStatus(time=0.0, error="x").to_json()["gauges"] == dict.fromkeys(GAUGES)


def test_sampler_reconnects_after_a_killed_connection(server: tuple[MariaDB, Sysbench]) -> None:
    db, _ = server
    sampler = StatusSampler.open(Connector.resolve(ConnectionOptions(), db.pid))
    try:
        assert sampler.sample().error is None
        conn = sampler._conn
        assert conn is not None
        db.sql(f"KILL CONNECTION {conn.thread_id()}")
        broken = sampler.sample()
        assert broken.error and broken.error.startswith("no answer"), broken.error
        assert broken.summary() == f"server: {broken.error}"
        again = sampler.sample()
        assert again.error is None and again.interval_s is None  # reconnected; rates start over
        assert sampler.sample().rates["redo_written_bytes"] is not None
    finally:
        sampler.close()


def test_background_sampler_does_not_wait_for_a_stopped_server(server: tuple[MariaDB, Sysbench]) -> None:
    db, _ = server
    background = BackgroundSampler(StatusSampler.open(Connector.resolve(ConnectionOptions(), db.pid)), wait_s=0.25)
    try:
        assert background.take().error is None
        os.kill(db.pid, signal.SIGSTOP)
        try:
            for _ in range(3):
                started = time.monotonic()
                status = background.take()
                assert time.monotonic() - started < 1.0
                assert status.error, status
                time.sleep(0.5)
        finally:
            os.kill(db.pid, signal.SIGCONT)
        deadline = time.monotonic() + 15  # the worker's 2 s timeouts run out, then it reconnects
        while True:
            status = background.take()
            if status.error is None:
                break
            assert time.monotonic() < deadline, status.error
            time.sleep(0.5)
    finally:
        background.close()


def test_periodic_sampler_never_blocks(server: tuple[MariaDB, Sysbench]) -> None:
    db, _ = server
    periodic = PeriodicSampler(StatusSampler.open(Connector.resolve(ConnectionOptions(), db.pid)), every_s=0.2)
    try:
        time.sleep(1.1)
        taken = periodic.collect()
        assert 4 <= len(taken) <= 7, len(taken)  # one at once, then one per 0.2 s
        assert all(s.error is None for s in taken)
        assert taken[0].interval_s is None and all(s.interval_s is not None for s in taken[1:])
        assert all(0.1 < s.interval_s < 0.5 for s in taken[1:]), [s.interval_s for s in taken]  # type: ignore[operator]
        assert [s.time for s in taken] == sorted(s.time for s in taken)
        os.kill(db.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            periodic.collect()
            time.sleep(0.5)
            periodic.collect()
            assert time.monotonic() - started < 1.0  # the worker waits for the server, the caller does not
        finally:
            os.kill(db.pid, signal.SIGCONT)
    finally:
        periodic.close()
    assert not periodic._thread.is_alive()


@pytest.mark.usefixtures("bpf_ready")
def test_top_and_record_carry_the_server_counters(server: tuple[MariaDB, Sysbench], tmp_path: Path) -> None:
    """`top --mysql --json` puts each interval's sample beside the files; `record --mysql`
    stores the samples in the trace and `report` shows their peaks."""
    db, bench = server
    trace = str(tmp_path / "status.trace")
    bench.start(8, rate=100)
    try:
        top = subprocess.run(
            [sys.executable, "-m", "mysqlio", "top", "-p", str(db.pid), "--json", "-i", "1", "-n", "4", "--mysql"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        rec = subprocess.run(
            [sys.executable, "-m", "mysqlio", "record", "-p", str(db.pid), "-o", trace, "-d", "3", "-q", "--mysql"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        bench.wait(timeout_s=60)
    assert top.returncode == 0, top.stderr
    intervals = [json.loads(line) for line in top.stdout.splitlines()]
    assert len(intervals) == 4
    servers = [i["server"] for i in intervals]
    assert all(s["error"] is None for s in servers), servers
    assert servers[0]["rates"]["binlog_commits"] is None  # a first sample has no rates
    for s in servers[1:]:
        assert s["rates"]["binlog_commits"] > 20  # sysbench commits 100/s
        assert s["gauges"]["dirty_pages"] is not None
    assert rec.returncode == 0, rec.stderr
    report = subprocess.run(
        [sys.executable, "-m", "mysqlio", "report", trace, "--json"], capture_output=True, text=True, timeout=60
    )
    samples = json.loads(report.stdout)["server_status"]
    assert 2 <= len(samples) <= 5  # one a second over 3 s
    assert all(s["error"] is None for s in samples)
    text = subprocess.run(
        [sys.executable, "-m", "mysqlio", "report", trace], capture_output=True, text=True, timeout=60
    ).stdout
    assert "Server counters (record --mysql): peaks" in text and "binlog commits" in text


class _MariaDBInItsOwnNetwork(MariaDB):
    """A server in a network namespace of its own, its loopback up, as in a pod."""

    def _command(self, argv: list[str]) -> list[str]:
        ip = find_binary("ip")
        script = f'{ip} link set lo up || exit 125; exec "$@"'
        return [find_binary("unshare"), "--net", "/bin/sh", "-c", script, "sh", *super()._command(argv)]


def test_server_in_its_own_network_namespace(tmp_path: Path) -> None:
    """A server listening on 127.0.0.1:PORT of its own network namespace (a pod's): through
    its unix socket while that exists (a path reaches it from any namespace); without one,
    over TCP from inside its namespace, never to 127.0.0.1:PORT here, where a decoy listens
    (it would time out the handshake, or reach another server); with neither, one line."""
    port = free_port()
    with _MariaDBInItsOwnNetwork(MariaDBOptions(port=port, performance_schema=False)) as db:
        assert os.stat(f"/proc/{db.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
        assert Connector.resolve(ConnectionOptions(), db.pid).endpoint == Endpoint(socket=db.socket)
        os.unlink(db.socket)
        with socket.socket(socket.AF_INET) as decoy:
            decoy.bind(("127.0.0.1", port))
            decoy.listen()
            connector = Connector.resolve(ConnectionOptions(), db.pid)
            assert connector.endpoint == Endpoint(host="127.0.0.1", port=port, netns=f"/proc/{db.pid}/ns/net")
            assert f"in the network namespace of pid {db.pid}" in connector.describe()
            conn = connector.open()
            try:
                row = query(conn, "SELECT @@port AS port, @@datadir AS datadir")[0]
            finally:
                conn.close()
        assert row["port"] == port and os.path.realpath(row["datadir"]) == os.path.realpath(db.datadir)
    # the server gone: its namespace with it; a process in another one, listening nowhere
    holder = subprocess.Popen([find_binary("unshare"), "--net", "sleep", "30"])
    try:
        deadline = time.monotonic() + 5
        while os.stat(f"/proc/{holder.pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino:
            assert time.monotonic() < deadline, "unshare --net did not take effect"
            time.sleep(0.01)
        with pytest.raises(UserError, match="another network namespace"):
            Connector.resolve(ConnectionOptions(), holder.pid)
    finally:
        holder.kill()
        holder.wait()
