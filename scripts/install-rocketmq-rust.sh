#!/usr/bin/env bash
# Installs the crates.io Rust port of RocketMQ (github.com/mxsm/rocketmq-rust), the peer
# that `loadgen` compares RingMQ against, into target/peers/ (`cargo install --root`):
#   rocketmq-broker  (crate) -> target/peers/bin/rocketmq-broker-rust
#   rocketmq-namesrv (crate) -> target/peers/bin/rocketmq-namesrv-rust
# Versions are pinned (ROCKETMQ_RUST_VERSION) so runs compare like with like; both
# crates need rustc >= 1.95. Idempotent: skips when both binaries are already there.
# The build is long (many minutes on 2 cores); it uses $CARGO_TARGET_DIR when set,
# else a private build dir under target/ that is removed after a successful install.
set -euo pipefail

VERSION="${ROCKETMQ_RUST_VERSION:-1.0.0}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PEERS="$ROOT/target/peers"
BROKER_BIN="$PEERS/bin/rocketmq-broker-rust"
NAMESRV_BIN="$PEERS/bin/rocketmq-namesrv-rust"

if [ -x "$BROKER_BIN" ] && [ -x "$NAMESRV_BIN" ]; then
    echo "rocketmq-rust already installed in $PEERS/bin (rocketmq-broker/rocketmq-namesrv $VERSION pinned)"
    exit 0
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "install-rocketmq-rust.sh: cargo not found; install a Rust toolchain >= 1.95" >&2
    exit 1
fi

OWN_BUILD_DIR=""
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
    OWN_BUILD_DIR="$ROOT/target/peers-build"
    export CARGO_TARGET_DIR="$OWN_BUILD_DIR"
fi

mkdir -p "$PEERS"
# One invocation for both crates: they share most dependencies, so the second is quick.
cargo install --locked --root "$PEERS" \
    "rocketmq-broker@$VERSION" "rocketmq-namesrv@$VERSION"

if [ -n "$OWN_BUILD_DIR" ]; then
    rm -rf "$OWN_BUILD_DIR"
fi
echo "installed: $BROKER_BIN $NAMESRV_BIN ($(du -sh "$PEERS" | cut -f1))"
