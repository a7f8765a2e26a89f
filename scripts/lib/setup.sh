# Shared by scripts/demo.sh, scripts/test-e2e.sh and scripts/bench-e2e.sh (source it from the repository root): installs
# what the real-PostgreSQL parts need on a fresh Debian 12 machine, builds the library and the C
# examples, and prepares the Python venv. Every step is idempotent and quiet when nothing is missing.

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
VENV="${VENV:-.venv}"
# asyncpg and pytest-timeout: the driver tests of issues 17/18 (a hang must fail in bounded time).
PY_PACKAGES=("psycopg[binary]==3.3.*" "pytest==9.*" "asyncpg==0.30.*" "pytest-timeout==2.*")

_step() { printf '\n=== %s ===\n' "$*"; }

# Debian packages: PostgreSQL 15 server and client tools (psql, pgbench), libcrypto headers for the
# proxy's SCRAM/md5, make, Python's venv. Installing postgresql-15 may create and start a `main`
# cluster on 5432: nothing here uses it (own ports and data directories).
ensure_debian_packages() {
    local need=()
    [ -x "$PG_BIN/postgres" ] || need+=(postgresql-15)
    command -v psql >/dev/null 2>&1 || need+=(postgresql-client-15)
    command -v pgbench >/dev/null 2>&1 || need+=(postgresql-client-15)
    [ -f /usr/include/openssl/evp.h ] || need+=(libssl-dev)
    command -v make >/dev/null 2>&1 || need+=(make)
    command -v cc >/dev/null 2>&1 || need+=(gcc)
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
    command -v runuser >/dev/null 2>&1 || need+=(util-linux)
    if ((${#need[@]})); then
        _step "installing ${need[*]}"
        if [ "$(id -u)" -ne 0 ]; then
            echo "missing ${need[*]}: run as root or install them" >&2
            return 1
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import psycopg, pytest, asyncpg, pytest_timeout' >/dev/null 2>&1; then
        _step "python venv $VENV (psycopg, pytest, asyncpg, pytest-timeout)"
        python3 -m venv "$VENV"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    fi
}

build_library() {
    _step "cargo build --release (libpolarsplit.so)"
    cargo build --release --quiet
}

build_examples() {
    _step "make -C c-examples (replay, polarsplit-proxy, polarsplit-proxy-asan)"
    make -s -C c-examples
}

# Everything the real-PostgreSQL parts need, in order.
prepare_e2e() {
    ensure_debian_packages
    build_library
    build_examples
    ensure_venv
}

# The other real drivers of the e2e tests (issues 17, 18), from Debian and npm: node-postgres (npm
# `pg`, installed into tests/e2e/drivers/node from its committed lockfile), the PostgreSQL JDBC driver
# with a JDK to compile the workload, and libpq's headers for the C driver programs. Built into
# tests/e2e/drivers/build (ignored by git); each step is skipped when its output is up to date.
DRIVERS_DIR=tests/e2e/drivers
JDBC_JAR=/usr/share/java/postgresql.jar

ensure_driver_packages() {
    local need=()
    command -v node >/dev/null 2>&1 || need+=(nodejs)
    command -v npm >/dev/null 2>&1 || need+=(npm)
    command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
    [ -f "$JDBC_JAR" ] || need+=(libpostgresql-jdbc-java)
    { command -v pg_config >/dev/null 2>&1 && [ -f "$(pg_config --includedir)/libpq-fe.h" ]; } || need+=(libpq-dev)
    if ((${#need[@]})); then
        _step "installing ${need[*]}"
        if [ "$(id -u)" -ne 0 ]; then
            echo "missing ${need[*]}: run as root or install them" >&2
            return 1
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
}

# $1 is newer than every later argument (or they are missing): rebuild.
_stale() {
    local out=$1
    shift
    [ -e "$out" ] || return 0
    local f
    for f in "$@"; do [ "$f" -nt "$out" ] && return 0; done
    return 1
}

build_drivers() {
    local build="$DRIVERS_DIR/build" node="$DRIVERS_DIR/node"
    mkdir -p "$build/java" "$build/libpq"
    if _stale "$node/node_modules/.package-lock.json" "$node/package-lock.json" "$node/package.json"; then
        _step "npm ci ($node: node-postgres)"
        (cd "$node" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    local java
    for java in "$DRIVERS_DIR"/java/*.java; do
        local cls="$build/java/$(basename "${java%.java}").class"
        if _stale "$cls" "$java" "$JDBC_JAR"; then
            _step "javac $java"
            javac -d "$build/java" -cp "$JDBC_JAR" "$java"
        fi
    done
    local c
    for c in "$DRIVERS_DIR"/libpq/*.c; do
        local bin="$build/libpq/$(basename "${c%.c}")"
        if _stale "$bin" "$c"; then
            _step "cc $c (libpq)"
            cc -O1 -g -Wall -Wextra -Werror -I"$(pg_config --includedir)" -o "$bin" "$c" -L"$(pg_config --libdir)" -lpq
        fi
    done
}

# ensure_deb_src PACKAGE VERSION: apt knows PACKAGE's source at VERSION, from a bookworm deb-src
# entry added to /etc/apt/sources.list.d/ when it does not (same URIs and suites as the deb entry).
# For `apt-get source` of Pgpool-II (integrations/pgpool/build.sh) and PostgreSQL's regression
# suite (scripts/test-pg-regress.sh).
ensure_deb_src() {
    apt-cache showsrc "$1" 2>/dev/null | grep -q "^Version: $2" && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "no deb-src entry for $1 $2: run as root or add one" >&2
        return 1
    fi
    _step "adding a bookworm deb-src entry"
    cat > /etc/apt/sources.list.d/polarsplit-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -qq
}

# The e2e tests' drivers, after prepare_e2e.
prepare_e2e_drivers() {
    ensure_driver_packages
    build_drivers
}
