#!/usr/bin/env bash
# Starts and stops a local RingMQ cluster: one NameServer and brokers (broker-a,
# broker-b, ...), each a separate process with its own store, config and log under DIR.
#
#   scripts/cluster.sh start [--mode MODE] [--brokers N] [--shards N] [--flush sync|async]
#                            [--dir DIR] [--namesrv-port PORT] [--base-port PORT]
#   scripts/cluster.sh status [--dir DIR]
#   scripts/cluster.sh stop   [--dir DIR]          # SIGTERM: flush, checkpoint, clean stop
#
# MODE is one of RocketMQ's deployments:
#   single       one master (--brokers is ignored)
#   2m           --brokers masters (default 2), no slaves
#   2m-2s-async  --brokers ASYNC_MASTERs, each with one SLAVE (same broker name, id 1)
#   2m-2s-sync   --brokers SYNC_MASTERs, each with one SLAVE
# Ports: master i listens on BASE + i*STEP, its slaves connect to BASE + i*STEP + 1 + s
# (one replication port per shard s), its slave listens on BASE + i*STEP + STEP/2;
# STEP = 2 * (shards + 2). Stores: DIR/<name>-master-store, DIR/<name>-slave-store.
# Prints NAMESRV=127.0.0.1:PORT on start (pass it to clients: loadgen -n ...).
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=${1:-}
shift || true
brokers=2 shards=1 flush=async dir=target/local-cluster ns_port=9876 base_port=10911 mode=2m
while [[ $# -gt 0 ]]; do
    case $1 in
        --mode) mode=$2; shift 2 ;;
        --brokers) brokers=$2; shift 2 ;;
        --shards) shards=$2; shift 2 ;;
        --flush) flush=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --namesrv-port) ns_port=$2; shift 2 ;;
        --base-port) base_port=$2; shift 2 ;;
        *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $brokers =~ ^[1-9][0-9]?$ ]] || { echo "cluster.sh: --brokers must be 1..99" >&2; exit 2; }
[[ $flush == sync || $flush == async ]] || { echo "cluster.sh: --flush must be sync or async" >&2; exit 2; }
case $mode in
    single) brokers=1 master_role=async_master slaves=0 ;;
    2m) master_role=async_master slaves=0 ;;
    2m-2s-async) master_role=async_master slaves=1 ;;
    2m-2s-sync) master_role=sync_master slaves=1 ;;
    *) echo "cluster.sh: --mode must be single, 2m, 2m-2s-async or 2m-2s-sync" >&2; exit 2 ;;
esac
step=$((2 * (shards + 2)))

wait_port() { # port, pid, what
    for _ in $(seq 1 600); do
        if (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$2" 2>/dev/null || { echo "cluster.sh: $3 exited; see its log" >&2; return 1; }
        sleep 0.1
    done
    echo "cluster.sh: $3 not listening on $1 after 60 s" >&2
    return 1
}

case $cmd in
start)
    mkdir -p "$dir"
    abs_dir=$(cd "$dir" && pwd)
    if compgen -G "$dir/*.pid" >/dev/null; then
        echo "cluster.sh: $dir has pid files; run stop first" >&2
        exit 1
    fi
    cargo build --release -p ringmq-namesrv -p ringmq-broker
    "${CARGO_TARGET_DIR:-target}"/release/ringmq-namesrv --listen "127.0.0.1:$ns_port" >"$dir/namesrv.log" 2>&1 &
    echo $! >"$dir/namesrv.pid"
    wait_port "$ns_port" "$(cat "$dir/namesrv.pid")" namesrv
    names=(a b c d e f g h i j k l m n o p q r s t u v w x y z)
    for ((i = 0; i < brokers; i++)); do
        name="broker-${names[$((i % 26))]}$([[ $i -ge 26 ]] && echo $((i / 26)) || true)"
        port=$((base_port + i * step))
        for ((r = 0; r <= slaves; r++)); do
            if [[ $r -eq 0 ]]; then
                role=$master_role id=0 p=$port proc="$name-master" extra="ha_listen_port = $((port + 1))"
            else
                role=slave id=$r p=$((port + step / 2)) proc="$name-slave" extra="ha_master_address = \"127.0.0.1:$((port + 1))\"
slave_read_enable = true"
            fi
            cat >"$dir/$proc.toml" <<TOML
listen_port = $p
namesrv_addrs = ["127.0.0.1:$ns_port"]
broker_ip = "127.0.0.1"
broker_name = "$name"
broker_id = $id
role = "$role"
$extra
cluster_name = "DefaultCluster"
shard_count = $shards
store_root = "$abs_dir/$proc-store"
auto_create_topic = true

[store]
flush = "$flush"
TOML
            "${CARGO_TARGET_DIR:-target}"/release/ringmq-broker -c "$dir/$proc.toml" >"$dir/$proc.log" 2>&1 &
            echo $! >"$dir/broker-$proc.pid"
            wait_port "$p" "$(cat "$dir/broker-$proc.pid")" "$proc"
            echo "started $proc ($role) on 127.0.0.1:$p ($shards shard(s), $flush flush)" >&2
        done
    done
    echo "NAMESRV=127.0.0.1:$ns_port"
    ;;
status)
    for f in "$dir"/*.pid; do
        [[ -e $f ]] || { echo "no cluster in $dir"; exit 0; }
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then echo "$(basename "$f" .pid): running (pid $pid)"; else echo "$(basename "$f" .pid): not running"; fi
    done
    ;;
stop)
    for f in "$dir"/broker-*.pid "$dir"/namesrv.pid; do
        [[ -e $f ]] || continue
        pid=$(cat "$f")
        if kill -TERM "$pid" 2>/dev/null; then
            for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$pid" 2>/dev/null && { echo "cluster.sh: $(basename "$f" .pid) did not stop in 30 s; SIGKILL" >&2; kill -KILL "$pid" || true; }
        fi
        rm -f "$f"
        echo "stopped $(basename "$f" .pid)" >&2
    done
    ;;
*)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
