"""Pgpool-II (built by integrations/pgpool/build.sh) as a child process of the e2e tests, and the
workloads run through it (issue 21). Always stopped, also on failure; never by name."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from e2e_support import ROOT
from pgpair import PgPair, free_port

PGPOOL_BIN = Path(os.environ.get("PGPOOL_CACHE", ROOT / "target" / "pgpool")) / "bin"
PGPOOL = PGPOOL_BIN / "pgpool"  # configure --with-polarsplit
PGPOOL_PLAIN = PGPOOL_BIN / "pgpool-plain"  # the same patched tree without the switch

# Pgpool's own statement-level load balancing in streaming-replication mode, as its documentation
# and sample configuration describe it (doc/src/sgml/loadbalance.sgml, stream-check.sgml,
# src/sample/pgpool.conf.sample). The primary's weight 0 sends every load-balanced read to the
# standby, as the library prefers readers.
PGPOOL_LOAD_BALANCING = {
    "load_balance_mode": "on",
    "statement_level_load_balance": "on",
    "disable_load_balance_on_write": "'transaction'",
    "backend_weight0": "0",
    "backend_weight1": "1",
}


class Pgpool:
    """One pgpool process group on a free port, in front of the pair."""

    def __init__(self, pair: PgPair, workdir: Path, polarsplit: bool | None, settings: dict[str, str] | None = None,
                 children: int = 12, library: str = "server_dialect=stock,startup_profile=off"):
        """polarsplit: True/False for the --with-polarsplit build's `polarsplit` setting, None for
        the build without the switch (which knows no polarsplit settings)."""
        self.binary = PGPOOL_PLAIN if polarsplit is None else PGPOOL
        self.pair = pair
        self.port = free_port()
        self.pcp_port = free_port()
        self.workdir = Path(workdir) / f"pgpool-{self.port}"
        self.workdir.mkdir(parents=True)
        self.polarsplit = polarsplit
        conf = {
            "backend_clustering_mode": "'streaming_replication'",
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.workdir}'",
            "pcp_listen_addresses": "''",
            "pcp_port": str(self.pcp_port),
            "pcp_socket_dir": f"'{self.workdir}'",
            "backend_hostname0": "'127.0.0.1'",
            "backend_port0": str(pair.primary.port),
            "backend_flag0": "'ALLOW_TO_FAILOVER'",
            "backend_hostname1": "'127.0.0.1'",
            "backend_port1": str(pair.standby.port),
            "backend_flag1": "'ALLOW_TO_FAILOVER'",
            "num_init_children": str(children),
            "max_pool": "2",
            "child_life_time": "0",
            "connection_life_time": "0",
            "enable_pool_hba": "off",
            "pool_passwd": "''",
            "health_check_period": "0",
            "failover_on_backend_error": "off",
            "sr_check_period": "1",
            "sr_check_user": "'postgres'",
            "sr_check_database": "'postgres'",
            "memory_cache_enabled": "off",
            "logdir": f"'{self.workdir}'",
            "pid_file_name": f"'{self.workdir}/pgpool.pid'",
            "log_destination": "'stderr'",
            "log_min_messages": "'warning'",
        }
        if polarsplit is not None:
            conf["polarsplit"] = "on" if polarsplit else "off"
            conf["polarsplit_settings"] = f"'{library}'"
        conf.update(PGPOOL_LOAD_BALANCING)
        conf.update(settings or {})
        self.conf = self.workdir / "pgpool.conf"
        self.conf.write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
        (self.workdir / "pcp.conf").write_text("")
        (self.workdir / "pool_hba.conf").write_text("")
        self.log = self.workdir / "pgpool.log"
        self.proc: subprocess.Popen | None = None

    def start(self, routed: bool | None = None) -> "Pgpool":
        """Starts it and waits until it serves clients — and, when `routed` (default: polarsplit is
        on), until a session is routed by the library: Pgpool's children accept clients before it
        has found the primary, and a session that starts then takes Pgpool's own routing for its
        whole life. A library-routed session answers `SHOW polarsplit.causal_token` itself (SPEC
        C-2); PostgreSQL refuses it."""
        if routed is None:
            routed = self.polarsplit is True
        if not self.binary.exists():
            raise RuntimeError(f"{self.binary} is not built: run integrations/pgpool/build.sh --plain")
        self._logf = open(self.log, "w")
        self.proc = subprocess.Popen(
            [str(self.binary), "-n", "-D", "-f", str(self.conf), "-F", str(self.workdir / "pcp.conf"),
             "-a", str(self.workdir / "pool_hba.conf")],
            stdout=self._logf, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgpool exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
            try:
                with psycopg.connect(self.dsn(), connect_timeout=2, autocommit=True) as c:
                    c.execute("SHOW polarsplit.causal_token" if routed else "SELECT 1")
                return self
            except psycopg.Error:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"pgpool did not accept clients:\n{self.log_text()[-3000:]}")

    def dsn(self, user: str = "app_trust", dbname: str = "app") -> str:
        return f"host=127.0.0.1 port={self.port} user={user} dbname={dbname} sslmode=disable"

    def pids(self) -> list[int]:
        """The processes of this pgpool's process group (main process and children)."""
        if self.proc is None:
            return []
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[2]) == self.proc.pid:  # pgrp
                    out.append(int(d.name))
        return out

    def cpu_seconds(self) -> float:
        """User + system CPU of every process of the group, including reaped children."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.pids():
            try:
                f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
        return total / tick

    def stop(self) -> int | None:
        """SIGINT (fast shutdown) to the main process, then SIGKILL to its group after 10 s."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # Children the main process left behind (it waits for them; this is a safety net).
        deadline = time.time() + 5
        while self.pids() and time.time() < deadline:
            time.sleep(0.05)
        if self.pids():
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._logf.close()
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Counts:
    reads: int = 0
    stale: int = 0
    standby: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: "Counts") -> None:
        self.reads += other.reads
        self.stale += other.stale
        self.standby += other.standby
        self.errors += other.errors

    @property
    def standby_share(self) -> float:
        return self.standby / self.reads if self.reads else 0.0
