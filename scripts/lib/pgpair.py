"""A real PostgreSQL primary + streaming hot standby on loopback, for the e2e tests and the demo.

Facts this relies on are in shared/NOTES.md: postgres refuses to run as root, so initdb, pg_ctl and
pg_basebackup run as a dedicated system user (created when missing); the standby comes from
`pg_basebackup -R -X stream -C -S <slot>`; `hot_standby_feedback = on`; a real, runtime-changeable
lag through `recovery_min_apply_delay`; servers are stopped by data directory, never by name.

Also the proxy process: `Proxy` starts polarsplit-proxy and always stops it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = os.environ.get("POLARSPLIT_PG_USER", "polarsplit-pg")
SUPERUSER = "postgres"

# Logins the tests use, one per authentication method (see pg_hba below). The credential map
# given to the proxy lists all but `app_nocreds`, which must never leave the writer.
PASSWORDS = {
    "app_clear": "clear-pw",
    "app_md5": "md5-pw",
    "app_scram": "scram-pw",
    "app_nocreds": "nocreds-pw",
}

HBA = """\
# polarsplit e2e: loopback only
host    all             app_clear       127.0.0.1/32    password
host    all             app_md5         127.0.0.1/32    md5
host    all             app_scram       127.0.0.1/32    scram-sha-256
host    all             app_nocreds     127.0.0.1/32    scram-sha-256
host    all             all             127.0.0.1/32    trust
host    replication     all             127.0.0.1/32    trust
local   all             all                             trust
local   replication     all                             trust
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_pg_user(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", PG_USER, "--", *cmd]
    return cmd


def ensure_pg_user() -> None:
    """Creates the system user that runs the servers when we are root (CI) and it is missing."""
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            check=True,
        )


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class Server:
    def __init__(self, name: str, datadir: Path, port: int, logfile: Path):
        self.name = name
        self.datadir = datadir
        self.port = port
        self.logfile = logfile

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = _as_pg_user([str(PG_BIN / "pg_ctl"), "-D", str(self.datadir), *args])
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120, cwd="/")

    def start(self) -> None:
        self.pg_ctl("-w", "-t", "60", "-l", str(self.logfile), "start")

    def stop(self, mode: str = "fast") -> None:
        if (self.datadir / "postmaster.pid").exists():
            self.pg_ctl("-w", "-t", "60", "-m", mode, "stop", check=False)

    def running(self) -> bool:
        return self.pg_ctl("status", check=False).returncode == 0

    def dsn(self, user: str = SUPERUSER, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={user} dbname={dbname}"

    def psql(self, sql: str, user: str = SUPERUSER, dbname: str = "postgres") -> str:
        out = _run(
            ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.dsn(user, dbname), "-c", sql]
        )
        return out.stdout.strip()


class PgPair:
    """A primary and one hot standby with `recovery_min_apply_delay = apply_delay_ms`."""

    def __init__(self, apply_delay_ms: int = 200, base: str | None = None):
        self.apply_delay_ms = apply_delay_ms
        # POLARSPLIT_RUN_TAG (set by scripts/test-e2e.sh) names this run's data directories, so its
        # leftover check sees only its own servers on a machine shared with other checkouts.
        tag = os.environ.get("POLARSPLIT_RUN_TAG")
        self.base = Path(base or tempfile.mkdtemp(prefix=f"polarsplit-pg-{tag}-" if tag else "polarsplit-pg-"))
        self.primary = Server("primary", self.base / "primary", free_port(), self.base / "primary.log")
        self.standby = Server("standby", self.base / "standby", free_port(), self.base / "standby.log")

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "PgPair":
        ensure_pg_user()
        self.base.mkdir(parents=True, exist_ok=True)
        os.chmod(self.base, 0o755)
        if os.geteuid() == 0:
            shutil.chown(self.base, PG_USER, PG_USER)
        try:
            self._init_primary()
            self._init_standby()
        except BaseException:
            self.stop()
            raise
        return self

    def _init_primary(self) -> None:
        p = self.primary
        subprocess.run(
            _as_pg_user(
                [str(PG_BIN / "initdb"), "-D", str(p.datadir), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                 "--locale=C", "--no-sync"]
            ),
            cwd="/",  # the servers' user may not be allowed into the caller's directory
            check=True,
            capture_output=True,
            text=True,
        )
        conf = f"""
# polarsplit e2e
port = {p.port}
listen_addresses = '127.0.0.1'
unix_socket_directories = '{self.base}'
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
hot_standby_feedback = on
fsync = off
full_page_writes = off
max_connections = 200
shared_buffers = 32MB
wal_keep_size = 256MB
log_min_messages = warning
"""
        with open(p.datadir / "postgresql.conf", "a") as f:
            f.write(conf)
        (p.datadir / "pg_hba.conf").write_text(HBA)
        p.start()
        sql = ["SET password_encryption = 'md5'",
               f"CREATE ROLE app_md5 LOGIN PASSWORD '{PASSWORDS['app_md5']}'",
               "SET password_encryption = 'scram-sha-256'"]
        for user in ("app_clear", "app_scram", "app_nocreds"):
            sql.append(f"CREATE ROLE {user} LOGIN PASSWORD '{PASSWORDS[user]}'")
        sql += ["CREATE ROLE app_trust LOGIN", "CREATE DATABASE app"]
        for stmt in sql:
            p.psql(stmt)
        grants = ["GRANT ALL ON SCHEMA public TO PUBLIC"]
        for stmt in grants:
            p.psql(stmt, dbname="app")

    def _init_standby(self) -> None:
        s = self.standby
        subprocess.run(
            _as_pg_user(
                [str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", SUPERUSER,
                 "-D", str(s.datadir), "-R", "-X", "stream", "-C", "-S", "standby1", "--checkpoint=fast",
                 "--no-sync"]
            ),
            cwd="/",
            check=True,
            capture_output=True,
            text=True,
        )
        with open(s.datadir / "postgresql.conf", "a") as f:
            f.write(f"\nport = {s.port}\nrecovery_min_apply_delay = '{self.apply_delay_ms}ms'\n")
        s.start()
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = self.primary.psql("SELECT state FROM pg_stat_replication LIMIT 1")
            if state == "streaming":
                return
            time.sleep(0.1)
        raise RuntimeError("the standby did not start streaming")

    def stop(self) -> None:
        """Stops both servers by data directory and removes everything. Safe to call twice."""
        for srv in (self.standby, self.primary):
            try:
                srv.stop("immediate")
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        shutil.rmtree(self.base, ignore_errors=True)

    # -- knobs -------------------------------------------------------------------------------
    def set_apply_delay(self, ms: int) -> None:
        self.standby.psql(f"ALTER SYSTEM SET recovery_min_apply_delay = '{ms}ms'")
        self.standby.psql("SELECT pg_reload_conf()")
        self.apply_delay_ms = ms

    def wait_replayed(self, timeout: float = 30) -> None:
        """Waits until the standby replayed everything the primary wrote so far."""
        target = self.primary.psql("SELECT pg_current_wal_insert_lsn()")
        deadline = time.time() + timeout
        while time.time() < deadline:
            ok = self.standby.psql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")
            if ok == "t":
                return
            time.sleep(0.05)
        raise RuntimeError("the standby did not catch up")

    def credentials_file(self, path: Path) -> Path:
        lines = [f"{u}:{pw}" for u, pw in PASSWORDS.items() if u != "app_nocreds"]
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)
        return path


