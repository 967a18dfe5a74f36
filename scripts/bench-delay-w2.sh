#!/bin/bash
# The delay-level benchmark beside a batch producer (results/delay-levels.md): a NameServer
# and a 1-shard broker (release build under target/ or $CARGO_TARGET_DIR), a batch producer
# alone, then beside 10 000 delay-level-1 messages per second; twice.
set -u
B=${CARGO_TARGET_DIR:-target}/release
dir=${TMPDIR:-/tmp}/ringmq-delay-w2; rm -rf $dir; mkdir -p $dir
$B/ringmq-namesrv --listen 127.0.0.1:0 > $dir/ns.log 2>&1 &
nspid=$!; sleep 0.5
ns=$(grep -o '127.0.0.1:[0-9]*' $dir/ns.log | head -1)
cat > $dir/broker.toml <<T
listen_port = 0
broker_ip = "127.0.0.1"
broker_name = "broker-w2"
shard_count = 1
store_root = "$dir/store"
namesrv_addrs = ["$ns"]
register_interval_ms = 2000
[store]
flush = "async"
segment_bytes = 268435456
disk_max_used_ratio = 1.0
disk_force_clean_ratio = 1.0
disk_refuse_ratio = 1.0
T
$B/ringmq-broker -c $dir/broker.toml > $dir/broker.log 2>&1 &
bpid=$!; sleep 2
for round in 1 2; do
  $B/loadgen produce -n "$ns" --topic W2Alone$round --producers 2 --batch 16 --in-flight 8 --duration-secs 12 --warmup-secs 3 --quiet --out $dir/alone-$round.json > /dev/null 2>&1
  $B/loadgen e2e -n "$ns" --topic Due$round --rate 10000 --delay-level 1 --duration-secs 22 --warmup-secs 3 --quiet --out $dir/due-$round.json > /dev/null 2>&1 &
  dpid=$!; sleep 5
  $B/loadgen produce -n "$ns" --topic W2With$round --producers 2 --batch 16 --in-flight 8 --duration-secs 12 --warmup-secs 3 --quiet --out $dir/with-$round.json > /dev/null 2>&1
  wait $dpid
  for f in alone-$round with-$round due-$round; do echo -n "$f: "; grep "^| RingMQ" $dir/$f.md | awk -F'|' '{print "sent", $5, "recv", $7, "send", $8, "e2e/lateness", $9}'; done
done
kill $bpid $nspid; wait 2>/dev/null
rm -rf "$dir"
