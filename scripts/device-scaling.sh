#!/usr/bin/env bash
# Multi-core scaling benchmark: shard route mode with 1..16 shards on one many-core host.
#
# Runs a prebuilt `loadgen` (LOADGEN, default target/release/loadgen) against its embedded
# NameServer + broker for each shard count, two shapes each:
#   single: `produce --send-mode async --in-flight 64` (one message per request)
#   w2:     `produce --send-mode async --in-flight 4 --batch 16` (the suite's W2 request shape)
# Shards are pinned to cores 0..S-1 by the broker; loadgen's producer threads are unbound,
# so up to 8 shards the clients have cores of their own and beyond that they share.
#
# Usage: [SCALING_FLUSH=async|sync] scripts/device-scaling.sh OUT_DIR [SHARDS...]   (default shards: 1 2 4 8 12 16)
# Writes OUT_DIR/scaling.md (the table and the host facts), OUT_DIR/scaling.log (loadgen's
# output) and OUT_DIR/scaling-json.tar.gz (every run's OMB JSON with HDR histograms).
set -u
out=${1:?usage: device-scaling.sh OUT_DIR [SHARDS...]}
shift
shards=("$@")
[ ${#shards[@]} -eq 0 ] && shards=(1 2 4 8 12 16)
loadgen=${LOADGEN:-target/release/loadgen}
flush=${SCALING_FLUSH:-async}
secs=${SCALING_SECS:-6}
warm=${SCALING_WARMUP_SECS:-2}
mkdir -p "$out/json"
log="$out/scaling.log"
md="$out/scaling.md"
: >"$log"

# A directory that takes O_DIRECT writes (tmpfs and some overlays refuse them).
store_dir=""
for d in "$PWD/target/scaling-store" /var/tmp/ringmq-scaling /tmp/ringmq-scaling /root/ringmq-scaling; do
    mkdir -p "$d" 2>/dev/null || continue
    if dd if=/dev/zero of="$d/probe" bs=1M count=4 oflag=direct status=none 2>/dev/null; then
        rm -f "$d/probe"; store_dir=$d; break
    fi
done
ulimit -l unlimited 2>/dev/null || true
ulimit -n 65536 2>/dev/null || true

{
    echo "# Shard scaling, shard route mode (device run)"
    echo
    echo "- Date: $(date -u +%FT%TZ)"
    echo "- Host: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
    echo "- Store: ${store_dir:-none found} ($(df -T "${store_dir:-/}" 2>/dev/null | awk 'NR==2 {print $2}'))"
    echo "- Commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (uncommitted changes)')"
    echo "- loadgen: \`$loadgen produce --shards S --route-mode shard --flush $flush --send-mode async --duration-secs $secs --warmup-secs $warm --queues 4S --producers P …\`"
    echo "  (P = S for S ≤ 8, else 8; single: \`--in-flight 64\`; w2: \`--in-flight 4 --batch 16\`)"
    echo
    echo "| shards | shape | producers | msg/s | MiB/s (bodies) | send p50 / p99 ms | broker CPU-µs/msg | vs 1 shard |"
    echo "|---:|---|---:|---:|---:|---|---:|---:|"
} >"$md"
if [ -z "$store_dir" ]; then echo "no directory takes O_DIRECT writes" | tee -a "$md"; exit 1; fi

declare -A base
for shape in single w2; do
    for s in "${shards[@]}"; do
        p=$s; [ "$p" -gt 8 ] && p=8; [ "$p" -lt 2 ] && p=2
        q=$((4 * s)); [ "$q" -lt 8 ] && q=8
        if [ "$shape" = single ]; then shape_args=(--in-flight 64 --batch 1); else shape_args=(--in-flight 4 --batch 16); fi
        json="$out/json/scaling-$shape-$s.json"
        echo "== shape $shape, $s shard(s), $p producers" | tee -a "$log"
        timeout $((secs + warm + 60)) "$loadgen" produce --shards "$s" --route-mode shard --flush "$flush" --send-mode async \
            --producers "$p" --queues "$q" "${shape_args[@]}" --duration-secs "$secs" --warmup-secs "$warm" \
            --dir "$store_dir" --quiet --out "$json" >>"$log" 2>&1
        rc=$?
        if [ $rc -ne 0 ] || [ ! -s "$json" ]; then
            echo "| $s | $shape | $p | failed (rc $rc) | | | | |" >>"$md"; tail -5 "$log"; continue
        fi
        row=$(python3 - "$json" "$s" "$shape" "$p" "${base[$shape]:-}" <<'EOF'
import json, re, sys
path, s, shape, p, base = sys.argv[1:6]
doc = json.load(open(path))
r = doc["runs"][0]
ring = r.get("ringmq", {})
t = ring.get("totals", {})
msgs = t.get("sendRatePerSec", 0.0)
mib = t.get("sendMibPerSec", 0.0)
m = re.search(r"([0-9.]+) broker CPU-µs/msg", ring.get("config", ""))
fw = re.search(r"forwarded ([0-9.]+) %", ring.get("config", ""))
cpu_s = m.group(1) if m else "n/a"
ratio = f"{msgs / float(base):.2f}x" if base else "1.00x"
p50, p99 = r.get("aggregatedPublishLatency50pct", 0), r.get("aggregatedPublishLatency99pct", 0)
print(f"{msgs:.0f}@@| {s} | {shape} | {p} | {msgs:,.0f} | {mib:.1f} | {p50:.2f} / {p99:.2f} | {cpu_s} | {ratio} |")
EOF
)
        rate=${row%%@@*}
        [ -z "${base[$shape]:-}" ] && base[$shape]=$rate
        echo "${row#*@@}" >>"$md"
        echo "${row#*@@}"
    done
done
tar -C "$out" -czf "$out/scaling-json.tar.gz" json && rm -rf "$out/json"
rm -rf "$store_dir"
cat "$md"
