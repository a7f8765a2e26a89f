#!/usr/bin/env bash
# The demo: a real PostgreSQL 15 primary + hot standby on loopback (the standby applies WAL late),
# the example proxy (c-examples/proxy) taking every routing decision from libpolarsplit, a mixed
# workload, and a report next to the same workload through a naive "every SELECT to the replica"
# splitter. On a fresh Debian 12 machine with Rust it installs what it needs (as root). It stops
# everything it started. Knobs: DEMO_SECONDS (20 per mode), DEMO_THREADS (6), DEMO_APPLY_DELAY_MS (200).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/setup.sh

started=$(date +%s)
prepare_e2e
_step "demo ($(($(date +%s) - started)) s of set-up)"
"$VENV/bin/python" scripts/lib/demo.py
