#!/usr/bin/env bash
# Installs fio (used by `loadgen store-bench --fio` and scripts/fio-bench.sh) if missing.
# Debian/Ubuntu only (apt-get); needs root. Idempotent.
set -euo pipefail
if command -v fio >/dev/null 2>&1; then
    echo "fio already installed: $(fio --version)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-fio.sh: apt-get not found; install fio with your package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq fio >/dev/null
echo "installed: $(fio --version)"
