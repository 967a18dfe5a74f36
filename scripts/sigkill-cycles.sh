#!/usr/bin/env bash
# The long SIGKILL durability run: `loadgen verify cycles` kills a sync-flush broker
# (a child process) at random moments under load, and every third cycle again while it
# recovers, restarts it, and checks every acknowledged message at the end (lost,
# duplicated, reordered, misplaced, corrupted). CI runs 3 cycles
# (loadgen/tests/sigkill_cycles.rs); this runs many.
#
# Usage: scripts/sigkill-cycles.sh [CYCLES (default 50)] [extra loadgen args...]
# Writes results/reliability-cycles.json; exits non-zero if anything acknowledged is lost.
set -euo pipefail
cd "$(dirname "$0")/.."
cycles=${1:-50}
shift || true
cargo build --release -p ringmq-broker -p ringmq-loadgen
exec ./target/release/loadgen verify cycles --cycles "$cycles" --broker-bin ./target/release/ringmq-broker \
    --out results/reliability-cycles.json "$@"
