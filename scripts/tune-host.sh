#!/usr/bin/env bash
# Checks this host against a RingMQ kernel profile and prints, or applies, the changes.
# Builds and runs `ringmq-tune` (tuning/src/bin/ringmq-tune.rs) with cargo.
#
# Usage:
#   scripts/tune-host.sh [--profile FILE] [--root DIR]           check + dry run (default)
#   sudo scripts/tune-host.sh [--profile FILE] [--root DIR] --apply   check, apply, re-check
#
#   --profile FILE  kernel profile (default tuning/kernel/throughput.toml; see tuning/kernel/)
#   --root DIR      host tree to read/write (default /; a copy of another host's tree works)
#   --apply         write the sysctl and sysfs values (needs root: checked with `id -u`)
#
# Never written, only printed: resource limits (limits.d / systemd text) and the
# /etc/sysctl.d file that keeps the sysctls after a reboot.
# Exit status: 0 ok, 2 error (ringmq-tune's), 64 bad usage.
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "tune-host.sh: $*" >&2; exit "${2:-64}"; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
profile="$repo/tuning/kernel/throughput.toml"
root=/
apply=0
while [ $# -gt 0 ]; do
    case $1 in
        --profile) [ $# -ge 2 ] || die "--profile needs a file"; profile=$2; shift 2 ;;
        --root) [ $# -ge 2 ] || die "--root needs a directory"; root=$2; shift 2 ;;
        --apply) apply=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
# Paths are made absolute before cargo runs from the repository root.
case $profile in /*) ;; *) profile="$PWD/$profile" ;; esac
case $root in /*) ;; *) root="$PWD/$root" ;; esac
[ -f "$profile" ] || die "no such profile: $profile" 2
if [ "$apply" -eq 1 ] && [ "$(id -u)" -ne 0 ]; then
    die "--apply needs root (id -u is $(id -u)); run with sudo, or drop --apply for a dry run" 2
fi
command -v cargo >/dev/null 2>&1 || die "cargo not found (under sudo, try: sudo env PATH=\"\$PATH\" $0 ...)" 2

tune() { (cd "$repo" && cargo run --quiet --release -p ringmq-tuning --bin ringmq-tune -- "$@"); }

# check exits 1 when something differs: that is what this script is for, not an error.
rc=0
tune check --profile "$profile" --root "$root" || rc=$?
[ "$rc" -le 1 ] || exit "$rc"
echo
if [ "$apply" -eq 1 ]; then
    tune apply --profile "$profile" --root "$root" --yes
    echo
    rc=0
    tune check --profile "$profile" --root "$root" || rc=$?
    [ "$rc" -le 1 ] || exit "$rc"
else
    tune apply --profile "$profile" --root "$root" --dry-run
fi
