"""A real PostgreSQL server for the sink's tests: Debian's binaries, a throwaway cluster.

``PostgresServer.start()`` runs ``initdb`` into a fresh temporary directory and starts
``postgres`` on a free loopback port, its unix socket in that directory too. It runs as an
unprivileged user: as root (CI), the ``postgres`` user if it exists, else ``nobody``
(PostgreSQL refuses to run as root). The superuser is ``rs`` with the password ``PASSWORD``
over TCP (``scram-sha-256``), so a wrong password is refused as in production.

Where the binaries are missing the fixture skips with the reason, except under
``CI=true``, where it fails (CI installs ``postgresql``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

USER = "rs"
PASSWORD = "s3cret-pw"
DATABASE = "postgres"


def _bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are: ``pg_config --bindir``, or Debian's newest."""
    found = shutil.which("pg_config")
    if found is not None:
        try:
            out = subprocess.run(
                [found, "--bindir"], capture_output=True, text=True, check=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out and (Path(out) / "initdb").is_file():
            return Path(out)
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return debian[-1].parent if debian else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unavailable(reason: str) -> Any:
    """Skip with ``reason``; fail instead under ``CI=true``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and PostgreSQL is needed: {reason}")
    pytest.skip(reason)


class PostgresServer:
    """One throwaway PostgreSQL cluster (see the module docstring)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.directory = Path(tempfile.mkdtemp(prefix="rs-postgres-"))
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self.port = _free_port()
        self._as: list[str] = []
        self._owner: tuple[int, int] | None = None
        if os.geteuid() == 0:
            name = "postgres" if _has_user("postgres") else "nobody"
            entry = pwd.getpwnam(name)
            self._owner = (entry.pw_uid, entry.pw_gid)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
            # ``setpriv`` keeps the environment and needs no PAM (``runuser``/``su`` do).
            self._as = [
                "setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                "--clear-groups",
            ]  # fmt: skip

    def _run(self, *command: str, timeout: float = 120) -> None:
        result = subprocess.run(
            [*self._as, *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.directory,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stderr or result.stdout}")

    def start(self) -> None:
        """``initdb`` (first time) and start; return once it accepts connections."""
        if not self.data.exists():
            pwfile = self.directory / "pw"
            pwfile.write_text(PASSWORD + "\n")
            if self._owner is not None:
                os.chown(pwfile, *self._owner)
            self._run(
                str(self.bindir / "initdb"), "-D", str(self.data), "-U", USER,
                f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                "-E", "UTF8", "--no-sync",
            )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=40"
        )
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: active connections are ended, as a restart does)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, table: str, *, password: str | None = PASSWORD, port: int | None = None) -> str:
        """The ``--sink`` URL of ``table`` (``password=None``: left out of the URL)."""
        secret = "" if password is None else f":{password}"
        return f"postgresql://{USER}{secret}@127.0.0.1:{port or self.port}/{DATABASE}?table={table}"

    def connect(self) -> Any:
        """A psycopg connection (autocommit) as the superuser."""
        import psycopg

        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, dbname=DATABASE,
            autocommit=True,
        )  # fmt: skip

    def execute(self, statement: str, *params: object) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (empty for none)."""
        with self.connect() as connection, connection.cursor() as cursor:
            cursor.execute(statement, params or None)
            return list(cursor.fetchall()) if cursor.description else []

    def committed(self, table: str) -> int:
        """The last micro-batch id committed into ``table`` (``-1``: none yet)."""
        if self.execute("SELECT to_regclass('reactive_streams_progress')")[0][0] is None:
            return -1
        rows = self.execute(
            "SELECT max(batch_id) FROM reactive_streams_progress WHERE target = %s", table
        )
        return -1 if rows[0][0] is None else int(rows[0][0])

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def start_server() -> PostgresServer:
    """A started server, or a skip (a failure under ``CI=true``) saying why not."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("needs psycopg (the postgresql extra)")
    bindir = _bindir()
    if bindir is None:
        unavailable("needs PostgreSQL's server binaries (Debian: apt-get install postgresql)")
    assert bindir is not None
    server = PostgresServer(bindir)
    try:
        server.start()
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        server.remove()
        unavailable(f"PostgreSQL did not start: {exc}")
    return server


def wait_until(condition: Any, timeout: float, what: str) -> None:
    """Poll ``condition()`` every 50 ms until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
