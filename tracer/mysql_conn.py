"""A read-only connection to the traced server: options → endpoint, user, password → PyMySQL.

Where each piece comes from, first found wins:

- endpoint: --socket, or --host/--port; else the unix socket the traced process
  listens on (/proc/PID/net/unix, exact), else its TCP listening port, in its own
  network namespace (/proc/PID/net/tcp; connected from inside that namespace when it
  is not ours: a pod's 127.0.0.1 is not ours); else, only for a server in our network
  namespace, the client option files' socket / host / port; else /run/mysqld/mysqld.sock.
  The traced server's own socket beats the option files on purpose: their
  `[client] socket` may name another server on the same machine.
- user: --user, else the option files, else the login name (root when euid 0,
  as libmysqlclient does; that is also what unix_socket authentication checks).
- password: --ask-password (prompt on the terminal), else the option files
  (a bare `password` line there prompts too), else none. Never the command line.

Client option files are read like the mysql client reads them: --defaults-file
alone when given, else /etc/my.cnf, /etc/mysql/my.cnf, $MARIADB_HOME or
$MYSQL_HOME/my.cnf and ~/.my.cnf, later values winning; groups [client],
[client-server], [client-mariadb], [mysql], [mariadb-client]; !include and
!includedir followed; world-writable files ignored (as the client does).
PyMySQL's own `read_default_file` is not used: it reads one file and one group
through configparser, which rejects repeated sections and ignores !include.

The connection only ever runs SELECT / SHOW (`query` refuses anything else) in
a READ ONLY session, with 2 s connect / read / write timeouts so a hung server
cannot stall the caller for long.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import pwd
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pymysql.cursors

from .errors import UserError
from .net_namespace import connect_in, listening_tcp, other_netns, socket_inodes
from .option_files import OptionFiles, norm_option
from .root_paths import in_root

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_PORT = 3306
DEFAULT_SOCKET = "/run/mysqld/mysqld.sock"
CLIENT_GROUPS = frozenset({"client", "client-server", "client-mariadb", "mysql", "mariadb-client"})
_SO_ACCEPTCON = 0x10000  # /proc/net/unix Flags: a listening socket
_ACCESS_DENIED = {1044, 1045, 1698}  # ER_DBACCESS_DENIED, ER_ACCESS_DENIED, ER_ACCESS_DENIED_NO_PASSWORD
_READ_ONLY_VERBS = ("SELECT", "SHOW")


@dataclass
class ConnectionOptions:
    """What the user asked for on the command line (None: not given)."""

    socket: str | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    defaults_file: str | None = None
    ask_password: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ConnectionOptions:
        return cls(
            socket=getattr(args, "mysql_socket", None),
            host=getattr(args, "mysql_host", None),
            port=getattr(args, "mysql_port", None),
            user=getattr(args, "mysql_user", None),
            defaults_file=getattr(args, "mysql_defaults_file", None),
            ask_password=bool(getattr(args, "mysql_ask_password", False)),
        )


@dataclass
class ClientDefaults:
    """The connection options the client option files hold (None: not set)."""

    user: str | None = None
    password: str | None = None
    password_prompt: bool = False  # a bare `password` line: ask on the terminal
    socket: str | None = None
    host: str | None = None
    port: int | None = None
    files: list[str] = field(default_factory=list)  # files actually read, in order
    password_file: str | None = None  # the file the password came from


class _TaggedOptions(list):  # type: ignore[type-arg]
    """A list of (name, value) that remembers, per item, the file being read when it was added."""

    def __init__(self, current_file: Callable[[], str]) -> None:
        super().__init__()
        self.origins: list[str] = []
        self._current_file = current_file

    def append(self, item: tuple[str, str | None]) -> None:
        super().append(item)
        self.origins.append(self._current_file())


class _ClientOptionFiles(OptionFiles):
    """The server layout's option-file reader, minus world-writable files, which
    the mysql client ignores (anyone could have put a password or socket there),
    plus the file each option came from (`options.origins`)."""

    def __init__(self) -> None:
        super().__init__("", lambda group: group.strip().lower() in CLIENT_GROUPS)
        self._reading: list[str] = []
        self.options = _TaggedOptions(lambda: self._reading[-1])

    def read(self, path: str, depth: int = 0) -> None:
        try:
            mode = os.stat(self.real(path)).st_mode
        except OSError:
            return
        if mode & stat.S_IWOTH:
            return
        self._reading.append(path)  # an !include comes back through here
        try:
            super().read(path, depth)
        finally:
            self._reading.pop()


def default_option_files(environ: dict[str, str] | None = None, home: str | None = None) -> list[str]:
    """The files the mysql / mariadb client reads when no --defaults-file is given, in order."""
    env = os.environ if environ is None else environ
    files = ["/etc/my.cnf", "/etc/mysql/my.cnf"]
    server_home = env.get("MARIADB_HOME") or env.get("MYSQL_HOME")
    if server_home:
        files.append(os.path.join(server_home, "my.cnf"))
    files.append(os.path.join(home if home is not None else os.path.expanduser("~"), ".my.cnf"))
    return list(dict.fromkeys(files))


def read_client_defaults(defaults_file: str | None = None, files: Sequence[str] | None = None) -> ClientDefaults:
    """Connection options from the client option files (`defaults_file` alone when given)."""
    reader = _ClientOptionFiles()
    if defaults_file is not None:
        try:
            with open(defaults_file, "rb"):
                pass
        except OSError as exc:
            raise UserError(f"cannot read --defaults-file {defaults_file}: {exc.strerror}") from None
        if os.stat(defaults_file).st_mode & stat.S_IWOTH:
            raise UserError(f"--defaults-file {defaults_file} is world-writable; the mysql client ignores such files")
        reader.read(defaults_file)
    else:
        for path in files if files is not None else default_option_files():
            reader.read(path)
    found = ClientDefaults(files=reader.files)
    # the reader appends in file order, so later values simply overwrite earlier ones
    for (raw, value), origin in zip(reader.options, reader.options.origins, strict=True):
        name, off = norm_option(raw)
        if name == "password":
            found.password = None if off else value
            found.password_prompt = value is None and not off
            found.password_file = origin
        elif name == "user" and value is not None:
            found.user = value
        elif name == "socket" and value:
            found.socket = value
        elif name == "host" and value:
            found.host = value
        elif name == "port" and value:
            try:
                found.port = int(value)
            except ValueError:
                raise UserError(f"port = {value!r} in {origin} is not a number") from None
    return found


def server_socket(pid: int) -> str | None:
    """The unix socket the process `pid` listens on: its socket fds that are
    listening (__SO_ACCEPTCON) in /proc/PID/net/unix, whose path is a socket now. Read
    through /proc/PID/root, so a server in a container is reached by the path valid here
    (a unix socket's path reaches it from any network namespace)."""
    inodes = socket_inodes(pid)
    try:
        with open(f"/proc/{pid}/net/unix") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        parts = line.split(maxsplit=7)
        if len(parts) < 8 or parts[6] not in inodes or not int(parts[3], 16) & _SO_ACCEPTCON:
            continue
        path = parts[7]
        if path.startswith("@"):  # abstract namespace: not a file
            continue
        root = f"/proc/{pid}/root"
        try:
            same_root = os.stat(root) == os.stat("/")
        except OSError:
            same_root = True
        here = path if same_root else in_root(root, path)  # /var/run -> /run in many images
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.stat(here).st_mode):  # not removed since, nor replaced
                return here
    return None


