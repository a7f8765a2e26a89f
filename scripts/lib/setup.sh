# Shared by scripts/demo.sh, scripts/test-e2e.sh and scripts/bench-e2e.sh (source it from the repository root): installs
# what the real-PostgreSQL parts need on a fresh Debian 12 machine, builds the library and the C
# examples, and prepares the Python venv. Every step is idempotent and quiet when nothing is missing.

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
VENV="${VENV:-.venv}"
PY_PACKAGES=("psycopg[binary]==3.3.*" "pytest==9.*")

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
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import psycopg, pytest' >/dev/null 2>&1; then
        _step "python venv $VENV (psycopg, pytest)"
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
