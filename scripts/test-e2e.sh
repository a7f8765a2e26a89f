#!/usr/bin/env bash
# End-to-end tests: the C examples (replay, the proxy with and without AddressSanitizer) against a
# real PostgreSQL 15 primary + hot standby on loopback, the Python ctypes harness, psql and pgbench.
# Also real drivers (asyncpg, node-postgres, JDBC, libpq programs under tests/e2e/drivers) for
# issues 17 and 18. Called by scripts/test.sh; runs alone too. Installs what it needs on a fresh Debian 12 machine.
# The tests start and stop their own servers (by data directory) and proxies; this script checks
# that none is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh

prepare_e2e
prepare_e2e_drivers

# This run's servers live in /tmp/polarsplit-pg-<tag>-* (pgpair.py) and its proxies are this
# checkout's binaries: the leftover check below sees only those, not another checkout's tests running
# on the same machine.
export POLARSPLIT_RUN_TAG="e2e$$"
polarsplit_processes() {
    ps -eo pid=,args= \
        | grep -E "postgres -D /tmp/polarsplit-pg-$POLARSPLIT_RUN_TAG-|$PWD/c-examples/build/polarsplit-proxy(-asan)? --listen|$PWD/target/pgpool[^ ]*/pgpool -n" \
        | grep -v grep || true
}

# Issue 21: Pgpool-II from Debian's source, patched, linked to the installed library (cached).
_step "integrations/pgpool/build.sh (Pgpool-II 4.3.5 --with-polarsplit)"
bash integrations/pgpool/build.sh --no-library-build --plain

_step "pytest ffi-tests/python tests/e2e"
status=0
# --timeout: a backstop per test (pytest-timeout); the tests bound their own waits far below it.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -rxX --timeout=300 ffi-tests/python tests/e2e "$@" || status=$?

# Nothing may outlive the tests: no server on one of our data directories, no proxy.
leftover=$(polarsplit_processes)
if [ -n "$leftover" ]; then
    echo "left running after the e2e tests:" >&2
    echo "$leftover" >&2
    status=1
fi
exit "$status"
