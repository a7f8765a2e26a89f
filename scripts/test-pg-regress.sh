#!/usr/bin/env bash
# PostgreSQL's own test suites (the regression suite, the isolation suite, libpq's pipeline-mode
# tests) against a real primary + standby, directly and through the example proxy: every script
# must print through the proxy what it prints against the primary alone
# (scripts/lib/pg_regress_suite.py has the rule). They are src/test of Debian's postgresql-15
# source package (`apt-get source`, into target/pg-regress); pg_regress, pg_isolation_regress and
# the server headers for regress.so come from postgresql-server-dev-15.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
prepare_e2e
printf '\n=== %s ===\n' "PostgreSQL's own suites through the proxy (regression, isolation, libpq pipeline)"

PG_SRC_VERSION=15.18
cache=target/pg-regress
if [ ! -x /usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress ] \
    || [ ! -f /usr/include/postgresql/15/server/postgres.h ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing postgresql-server-dev-15: run as root or install it" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-server-dev-15 >/dev/null
fi
tests="$cache/postgresql-$PG_SRC_VERSION/src/test"
if [ ! -f "$tests/regress/parallel_schedule" ] || [ ! -f "$tests/isolation/isolation_schedule" ]; then
    ensure_deb_src postgresql-15 "$PG_SRC_VERSION"
    mkdir -p "$cache"
    orig="$cache/postgresql-15_$PG_SRC_VERSION.orig.tar.bz2"
    if [ ! -f "$orig" ]; then
        (cd "$cache" && apt-get source --download-only -qq "postgresql-15=$PG_SRC_VERSION-0+deb12u1" 2>&1 \
            | grep -v "unsandboxed" || true)
    fi
    [ -f "$orig" ] || { echo "apt-get source gave no postgresql-15 $PG_SRC_VERSION" >&2; exit 1; }
    tar -xjf "$orig" -C "$cache" "postgresql-$PG_SRC_VERSION/src/test/regress" \
        "postgresql-$PG_SRC_VERSION/src/test/isolation" "postgresql-$PG_SRC_VERSION/src/test/modules/libpq_pipeline"
fi
# libpq's pipeline-mode test program, from the same tree (libpq, libpgcommon and libpgport from
# libpq-dev and postgresql-server-dev-15).
pipeline_src="$tests/modules/libpq_pipeline/libpq_pipeline.c"
pipeline="$cache/libpq_pipeline"
if [ ! -x "$pipeline" ] || [ "$pipeline_src" -nt "$pipeline" ]; then
    cc -O1 -I/usr/include/postgresql -I/usr/include/postgresql/15/server -o "$pipeline" "$pipeline_src" \
        -L/usr/lib/postgresql/15/lib -lpq -lpgcommon -lpgport
fi
.venv/bin/python scripts/lib/pg_regress_suite.py "$tests" c-examples/build/polarsplit-proxy "$pipeline"
