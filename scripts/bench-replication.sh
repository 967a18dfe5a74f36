#!/usr/bin/env bash
# Replication benchmark, one run, side by side (issue 13): the same loadgen e2e workload
# against one broker with no slave, an ASYNC_MASTER with a slave and a SYNC_MASTER with a
# slave (each started fresh with scripts/cluster.sh, 1 broker name, SHARDS shards), while
# the slave's lag (GET_BROKER_RUNTIME_INFO haBehindBytes on the slave, haSlaveBehindBytes
# on the master) is sampled every 100 ms. Writes results/replication.md (+ one json per
# row).
#
#   scripts/bench-replication.sh [--shards N] [--duration-secs S] [--rate MSG_PER_S]
set -euo pipefail
cd "$(dirname "$0")/.."
shards=1 duration=15 rate=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --shards) shards=$2; shift 2 ;;
        --duration-secs) duration=$2; shift 2 ;;
        --rate) rate="--rate $2"; shift 2 ;;
        *) echo "bench-replication.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
target=${CARGO_TARGET_DIR:-target}
cargo build --release -p ringmq-loadgen -p ringmq-broker -p ringmq-namesrv
out=results/replication.md
tmp=$(mktemp -d)
trap 'scripts/cluster.sh stop --dir "$tmp/c" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
{
    echo "# Replication: no slave vs ASYNC_MASTER vs SYNC_MASTER (one run)"
    echo
    echo "- Machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%d MiB", $2/1024}' /proc/meminfo), kernel $(uname -r)"
    echo "- Commit: $(git rev-parse HEAD) ($(git status --porcelain | wc -l) uncommitted paths)"
    echo "- Command: \`scripts/bench-replication.sh --shards $shards --duration-secs $duration ${rate}\`"
    echo "- When: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- Each row: scripts/cluster.sh (NameServer + broker-a master [+ slave], async flush with the"
    echo "  store's default 500 ms flush interval), then \`loadgen e2e -n … --duration-secs $duration --warmup-secs 3 $rate\`;"
    echo "  master, slave, NameServer and loadgen share this machine."
    echo
} >"$out"
ns_port=19876
for mode in 2m 2m-2s-async 2m-2s-sync; do
    dir="$tmp/c"
    rm -rf "$dir"
    scripts/cluster.sh start --mode "$mode" --brokers 1 --shards "$shards" --dir "$dir" --namesrv-port $ns_port --base-port 21000 >/dev/null
    master=127.0.0.1:21000
    step=$((2 * (shards + 2)))
    slave=127.0.0.1:$((21000 + step / 2))
    samples="$tmp/lag-$mode.txt"
    : >"$samples"
    (
        while true; do
            if [[ $mode != 2m ]]; then
                s=$(scripts/runtime-info.py "$slave" haBehindBytes 2>/dev/null || echo '{}')
                m=$(scripts/runtime-info.py "$master" haSlaveBehindBytes 2>/dev/null || echo '{}')
                echo "$s $m" >>"$samples"
            fi
            sleep 0.1
        done
    ) &
    sampler=$!
    "$target"/release/loadgen e2e -n 127.0.0.1:$ns_port --duration-secs "$duration" --warmup-secs 3 $rate --quiet \
        --out "$tmp/$mode.json" >"$tmp/$mode.log" 2>&1 || true
    kill $sampler 2>/dev/null || true
    wait $sampler 2>/dev/null || true
    scripts/cluster.sh stop --dir "$dir" >/dev/null 2>&1
    row=$(grep '^| RingMQ' "$tmp/$mode.md" 2>/dev/null || grep '^| RingMQ' "$tmp/$mode.log" || echo "| RingMQ | (no result: see log) |")
    lag=$(python3 - "$samples" <<'PY'
import json, sys
vals_s, vals_m = [], []
for line in open(sys.argv[1]):
    parts = line.strip().split("} {")
    if len(parts) != 2:
        continue
    s = json.loads(parts[0] + "}"); m = json.loads("{" + parts[1])
    if s.get("haBehindBytes") is not None: vals_s.append(int(s["haBehindBytes"]))
    if m.get("haSlaveBehindBytes") is not None: vals_m.append(int(m["haSlaveBehindBytes"]))
def pct(v, p):
    if not v: return "n/a"
    v = sorted(v); return str(v[min(len(v) - 1, int(len(v) * p))])
print(f"slave behind (bytes, its view) p50 {pct(vals_s, .5)} p99 {pct(vals_s, .99)} max {max(vals_s) if vals_s else 'n/a'}; "
      f"unconfirmed at the master (bytes) p50 {pct(vals_m, .5)} p99 {pct(vals_m, .99)} max {max(vals_m) if vals_m else 'n/a'}; {len(vals_s)} samples")
PY
)
    {
        echo "## $mode"
        echo
        echo '| system | config | durability | sent msg/s | MiB/s | recv msg/s | send p50/p90/p99/p99.9/max (ms) | end-to-end p50/p90/p99/p99.9/max (ms) | errors |'
        echo '|---|---|---|---:|---:|---:|---|---|---|'
        echo "$row"
        echo
        [[ $mode == 2m ]] || echo "Replication lag: $lag"
        echo
    } >>"$out"
    cp "$tmp/$mode.json" "results/replication-$mode.json" 2>/dev/null || true
done
echo "wrote $out" >&2
