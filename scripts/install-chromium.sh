#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium (used by admin/tests/dashboard.rs, which
# loads every dashboard page in a real browser) if missing.
# Debian/Ubuntu only (apt-get); needs root or sudo. Idempotent: exits 0 at once when a
# `chromium` (or `chromium-browser`) is already on PATH.
set -euo pipefail
for b in chromium chromium-browser; do
    if command -v "$b" >/dev/null 2>&1; then
        echo "chromium already installed: $("$b" --version 2>/dev/null || echo "$b")"
        exit 0
    fi
done
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium.sh: apt-get not found; install chromium with your package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
        echo "install-chromium.sh: not root and no password-less sudo; install chromium by hand" >&2
        exit 1
    fi
    SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# The fonts package gives the screenshots readable glyphs; the page itself embeds none.
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "installed: $(chromium --version)"
