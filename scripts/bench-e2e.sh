#!/usr/bin/env bash
# End-to-end benchmark (PERFORMANCE.md): pgbench through the example proxy with the library,
# through the same proxy without the library, and directly, from one run. Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
prepare_e2e
_step "pgbench: library vs primary-only proxy vs direct"
"$VENV/bin/python" scripts/lib/bench_e2e.py