def server_tcp_port(pid: int) -> tuple[str, int] | None:
    """A TCP address the process listens on, loopback preferred, or None; in its own
    network namespace (mysqlio.net_namespace)."""
    listening = listening_tcp(pid)
    if not listening:
        return None
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1"}
    loopback = [a for a in listening if a[0] in wildcard or a[0].startswith("127.") or a[0] == "::1"]
    ip, port = (loopback or listening)[0]
    return wildcard.get(ip, ip), port


def login_name() -> str:
    """The user name the mysql client defaults to: root when euid is 0, else the euid's name."""
    uid = os.geteuid()
    if uid == 0:
        return "root"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return os.environ.get("USER") or os.environ.get("LOGNAME") or ""


@dataclass(frozen=True)
class Endpoint:
    socket: str | None = None
    host: str | None = None
    port: int = DEFAULT_PORT
    netns: str | None = None  # /proc/PID/ns/net: host:port is in the server's network namespace

    def describe(self) -> str:
        if self.socket:
            return self.socket
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        where = f" in the network namespace of pid {self.netns.split('/')[2]}" if self.netns else ""
        return f"{host}:{self.port}{where}"


def resolve_endpoint(options: ConnectionOptions, pid: int | None, defaults: ClientDefaults) -> Endpoint:
    """Where to connect (see the module docstring for the order)."""
    if options.socket:
        return Endpoint(socket=options.socket)
    if options.host:
        if options.host == "localhost" and options.port is None:
            # the mysql client's convention: localhost means the socket
            return Endpoint(socket=(pid and server_socket(pid)) or defaults.socket or DEFAULT_SOCKET)
        return Endpoint(host=options.host, port=options.port or defaults.port or DEFAULT_PORT)
    if pid is not None:
        sock = server_socket(pid)
        if sock:
            return Endpoint(socket=sock)
        tcp = server_tcp_port(pid)
        if tcp:
            return Endpoint(host=tcp[0], port=options.port or tcp[1], netns=other_netns(pid))
        if other_netns(pid):
            # the option files' or the default endpoint are in *our* network: another server
            raise UserError(
                f"process {pid} is in another network namespace and listens on no unix socket or TCP port "
                "mysqlio can see: give --socket, or --host and --port"
            )
    if options.port is not None:
        return Endpoint(host=defaults.host or "127.0.0.1", port=options.port)
    if defaults.host and defaults.host != "localhost":
        return Endpoint(host=defaults.host, port=defaults.port or DEFAULT_PORT)
    return Endpoint(socket=defaults.socket or DEFAULT_SOCKET)