class Proxy:
    """polarsplit-proxy as a child process: started, waited for, always stopped."""

    def __init__(self, binary: Path, pair: PgPair, mode: str = "library", extra: list[str] | None = None,
                 workdir: Path | None = None, settings: dict[str, str] | None = None, env: dict | None = None):
        self.binary = Path(binary)
        self.pair = pair
        self.mode = mode
        self.port = free_port()
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="polarsplit-proxy-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / f"proxy-{mode}-{self.port}.log"
        self.stats_file = self.workdir / f"stats-{mode}-{self.port}.txt"
        self.creds = pair.credentials_file(self.workdir / "credentials")
        base = {"server_dialect": "stock", "startup_profile": "off"}
        base.update(settings or {})
        self.args = [
            str(self.binary),
            "--listen", f"127.0.0.1:{self.port}",
            "--primary", f"127.0.0.1:{pair.primary.port}",
            "--reader", f"127.0.0.1:{pair.standby.port}",
            "--mode", mode,
            "--credentials", str(self.creds),
            "--monitor-interval-ms", "10",
            "--stats-file", str(self.stats_file),
            "--verbose",
        ]
        for k, v in base.items():
            self.args += ["--set", f"{k}={v}"]
        self.args += extra or []
        if os.environ.get("POLARSPLIT_PROXY_RECORD"):
            # Debugging a flaky e2e test: every session of every proxy the run starts is
            # recorded (--record) under $POLARSPLIT_PROXY_RECORD/<port>/, for c-examples/replay.
            d = Path(os.environ["POLARSPLIT_PROXY_RECORD"]) / str(self.port)
            d.mkdir(parents=True, exist_ok=True)
            self.args += ["--record", str(d)]
        self.env = dict(os.environ, **(env or {}))
        self.proc: subprocess.Popen | None = None
        # Seconds to wait for the listening socket (longer under valgrind).
        self.start_timeout = 15

    def start(self) -> "Proxy":
        self._logf = open(self.log, "w")
        self.proc = subprocess.Popen(self.args, stdout=self._logf, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"proxy exited with {self.proc.returncode}: {self.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("proxy did not start listening")

    def dsn(self, user: str = "app_trust", dbname: str = "app", **extra) -> str:
        pw = PASSWORDS.get(user)
        parts = [f"host=127.0.0.1 port={self.port} user={user} dbname={dbname} sslmode=disable"]
        if pw:
            parts.append(f"password={pw}")
        parts += [f"{k}={v}" for k, v in extra.items()]
        return " ".join(parts)

    def stats(self, timeout: float = 5) -> dict[str, dict[str, int]]:
        """Asks for the counters (SIGUSR1) and parses the stats file."""
        assert self.proc is not None
        before = self.stats_file.stat().st_mtime_ns if self.stats_file.exists() else 0
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.stats_file.exists() and self.stats_file.stat().st_mtime_ns != before:
                break
            time.sleep(0.02)
        return parse_stats(self.stats_file.read_text())

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 10 s. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._logf.close()
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def parse_stats(text: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {"counter": {}, "outcome": {}, "reason": {}, "proxy": {}}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in out:
            out[parts[0]][parts[1]] = int(parts[2])
    return out
