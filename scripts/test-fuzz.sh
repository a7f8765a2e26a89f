#!/usr/bin/env bash
# Fuzz smoke: builds the cargo-fuzz (libFuzzer + AddressSanitizer) targets of fuzz/ and runs each
# for FUZZ_SECONDS seconds (default 10), starting from its committed seeds (fuzz/seeds/<target>).
# Any crash, failed invariant, leak, timeout (-timeout) or out-of-memory fails the script; the
# input that did it is left in $CARGO_TARGET_DIR/fuzz-smoke/artifacts/.
#
# Installs cargo-fuzz with `cargo install` when it is missing. Runs on the stable toolchain with
# RUSTC_BOOTSTRAP=1 (cargo-fuzz passes -Zsanitizer flags). For a long campaign see README.md.
#
# Usage: bash scripts/test-fuzz.sh [target…]        FUZZ_SECONDS=60 bash scripts/test-fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

step() { printf '\n=== %s ===\n' "$*"; }

seconds=${FUZZ_SECONDS:-10}
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    step "installing cargo-fuzz"
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

target=${CARGO_TARGET_DIR:-$root/fuzz/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac
export CARGO_TARGET_DIR=$target
work=$target/fuzz-smoke
rm -rf "$work"
mkdir -p "$work/artifacts"

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

step "building fuzz targets (${targets[*]}) with ASan and debug assertions"
cargo fuzz build --debug-assertions

failed=()
for t in "${targets[@]}"; do
    step "fuzz smoke: $t for ${seconds}s"
    mkdir -p "$work/corpus/$t"
    seeds=()
    [ -d "fuzz/seeds/$t" ] && seeds+=("fuzz/seeds/$t")
    [ -d "fuzz/regressions/$t" ] && seeds+=("fuzz/regressions/$t")
    # The first corpus directory receives new inputs; the committed seeds are only read.
    if cargo fuzz run --debug-assertions "$t" "$work/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/$t-" >"$work/$t.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
        cov=$(grep -o 'cov: [0-9]*' "$work/$t.log" | tail -1)
        echo "$t: ${runs:-?} executions, $cov, no finding"
    else
        tail -60 "$work/$t.log" >&2
        echo "$t: FINDING (log: $work/$t.log; input: $(ls "$work/artifacts/$t-"* 2>/dev/null))" >&2
        failed+=("$t")
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz smoke failed: ${failed[*]}" >&2
    exit 1
fi
step "fuzz smoke: no findings"
