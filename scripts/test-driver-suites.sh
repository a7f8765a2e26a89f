#!/usr/bin/env bash
# Real drivers' own test suites (psycopg2, asyncpg, pg8000, pinned), against a real primary +
# standby directly and through the example proxy (and its ASan/UBSan build): nothing may fail through the proxy that passes
# against the primary alone (scripts/lib/driver_suites.py has the rule and its short allow-list).
# The suites come from PyPI as source distributions into target/driver-suites.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
prepare_e2e
printf '\n=== %s ===\n' "driver suites through the proxy and its ASan build (psycopg2, asyncpg, pg8000)"
.venv/bin/python scripts/lib/driver_suites.py target/driver-suites c-examples/build/polarsplit-proxy \
    c-examples/build/polarsplit-proxy-asan "$@"
