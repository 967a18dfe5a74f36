#!/usr/bin/env bash
# scripts/fuzz.sh — runs every cargo-fuzz target of client/fuzz/ (the wire decoders:
# frames, JSON and binary headers, heartbeat, route, batch and stored-message bodies,
# the replication stream's frames, the admin tools' bodies, POP's receipt handles and batch acks, controller mode's bodies) and acl/fuzz/ (plain_acl.yml,
# RocketMQ 5's AUTH_* bodies, the signature path) and grpc/fuzz/ (the gRPC authorization
# header; SendMessage decoding and translation) for a fixed time each, and exits non-zero when any target crashed, printing the
# artifact (the input that reproduces it).
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 300 (the long run); `scripts/fuzz.sh 10` is the short one
#   TARGET...           default: every target `cargo fuzz list` reports in each fuzz dir
# Environment:
#   CARGO_TARGET_DIR    where the fuzz builds go (default <fuzz dir>/target)
#   FUZZ_ARGS           extra libFuzzer flags, e.g. "-jobs=2 -workers=2"
#
# Installs what it needs when missing: the nightly toolchain (rustup, minimal profile)
# and cargo-fuzz. Corpora grow in <fuzz dir>/corpus/<target>/ and crashes land in
# <fuzz dir>/artifacts/<target>/ (both git-ignored); replay a crash with
#   cargo +nightly fuzz run --fuzz-dir <fuzz dir> <target> <artifact>
# Exit status: 0 when no target crashed, 1 when one did, 2 on a setup or build error.
set -uo pipefail

secs=${1:-300}
shift || true
if ! [[ $secs =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]" >&2
    exit 2
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fuzz_dirs=("$root/client/fuzz" "$root/acl/fuzz" "$root/grpc/fuzz")
export PATH="$HOME/.cargo/bin:$PATH"

die() {
    echo "fuzz.sh: $*" >&2
    exit 2
}

command -v rustup >/dev/null || die "rustup is required (https://rustup.rs)"
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing the nightly toolchain" >&2
    rustup toolchain install nightly --profile minimal || die "could not install nightly"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked || die "could not install cargo-fuzz"
fi

# Every target as "fuzz_dir target"; each fuzz dir is its own cargo workspace.
wanted=("$@")
entries=()
for dir in "${fuzz_dirs[@]}"; do
    mapfile -t listed < <(cargo +nightly fuzz list --fuzz-dir "$dir") || die "cargo fuzz list failed in $dir"
    for t in "${listed[@]}"; do
        if [ ${#wanted[@]} -eq 0 ] || printf '%s\n' "${wanted[@]}" | grep -qx "$t"; then
            entries+=("$dir $t")
        fi
    done
done
[ ${#entries[@]} -gt 0 ] || die "no fuzz targets (asked: ${wanted[*]:-all})"

echo "fuzz.sh: ${#entries[@]} targets, ${secs}s each" >&2
# Build every target once up front, so that the timed runs only fuzz.
for dir in "${fuzz_dirs[@]}"; do
    cargo +nightly fuzz build --fuzz-dir "$dir" --target-dir "${CARGO_TARGET_DIR:-$dir/target}" || die "fuzz build failed in $dir"
done

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary=()
failed=0
for entry in "${entries[@]}"; do
    fuzz_dir=${entry%% *}
    t=${entry#* }
    target_dir=${CARGO_TARGET_DIR:-$fuzz_dir/target}
    log=$logs/$t.log
    echo "fuzz.sh: === $t (${secs}s)" >&2
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    cargo +nightly fuzz run --fuzz-dir "$fuzz_dir" --target-dir "$target_dir" "$t" -- \
        -max_total_time="$secs" -print_final_stats=1 ${FUZZ_ARGS:-} 2>&1 | tee "$log" | grep -E '^(#[0-9]+[[:space:]]+DONE|==[0-9]+==|INFO: Seed|Test unit written|SUMMARY)' >&2
    status=${PIPESTATUS[0]}
    execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$')
    rate=$(grep -Eo 'exec/s: *[0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$')
    if [ "$status" -ne 0 ]; then
        artifact=$(grep -Eo 'Test unit written to [^ ]+' "$log" | tail -1 | sed 's/^Test unit written to //')
        tail -n 40 "$log" >&2
        if [ -n "$artifact" ]; then
            # libFuzzer reports it relative to where cargo fuzz ran it (the fuzz dir).
            case $artifact in /*) ;; *) artifact=$fuzz_dir/${artifact#./} ;; esac
            echo "fuzz.sh: $t CRASHED (exit $status); artifact: $artifact" >&2
            echo "fuzz.sh: replay: cargo +nightly fuzz run --fuzz-dir $fuzz_dir $t $artifact" >&2
        else
            echo "fuzz.sh: $t FAILED (exit $status) without an artifact; log above" >&2
        fi
        summary+=("$(printf '%-16s %14s %10s  %s' "$t" "${execs:-?}" "${rate:-?}" "CRASH ${artifact:-}")")
        failed=1
        continue
    fi
    summary+=("$(printf '%-16s %14s %10s  %s' "$t" "${execs:-?}" "${rate:-?}" ok)")
done

printf '%-16s %14s %10s  %s\n' target execs exec/s result
printf '%s\n' "${summary[@]}"
exit $failed
