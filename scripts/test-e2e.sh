#!/usr/bin/env bash
# End-to-end tests: the C examples (replay, the proxy with and without AddressSanitizer) against a
# real PostgreSQL 15 primary + hot standby on loopback, the Python ctypes harness, psql and pgbench.
# Called by scripts/test.sh; runs alone too. Installs what it needs on a fresh Debian 12 machine.
# The tests start and stop their own servers (by data directory) and proxies; this script checks
# that none is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh

prepare_e2e

# Issue 21: Pgpool-II from Debian's source, patched, linked to the installed library (cached).
_step "integrations/pgpool/build.sh (Pgpool-II 4.3.5 --with-polarsplit)"
bash integrations/pgpool/build.sh --no-library-build --plain

_step "pytest ffi-tests/python tests/e2e"
status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider ffi-tests/python tests/e2e "$@" || status=$?

# Nothing may outlive the tests: no server on one of our data directories, no proxy.
leftover=$(ps -eo pid=,args= | grep -E 'postgres -D /tmp/polarsplit-pg-|polarsplit-proxy(-asan)? --listen|pgpool -n -D -f |^ *[0-9]+ pgpool: ' | grep -v grep || true)
if [ -n "$leftover" ]; then
    echo "left running after the e2e tests:" >&2
    echo "$leftover" >&2
    status=1
fi
exit "$status"
