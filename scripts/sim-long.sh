#!/usr/bin/env bash
# The long run of the request-layer simulator (broker/tests/request_sim.rs): many
# seeds (test profile, opt-level 1: no release build of the dev-dependencies). A
# failure prints its seed; replay it with
#   RINGMQ_SIM_SEED=<seed> cargo test -p ringmq-broker --test request_sim seeded -- --nocapture
# Usage: scripts/sim-long.sh [seeds] [first seed]   (defaults: 20000 seeds from a
# time-derived base, so every run explores new ones; the base is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-20000}"
base="${2:-$(( $(date +%s) % 1000000 * 1000 ))}"
echo "request simulator: $seeds seeds from $base"
RINGMQ_SIM_SEEDS="$seeds" RINGMQ_SIM_BASE="$base" \
  cargo test -p ringmq-broker --test request_sim seeded_workloads_keep_every_invariant -- --nocapture
