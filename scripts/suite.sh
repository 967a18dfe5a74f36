#!/usr/bin/env bash
# The standard benchmark suite, side by side with the peers, on this machine:
# W1 durable (1 KiB, fsync before ack, 1 and 32 in flight) vs Redis `appendfsync always`
# and rocketmq-broker SYNC_FLUSH; W2 throughput (1 KiB batches, a consumer tailing,
# highest rate with end-to-end p99 < 10 ms) vs Redis `everysec` and rocketmq-broker
# ASYNC_FLUSH; W3 small messages (128 B × 100 per batch) and a cold read of a 1 GiB
# backlog. Host limits (fio, loopback TCP) are measured in the same run.
#
# Installs what is missing: fio, redis-server (apt), rocketmq-broker/rocketmq-namesrv
# (cargo install into target/peers: about 35 minutes on 2 cores, once).
#
# Usage: scripts/suite.sh [loadgen suite options...]
#   e.g. scripts/suite.sh --workloads w1 --peers redis --duration-secs 10
# Writes results/suite.md and results/suite-w{1,2,3}.{json,md,svg}.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-fio.sh
scripts/install-redis.sh
scripts/install-rocketmq-rust.sh
cargo build --release -p ringmq-loadgen
exec ./target/release/loadgen suite "$@"
