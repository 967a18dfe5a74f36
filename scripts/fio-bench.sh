#!/usr/bin/env bash
# fio baselines for `loadgen store-bench`: sequential O_DIRECT writes, with and without
# `fdatasync=1` (one fdatasync per write = one "commit"), on a given directory.
#
# This file is the single definition of the fio jobs: `loadgen store-bench` embeds it
# (include_str!) and runs its `job` mode, so the standalone runs and the bench agree.
#
# Usage:
#   scripts/fio-bench.sh all DIR [BS_BYTES] [SIZE_BYTES] [RUNTIME_S]
#       Human run: 1 MiB write (iodepth 8), 1 MiB write + fdatasync, BS write (iodepth 1),
#       BS write + fdatasync. Defaults: BS 65536, SIZE 1 GiB, RUNTIME 5 s. Prints fio's
#       normal output.
#   scripts/fio-bench.sh job DIR BS_BYTES FDATASYNC(0|1) IODEPTH SIZE_BYTES RUNTIME_S RAMP_S
#       One job, fio JSON on stdout (what loadgen parses).
#
# Job shape: ioengine io_uring, direct=1, rw=write, time_based over a SIZE-byte file.
# `overwrite=1` lays the file out (writes it fully) before the timed phase, so the timed
# writes overwrite written blocks, as the RingMQ store overwrites its pre-zeroed segments
# (DESIGN.md §3); writing into fallocated/unwritten extents makes fdatasync far dearer.
# The file DIR/fio-bench.dat is kept between jobs (laid out once) and removed by `all`.
# Every fio run is bounded by `timeout` (layout + ramp + runtime + 120 s).
set -euo pipefail

die() { echo "fio-bench.sh: $*" >&2; exit 2; }
command -v fio >/dev/null 2>&1 || die "fio not found (run scripts/install-fio.sh)"

run_job() {
    local dir=$1 bs=$2 fdatasync=$3 iodepth=$4 size=$5 runtime=$6 ramp=$7 format=$8
    [[ $bs =~ ^[0-9]+$ && $bs -ge 4096 && $((bs % 4096)) -eq 0 ]] || die "BS_BYTES must be a positive multiple of 4096: $bs"
    [[ $fdatasync == 0 || $fdatasync == 1 ]] || die "FDATASYNC must be 0 or 1"
    [[ $iodepth =~ ^[0-9]+$ && $iodepth -ge 1 && $iodepth -le 256 ]] || die "IODEPTH must be 1..256"
    [[ $size =~ ^[0-9]+$ && $size -ge $bs ]] || die "SIZE_BYTES must be >= BS_BYTES"
    [[ $runtime =~ ^[0-9]+$ && $runtime -ge 1 && $runtime -le 600 ]] || die "RUNTIME_S must be 1..600"
    [[ $ramp =~ ^[0-9]+$ && $ramp -le 60 ]] || die "RAMP_S must be 0..60"
    mkdir -p "$dir"
    local sync_args=()
    if [[ $fdatasync == 1 ]]; then sync_args=(--fdatasync=1); fi
    timeout $((runtime + ramp + 120)) fio \
        --name="seqwrite-bs${bs}-qd${iodepth}-fdatasync${fdatasync}" \
        --filename="$dir/fio-bench.dat" \
        --ioengine=io_uring --direct=1 --rw=write \
        --bs="$bs" --iodepth="$iodepth" --size="$size" --overwrite=1 \
        --time_based --runtime="$runtime" --ramp_time="$ramp" \
        "${sync_args[@]}" \
        --output-format="$format"
}

mode=${1:-}
case "$mode" in
    job)
        [[ $# -eq 8 ]] || die "job takes 7 arguments: DIR BS_BYTES FDATASYNC IODEPTH SIZE_BYTES RUNTIME_S RAMP_S"
        run_job "$2" "$3" "$4" "$5" "$6" "$7" "$8" json
        ;;
    all)
        [[ $# -ge 2 && $# -le 5 ]] || die "usage: fio-bench.sh all DIR [BS_BYTES] [SIZE_BYTES] [RUNTIME_S]"
        dir=$2; bs=${3:-65536}; size=${4:-1073741824}; runtime=${5:-5}
        fstype=$(df -T "$(dirname "$dir/x")" 2>/dev/null | awk 'NR==2{print $2}' || true)
        [[ $fstype != tmpfs ]] || die "$dir is on tmpfs: O_DIRECT needs a real filesystem"
        trap 'rm -f "$dir/fio-bench.dat"' EXIT
        mib=$((1024 * 1024))
        run_job "$dir" $mib 0 8 "$size" "$runtime" 1 normal
        run_job "$dir" $mib 1 1 "$size" "$runtime" 1 normal
        run_job "$dir" "$bs" 0 1 "$size" "$runtime" 1 normal
        run_job "$dir" "$bs" 1 1 "$size" "$runtime" 1 normal
        ;;
    *)
        sed -n '2,20p' "$0" >&2
        exit 2
        ;;
esac
