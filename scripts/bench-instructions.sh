#!/usr/bin/env bash
# The example proxy's instructions per `pgbench -S` transaction under callgrind (PERFORMANCE.md):
# library, library-no-reader and primary-only, as instruction counts that do not depend on how busy
# the machine is. Not part of the tests. Installs what it needs like the demo does.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh
prepare_e2e
command -v valgrind >/dev/null 2>&1 || {
    _step "installing valgrind"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
}
_step "proxy instructions per transaction (callgrind)"
"$VENV/bin/python" scripts/lib/bench_instructions.py
