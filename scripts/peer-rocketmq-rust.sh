#!/usr/bin/env bash
# Starts and stops the crates.io Rust port of RocketMQ (github.com/mxsm/rocketmq-rust,
# installed by scripts/install-rocketmq-rust.sh into target/peers/bin) as a loadgen peer:
# one NameServer and one master broker on 127.0.0.1, on free ports, all state under DIR.
#
#   peer-rocketmq-rust.sh start --flush sync|async --dir DIR   # prints NAMESRV=127.0.0.1:port
#   peer-rocketmq-rust.sh probe --dir DIR                      # GET_BROKER_CLUSTER_INFO (code 106)
#   peer-rocketmq-rust.sh stop --dir DIR
#
# stdout carries only KEY=value lines (NAMESRV=..., BROKER=...), so `eval "$(... start ...)"`
# works; progress and errors go to stderr. `start` returns once both processes listen
# and the NameServer's cluster info lists the broker (so autoCreateTopicEnable routes
# work at once). DIR gets namesrv.pid, broker.pid, namesrv.log, broker.log, broker.conf
# and store/. `stop` stops only the pids recorded in DIR (TERM, then KILL after
# STOP_WAIT_SECS), after checking that they still run these binaries.
#
# What differs from Java RocketMQ (rocketmq-rust 1.0.0):
# - Binaries are rocketmq-namesrv-rust and rocketmq-broker-rust (crates rocketmq-namesrv
#   and rocketmq-broker); there are no mqnamesrv/mqbroker shell wrappers or JVM options.
# - The broker refuses to start without ROCKETMQ_HOME set (any directory; we use DIR).
# - The broker reads TOML, or Java properties when the file ends in .conf/.properties
#   (converted; it writes a broker.conversion.json report next to the file and refuses
#   unknown keys, duplicate keys and DLedger settings). Java's names work: brokerIP1,
#   listenPort, haListenPort, namesrvAddr, storePathRootDir, flushDiskType,
#   autoCreateTopicEnable.
# - The NameServer takes its port and address as flags (--listenPort, --bindAddress,
#   --rocketmqHome, --kvConfigPath) instead of a properties file.
# - Its remoting server closes a connection silently when a JSON request header lacks
#   "serializeTypeCurrentRPC":"JSON" (Java defaults the field); Java clients and RingMQ's
#   client send it.
# - As in Java, the broker also binds listenPort-2 (fast/VIP port) and haListenPort
#   (default 10912, so it is set explicitly here); all three are checked free.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN_DIR="${ROCKETMQ_RUST_BIN_DIR:-$ROOT/target/peers/bin}"
NAMESRV_BIN="$BIN_DIR/rocketmq-namesrv-rust"
BROKER_BIN="$BIN_DIR/rocketmq-broker-rust"
START_WAIT_SECS=60
STOP_WAIT_SECS=10
LOG_TAIL_LINES=30

usage() {
    echo "usage: $0 start --flush sync|async --dir DIR | probe --dir DIR | stop --dir DIR" >&2
    exit 2
}

[ $# -ge 1 ] || usage
CMD="$1"
shift
FLUSH=""
DIR=""
while [ $# -gt 0 ]; do
    case "$1" in
        --flush) FLUSH="${2:-}"; shift 2 ;;
        --dir) DIR="${2:-}"; shift 2 ;;
        *) usage ;;
    esac
done
[ -n "$DIR" ] || usage

log() { echo "peer-rocketmq-rust: $*" >&2; }

# Prints the pid recorded in DIR/NAME.pid if that process still runs BINARY.
live_pid() {
    local name="$1" binary="$2" pid
    [ -f "$DIR/$name.pid" ] || return 1
    pid="$(cat "$DIR/$name.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "$(basename "$binary")" || return 1
    echo "$pid"
}

stop_one() {
    local name="$1" binary="$2" pid i
    if pid="$(live_pid "$name" "$binary")"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < STOP_WAIT_SECS * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name (pid $pid) did not stop within ${STOP_WAIT_SECS}s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        log "stopped $name (pid $pid)"
    fi
    rm -f "$DIR/$name.pid"
}

# GET_BROKER_CLUSTER_INFO (request code 106) to the NameServer: a RocketMQ remoting
# frame (4-byte total length, 4-byte header length with serialize type 0 = JSON in the
# top byte, JSON header). Prints the response header and body; exit 0 when it answered
# with code 0 (and, with EXPECT, when the body mentions that text).
probe() {
    python3 - "$1" "${2:-}" <<'PY'
import json, socket, struct, sys
addr, expect = sys.argv[1], sys.argv[2]
host, port = addr.rsplit(":", 1)
# rocketmq-rust closes the connection without a word when serializeTypeCurrentRPC is
# missing (Java's server defaults it); Java clients always send it.
header = json.dumps({"code": 106, "language": "JAVA", "version": 401, "opaque": 1,
                     "flag": 0, "extFields": {}, "serializeTypeCurrentRPC": "JSON"}).encode()
frame = struct.pack(">II", 4 + len(header), len(header)) + header
with socket.create_connection((host, int(port)), timeout=5) as s:
    s.sendall(frame)
    def read(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise SystemExit("connection closed by %s" % addr)
            buf += chunk
        return buf
    total, = struct.unpack(">I", read(4))
    if total > 64 * 1024 * 1024:
        raise SystemExit("frame too large: %d" % total)
    rest = read(total)
    word, = struct.unpack(">I", rest[:4])
    kind, hlen = word >> 24, word & 0xFFFFFF
    head, body = rest[4:4 + hlen], rest[4 + hlen:]
    print("serialize type %d, header %s" % (kind, head.decode(errors="replace")))
    print("body %s" % body.decode(errors="replace"))
    code = json.loads(head).get("code") if kind == 0 else None
    ok = code == 0 and (not expect or expect.encode() in body)
    sys.exit(0 if ok else 1)
PY
}

# Free ports: one for the NameServer, and P with P-2 and P+1 free for the broker.
pick_ports() {
    python3 - <<'PY'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p))
        return True
    except OSError:
        return False
    finally:
        s.close()
