#!/usr/bin/env bash
# Runs every test of polarsplit: formatting, lints, the Rust and C tests. This is the README's test
# command and exactly what CI runs (.ci/run). It installs what it needs itself, so it works on a
# fresh Debian 12 machine that has only Rust.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s ===\n' "$*"; }

# --- What the tests need from Debian -----------------------------------------------------------
need_pkgs=()
command -v cc >/dev/null 2>&1 || need_pkgs+=(gcc)
command -v c++ >/dev/null 2>&1 || need_pkgs+=(g++)
command -v nm >/dev/null 2>&1 || need_pkgs+=(binutils)
if ((${#need_pkgs[@]})); then
    step "installing ${need_pkgs[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing ${need_pkgs[*]}: run as root or install them" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo build --release (libpolarsplit.so / .a for the artifact checks and C hosts)"
cargo build --release

step "cargo test (Rust and C tests)"
cargo test --workspace

step "simulator coverage (outcomes and reasons over the random scenarios)"
cat target/sim-coverage.txt

bash scripts/test-e2e.sh  # the C examples, the proxy and the Python harness against real PostgreSQL
bash scripts/test-driver-suites.sh # psycopg2's, asyncpg's, pg8000's and node-postgres's own suites through the proxy
bash scripts/test-pg-regress.sh    # PostgreSQL's own regression suite (pg_regress) through the proxy
bash scripts/test-sanitizers.sh # C tests under ASan/UBSan and valgrind (issue 10)
bash scripts/test-fuzz.sh       # fuzz smoke: every target ~10 s from its seeds (issue 10)

step "all tests passed"
