#!/usr/bin/env bash
# Real drivers' own test suites (psycopg2, asyncpg, pg8000; node-postgres's pg-pool and pg-cursor
# on pg 8.8.0; all pinned), against a real primary + standby directly and through the example proxy
# (and its ASan/UBSan build): nothing may fail through the proxy that passes against the primary
# alone (scripts/lib/driver_suites.py has the rule and its short allow-list).
# The Python suites come from PyPI as source distributions into target/driver-suites; node-postgres's
# from npm (the lockfile in scripts/lib/node-suites) into target/driver-suites/node. psycopg 3's suite
# is not run: neither PyPI nor the Debian mirror this project reaches serves it (driver_suites.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
prepare_e2e
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing node or npm (node-postgres's suites): run as root or install them" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
printf '\n=== %s ===\n' "driver suites through the proxy and its ASan build (psycopg2, asyncpg, pg8000, node-postgres)"
.venv/bin/python scripts/lib/driver_suites.py target/driver-suites c-examples/build/polarsplit-proxy \
    c-examples/build/polarsplit-proxy-asan "$@"
