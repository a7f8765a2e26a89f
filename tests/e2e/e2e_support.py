"""Helpers of the end-to-end tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))

from pgpair import PgPair, Proxy  # noqa: E402

BUILD = Path(os.environ.get("POLARSPLIT_EXAMPLES_BUILD", ROOT / "c-examples" / "build"))
PROXY = BUILD / "polarsplit-proxy"
PROXY_ASAN = BUILD / "polarsplit-proxy-asan"
APPLY_DELAY_MS = 200


def start_proxy(pair: PgPair, tmp: Path, asan: bool = False, mode: str = "library", **kw) -> Proxy:
    env = {}
    if asan:
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=66"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    return Proxy(PROXY_ASAN if asan else PROXY, pair, mode=mode, workdir=tmp, env=env, **kw).start()


def stop_proxy(proxy: Proxy) -> None:
    """Stops the proxy; it must exit 0 and (under ASan) report nothing."""
    code = proxy.stop()
    log = proxy.log_text()
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        assert marker not in log, f"{marker} in the proxy's log:\n{log[-6000:]}"
    assert code == 0, f"proxy exited with {code}:\n{log[-4000:]}"


# Ports of the running pair's standbys (the `pair` fixture registers them). Where a read ran is
# told by inet_server_port(), replica-safe on purpose (SPEC S-7); pg_is_in_recovery() is
# server-dependent and always answered by the primary.
STANDBY_PORTS: set[int] = set()


def where(conn, sql: str = "SELECT inet_server_port()", params=None) -> str:
    """Runs a statement whose last column is inet_server_port(); returns 'standby' or 'primary'."""
    port = conn.execute(sql, params).fetchone()[-1]
    return "standby" if port in STANDBY_PORTS else "primary"


def ports(pair: PgPair) -> dict[int, str]:
    return {pair.primary.port: "primary", pair.standby.port: "standby"}
