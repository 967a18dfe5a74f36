#!/usr/bin/env bash
# Installs RingMQ's systemd units (deploy/systemd/) for one broker config, and the
# NameServer unit: binaries under PREFIX/bin, units under ROOT/etc/systemd/system, the
# config under ROOT/etc/ringmq/<name>.<toml|conf>, and a CPUAffinity drop-in matching
# the config's cpu_list (the broker pins shard i to cpu_list[i]: systemd must allow those
# CPUs, and should allow no others to this unit). Then `systemctl daemon-reload`.
#
#   scripts/install-systemd.sh --config FILE [--name NAME] [--prefix /usr/local]
#                              [--tune-profile tuning/kernel/throughput.toml]
#                              [--root DIR]   # install into DIR instead of / (no systemctl)
#                              [--no-binaries]
#
# Start: systemctl enable --now ringmq-namesrv ringmq-broker@NAME
set -euo pipefail
config="" name="" prefix=/usr/local root="" tune="" binaries=1
while [[ $# -gt 0 ]]; do
    case $1 in
        --config) config=$2; shift 2 ;;
        --name) name=$2; shift 2 ;;
        --prefix) prefix=$2; shift 2 ;;
        --root) root=$2; shift 2 ;;
        --tune-profile) tune=$2; shift 2 ;;
        --no-binaries) binaries=0; shift ;;
        *) echo "install-systemd.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ -n $config ]] || { echo "install-systemd.sh: --config FILE is required" >&2; exit 2; }
[[ -f $config ]] || { echo "install-systemd.sh: $config does not exist" >&2; exit 2; }
config=$(realpath "$config")
[[ -z $tune ]] || tune=$(realpath "$tune")
[[ -z $root ]] || { mkdir -p "$root"; root=$(realpath "$root"); }
cd "$(dirname "$0")/.."
ext=${config##*.}
[[ $ext == toml ]] || ext=conf
[[ -n $name ]] || name=$(basename "$config" ".$ext")
[[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "install-systemd.sh: name '$name' must be [A-Za-z0-9_.-]+" >&2; exit 2; }

# cpu_list = [2, 3, 4] in a TOML config (broker.conf has no such key: no drop-in).
cpus=""
if [[ $ext == toml ]]; then
    cpus=$(sed -n 's/^[[:space:]]*cpu_list[[:space:]]*=[[:space:]]*\[\(.*\)\].*/\1/p' "$config" | tr -d ' ' | tr ',' ' ')
fi

units=$root/etc/systemd/system
mkdir -p "$units" "$root/etc/ringmq" "$root/etc/default"
if [[ $binaries == 1 ]]; then
    target=${CARGO_TARGET_DIR:-target}
    cargo build --release -p ringmq-broker -p ringmq-namesrv -p ringmq-tuning
    mkdir -p "$root$prefix/bin"
    install -m 0755 "$target/release/ringmq-broker" "$target/release/ringmq-namesrv" "$target/release/ringmq-tune" "$root$prefix/bin/"
fi
for unit in ringmq-namesrv.service ringmq-broker@.service; do
    sed "s|@PREFIX@|$prefix|g" "deploy/systemd/$unit" >"$units/$unit"
done
install -m 0644 "$config" "$root/etc/ringmq/$name.$ext"
{
    echo "# ringmq-broker@$name (scripts/install-systemd.sh)"
    echo "RINGMQ_CONFIG=/etc/ringmq/$name.$ext"
    [[ -z $tune ]] || echo "RINGMQ_TUNE_PROFILE=/etc/ringmq/kernel-$(basename "$tune")"
} >"$root/etc/default/ringmq-broker-$name"
[[ -z $tune ]] || install -m 0644 "$tune" "$root/etc/ringmq/kernel-$(basename "$tune")"
dropin=$units/ringmq-broker@$name.service.d
if [[ -n $cpus ]]; then
    mkdir -p "$dropin"
    printf '# From cpu_list in /etc/ringmq/%s.%s: shard i runs on cpu_list[i].\n[Service]\nCPUAffinity=%s\n' "$name" "$ext" "$cpus" >"$dropin/cpu.conf"
fi
# The store root (TOML store_root, broker.conf storePathRootDir) must belong to the
# service user.
if [[ $ext == toml ]]; then
    store=$(sed -n 's/^[[:space:]]*store_root[[:space:]]*=[[:space:]]*"\(.*\)".*/\1/p' "$config" | head -1)
else
    store=$(sed -n 's/^[[:space:]]*storePathRootDir[[:space:]]*[=:][[:space:]]*\(.*[^[:space:]]\)[[:space:]]*$/\1/p' "$config" | head -1)
fi
if [[ -z $root ]]; then
    id ringmq >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin ringmq
    [[ -z $store ]] || install -d -o ringmq -g ringmq "$store"
    systemctl daemon-reload
    echo "installed: systemctl enable --now ringmq-namesrv ringmq-broker@$name"
else
    echo "installed under $root (no systemctl run)"
fi