def _ask(prompt: str) -> str:
    try:
        return getpass.getpass(prompt)
    except (EOFError, OSError) as exc:
        raise UserError(f"cannot ask for the password (no terminal?): {exc or 'end of input'}") from None


@dataclass
class Connector:
    """Resolved endpoint and credentials; `open()` connects (again) without asking twice."""

    endpoint: Endpoint
    user: str
    password: str | None
    password_source: str  # "prompt", "option file PATH" or "none"
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def resolve(
        cls,
        options: ConnectionOptions,
        pid: int | None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ask: Callable[[str], str] = _ask,
    ) -> Connector:
        defaults = read_client_defaults(options.defaults_file)
        endpoint = resolve_endpoint(options, pid, defaults)
        user = options.user or defaults.user or login_name()
        if options.ask_password or defaults.password_prompt:
            password: str | None = ask(f"Enter password for {user} on {endpoint.describe()}: ")
            source = "prompt"
        elif defaults.password is not None:
            password, source = defaults.password, f"option file {defaults.password_file}"
        else:
            password, source = None, "none"
        return cls(endpoint, user, password, source, timeout_s)

    def describe(self) -> str:
        return f"the server on {self.endpoint.describe()} as {self.user}"

    def open(self) -> pymysql.connections.Connection:
        """A new connection in a READ ONLY session; UserError with one line when it fails."""
        kwargs: dict[str, Any] = {
            "user": self.user,
            "password": self.password or "",
            "connect_timeout": self.timeout_s,
            "read_timeout": self.timeout_s,
            "write_timeout": self.timeout_s,
            "autocommit": True,
            "charset": "utf8mb4",
            "program_name": "mysqlio",
        }
        if self.endpoint.socket:
            kwargs["unix_socket"] = self.endpoint.socket
        else:
            kwargs["host"] = self.endpoint.host
            kwargs["port"] = self.endpoint.port
        try:
            if self.endpoint.netns and self.endpoint.host:
                # a socket made inside the server's network namespace, then PyMySQL's handshake
                conn = pymysql.connect(defer_connect=True, **kwargs)
                conn.connect(connect_in(self.endpoint.netns, self.endpoint.host, self.endpoint.port, self.timeout_s))
            else:
                conn = pymysql.connect(**kwargs)
        except pymysql.MySQLError as exc:
            raise UserError(self.failure(exc)) from None
        except OSError as exc:  # e.g. a socket path that is not a socket
            raise UserError(f"cannot connect to {self.describe()}: {exc}") from None
        try:
            with conn.cursor() as cur:
                # defence in depth: this session cannot change data even if asked to
                cur.execute("SET SESSION TRANSACTION READ ONLY")
        except pymysql.MySQLError:
            pass  # servers before 5.6.5 lack it; we only send SELECT / SHOW anyway
        return conn

    def failure(self, exc: BaseException) -> str:
        """One line: where, as whom, what the server or the socket said, and what to do."""
        code, message = _error_parts(exc)
        line = f"cannot connect to {self.describe()}: {message}"
        if code in _ACCESS_DENIED:
            used = "" if self.password_source == "none" else f" (password from {self.password_source})"
            return f"{line}{used}; give --user and --ask-password, or user/password in a [client] section of --defaults-file"
        return f"{line}; is the server running? give --socket, or --host and --port"


def _error_parts(exc: BaseException) -> tuple[int, str]:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        return args[0], " ".join(str(args[1]).split())
    return 0, " ".join(str(exc).split()) or type(exc).__name__


def error_text(exc: BaseException) -> str:
    """A PyMySQL / socket error as one line without the (code, '...') tuple look."""
    return _error_parts(exc)[1]


def connect(
    options: ConnectionOptions, pid: int | None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> pymysql.connections.Connection:
    """Resolve the options for the traced process `pid` and connect (read-only session)."""
    return Connector.resolve(options, pid, timeout_s).open()


def query(conn: pymysql.connections.Connection, statement: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Run a SELECT or SHOW and return its rows as dicts; anything else is refused."""
    verb = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
    if verb not in _READ_ONLY_VERBS:
        raise ValueError(f"mysqlio only reads from the server; refused: {statement[:40]!r}")
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(statement, tuple(args) or None)
        return list(cur.fetchall())
