#!/usr/bin/env bash
# Installs redis-server (Debian package), the Redis Streams peer that `loadgen` compares
# RingMQ against (loadgen/src/peers/redis.rs starts private instances; the package's
# system service is not used). Debian/Ubuntu only (apt-get); needs root or sudo.
# Idempotent: does nothing but print the version when redis-server is on PATH.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
    echo "redis-server already installed: $(redis-server --version)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-redis.sh: apt-get not found; install redis-server with your package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# policy-rc.d-less containers may fail to start the service; the package still installs.
$SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
echo "installed: $(redis-server --version)"