rng = random.SystemRandom()
while True:
    n = rng.randrange(20000, 60000)
    b = rng.randrange(20000, 60000)
    ports = {n, b - 2, b, b + 1}
    if len(ports) == 4 and all(free(p) for p in ports):
        print(n, b)
        break
PY
}

wait_listen() {
    local name="$1" port="$2" pid="$3" i
    for ((i = 0; i < START_WAIT_SECS * 10; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "$name exited during start-up; end of $DIR/$name.log:"
            tail -n "$LOG_TAIL_LINES" "$DIR/$name.log" >&2 || true
            return 1
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    log "$name does not listen on $port after ${START_WAIT_SECS}s; end of $DIR/$name.log:"
    tail -n "$LOG_TAIL_LINES" "$DIR/$name.log" >&2 || true
    return 1
}

case "$CMD" in
    start)
        case "$FLUSH" in
            sync) FLUSH_TYPE=SYNC_FLUSH ;;
            async) FLUSH_TYPE=ASYNC_FLUSH ;;
            *) usage ;;
        esac
        for bin in "$NAMESRV_BIN" "$BROKER_BIN"; do
            if [ ! -x "$bin" ]; then
                log "$bin not found: run scripts/install-rocketmq-rust.sh"
                exit 1
            fi
        done
        mkdir -p "$DIR"
        DIR="$(cd "$DIR" && pwd)"
        if live_pid namesrv "$NAMESRV_BIN" >/dev/null || live_pid broker "$BROKER_BIN" >/dev/null; then
            log "already running in $DIR; run: $0 stop --dir $DIR"
            exit 1
        fi
        read -r NAMESRV_PORT BROKER_PORT < <(pick_ports)
        mkdir -p "$DIR/store" "$DIR/namesrv"
        cat > "$DIR/broker.conf" <<EOF
# Written by scripts/peer-rocketmq-rust.sh (Java properties; converted by the broker).
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerRole=ASYNC_MASTER
brokerIP1=127.0.0.1
listenPort=$BROKER_PORT
haListenPort=$((BROKER_PORT + 1))
namesrvAddr=127.0.0.1:$NAMESRV_PORT
storePathRootDir=$DIR/store
flushDiskType=$FLUSH_TYPE
autoCreateTopicEnable=true
EOF
        export ROCKETMQ_HOME="$DIR"
        nohup "$NAMESRV_BIN" --listenPort "$NAMESRV_PORT" --bindAddress 127.0.0.1 \
            --rocketmqHome "$DIR" --kvConfigPath "$DIR/namesrv/kvConfig.json" \
            > "$DIR/namesrv.log" 2>&1 < /dev/null &
        echo $! > "$DIR/namesrv.pid"
        if ! wait_listen namesrv "$NAMESRV_PORT" "$!"; then
            stop_one namesrv "$NAMESRV_BIN"
            exit 1
        fi
        nohup "$BROKER_BIN" -c "$DIR/broker.conf" > "$DIR/broker.log" 2>&1 < /dev/null &
        echo $! > "$DIR/broker.pid"
        if ! wait_listen broker "$BROKER_PORT" "$!"; then
            stop_one broker "$BROKER_BIN"
            stop_one namesrv "$NAMESRV_BIN"
            exit 1
        fi
        registered=""
        for ((i = 0; i < START_WAIT_SECS * 5; i++)); do
            if probe "127.0.0.1:$NAMESRV_PORT" "127.0.0.1:$BROKER_PORT" > /dev/null 2>&1; then
                registered=yes
                break
            fi
            sleep 0.2
        done
        if [ -z "$registered" ]; then
            log "the broker did not register with the NameServer within ${START_WAIT_SECS}s; end of $DIR/broker.log:"
            tail -n "$LOG_TAIL_LINES" "$DIR/broker.log" >&2 || true
            stop_one broker "$BROKER_BIN"
            stop_one namesrv "$NAMESRV_BIN"
            exit 1
        fi
        echo "127.0.0.1:$NAMESRV_PORT" > "$DIR/namesrv.addr"
        log "started ($FLUSH_TYPE) in $DIR"
        echo "NAMESRV=127.0.0.1:$NAMESRV_PORT"
        echo "BROKER=127.0.0.1:$BROKER_PORT"
        ;;
    probe)
        [ -f "$DIR/namesrv.addr" ] || { log "no $DIR/namesrv.addr: not started"; exit 1; }
        probe "$(cat "$DIR/namesrv.addr")"
        ;;
    stop)
        stop_one broker "$BROKER_BIN"
        stop_one namesrv "$NAMESRV_BIN"
        rm -f "$DIR/namesrv.addr"
        ;;
    *)
        usage
        ;;
esac
