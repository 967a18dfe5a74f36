#!/usr/bin/env bash
# Installs the independent RocketMQ 4 clients that broker/tests/interop_acl_clients.rs
# signs requests with, each pinned by the lock file beside its script:
#   node DEST: ali-ons (npm) from broker/tests/node/package-lock.json into DEST/node
#              (`npm ci`; Node.js and npm from Debian's packages when missing);
#   cpp DEST:  rocketmq-client-python 0.5.0rc2 (PyPI, the wheel that ships Apache
#              rocketmq-client-cpp as librocketmq.so; x86-64 Linux only) from
#              broker/tests/python/requirements.txt (hash-checked) into the virtual
#              environment DEST/venv (python3 and its venv module from Debian when missing).
# Idempotent: a stamp (the lock file's sha256) skips an install that is already there.
# Concurrent runs for one DEST wait for each other (flock). Exits non-zero, saying why,
# when the client cannot be installed here (the test then prints "skipped: ...").
set -euo pipefail
usage() { echo "usage: $0 node|cpp DEST" >&2; exit 2; }
[ $# -eq 2 ] || usage
what=$1
dest=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dest"
exec 9>"$dest/.install.lock"
flock 9

apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-acl-clients.sh: apt-get not found; install $* with your package manager" >&2
        exit 1
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
            echo "install-acl-clients.sh: not root and no password-less sudo; install $* by hand" >&2
            exit 1
        fi
        sudo="sudo -n"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

stamp_of() { sha256sum "$1" | cut -d' ' -f1; }

case "$what" in
node)
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        apt_install nodejs npm
    fi
    lock="$repo/broker/tests/node/package-lock.json"
    dir="$dest/node"
    want=$(stamp_of "$lock")
    if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$want" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        cp "$repo/broker/tests/node/package.json" "$lock" "$dir/"
        # No package of this tree needs an install script.
        (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
        echo "$want" >"$dir/.stamp"
    fi
    echo "ali-ons $(node -p "require('$dir/node_modules/ali-ons/package.json').version") in $dir (node $(node --version))"
    ;;
cpp)
    if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
        echo "install-acl-clients.sh: the rocketmq-client-python wheel ships librocketmq.so for x86-64 Linux only" >&2
        exit 1
    fi
    if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        apt_install python3 python3-venv
    fi
    req="$repo/broker/tests/python/requirements.txt"
    venv="$dest/venv"
    want=$(stamp_of "$req")
    if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes --only-binary=:all: -r "$req"
        echo "$want" >"$venv/.stamp"
    fi
    "$venv/bin/python" -c 'import rocketmq.client, rocketmq.ffi; print("librocketmq loaded from", rocketmq.ffi.__file__)'
    ;;
*)
    usage
    ;;
esac
