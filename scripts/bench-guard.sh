#!/usr/bin/env bash
# bench-guard: is HEAD (this work tree, uncommitted changes included) as fast as BASE?
#
#   scripts/bench-guard.sh BASE [--rounds N] [--secs S] [--warmup S] [--shapes a,b] [--out FILE]
#   scripts/bench-guard.sh BASE --report RUN_DIR   (the table again, from an earlier call's runs)
#   scripts/bench-guard.sh HEAD --head-args "--tls"  (one build, a setting against off)
#
# Builds BASE (any commit-ish) in a git worktree with a target directory of its own,
# builds HEAD here, then runs the two builds' loadgen alternately (the order flips
# every round, so drift on a shared machine hits both), >= 3 rounds each, on:
#   readme  the README's main job: `loadgen e2e` (2 producers x 64 in flight, 1 KiB,
#           1 consumer, embedded broker, async flush)
#   w2      the W2 shape: `e2e --producers 4 --in-flight 4 --batch 16 --consumers 1`
#   w1-1    W1: `produce --producers 1 --in-flight 1 --flush sync` (ack after fdatasync)
#   w1-32   W1 at 32 in flight
#   w3cold  W3's cold catch-up (not by default: --shapes ...,w3cold): 3 M messages of 128 B
#           produced in batches of 100, then read back by one consumer (pulls of 1024);
#           its rate is the read's
# It prints a table of medians and HEAD/BASE ratios, and exits 1 when HEAD is below
# 0.95x BASE's throughput or its send or end-to-end p99 exceeds 1.25x BASE's + 2 ms
# on any shape. Every run's OMB JSON is kept under the run directory it prints.
# --base-args / --head-args add loadgen flags to one side's runs (ACL: "--access-key K
# --secret-key S", TLS: "--tls"); when BASE is HEAD and the tree is clean, both sides run
# the one HEAD build, so the table compares the setting alone.
#
# Bounds: rounds 1..=20, seconds per run 1..=600. Needs: git, cargo, python3.
# BENCH_GUARD_WORKTREE / BENCH_GUARD_BASE_TARGET reuse a worktree and target dir.
set -euo pipefail

ROUNDS_MAX=20
SECS_MAX=600
THROUGHPUT_RATIO_MIN=0.95
P99_RATIO_MAX=1.25
P99_SLACK_MS=2

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
BASE=$1; shift
[[ "$BASE" == -* ]] && usage
rounds=3; secs=10; warmup=3; shapes="readme,w2,w1-1,w1-32"; out=""; report_dir=""; base_args=""; head_args=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --secs) secs=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --report) report_dir=$2; shift 2 ;;
    --base-args) base_args=$2; shift 2 ;;
    --head-args) head_args=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-guard: unknown argument $1" >&2; usage ;;
  esac
done
[[ "$rounds" =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le $ROUNDS_MAX ]] || { echo "bench-guard: --rounds must be 1..=$ROUNDS_MAX" >&2; exit 2; }
[[ "$secs" =~ ^[0-9]+$ && $secs -ge 1 && $secs -le $SECS_MAX ]] || { echo "bench-guard: --secs must be 1..=$SECS_MAX" >&2; exit 2; }
[[ "$warmup" =~ ^[0-9]+$ && $warmup -le 60 ]] || { echo "bench-guard: --warmup must be 0..=60" >&2; exit 2; }
[[ $rounds -ge 3 ]] || echo "bench-guard: warning: fewer than 3 rounds: ratios are noise on a shared machine" >&2

root=$(git rev-parse --show-toplevel)
cd "$root"
base_rev=$(git rev-parse --verify "$BASE^{commit}") || { echo "bench-guard: $BASE is not a commit" >&2; exit 2; }
head_rev=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no | wc -l)
IFS=',' read -r -a shape_list <<< "$shapes"
guard_dir="$root/target/bench-guard"
# Overridable, to reuse a worktree (and its build) made before.
wt="${BENCH_GUARD_WORKTREE:-$guard_dir/base-worktree}"
base_target="${BENCH_GUARD_BASE_TARGET:-$guard_dir/base-target}"
mkdir -p "$guard_dir"

if [[ -n "$report_dir" ]]; then
  # Only the table, from the runs of an earlier call (same shapes and rounds).
  run_dir=$report_dir
else
same_build=0
[[ "$base_rev" == "$head_rev" && $dirty -eq 0 ]] && same_build=1
if [[ $same_build -eq 0 ]]; then
# BASE in a worktree of its own (reused across calls; moved to BASE each time).
if [[ -d "$wt" ]]; then
  git -C "$wt" checkout --quiet --detach "$base_rev"
else
  git worktree add --quiet --detach "$wt" "$base_rev"
fi
echo "bench-guard: building BASE ${base_rev:0:12} in $wt" >&2
(cd "$wt" && CARGO_TARGET_DIR="$base_target" cargo build --release --quiet -p ringmq-loadgen)
fi
echo "bench-guard: building HEAD ${head_rev:0:12}$([[ $dirty -gt 0 ]] && echo " + $dirty changed files")" >&2
cargo build --release --quiet -p ringmq-loadgen
base_bin="$base_target/release/loadgen"
head_bin="$root/target/release/loadgen"
[[ $same_build -eq 1 ]] && base_bin=$head_bin
[[ -x "$base_bin" && -x "$head_bin" ]] || { echo "bench-guard: a loadgen binary is missing" >&2; exit 2; }

run_dir="$guard_dir/run-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$run_dir"
fi
shape_args() {
  case "$1" in
    readme) echo "e2e" ;;
    w2) echo "e2e --producers 4 --in-flight 4 --batch 16 --consumers 1" ;;
    w1-1) echo "produce --producers 1 --in-flight 1 --flush sync" ;;
    w1-32) echo "produce --producers 1 --in-flight 32 --flush sync" ;;
    # W3's cold catch-up: a backlog of 128 B messages (batches of 100) read back by one
    # consumer with the largest pulls; the rate is the read's, from its start to its end.
    w3cold) echo "consume --message-bytes 128 --batch 100 --producers 2 --in-flight 8 --backlog-messages 3000000 --pull-batch-size 1024" ;;
    *) echo "bench-guard: unknown shape $1 (readme, w2, w1-1, w1-32, w3cold)" >&2; exit 2 ;;
  esac
}
for s in "${shape_list[@]}"; do shape_args "$s" >/dev/null; done

for ((r = 1; r <= rounds && ${#report_dir} == 0; r++)); do
  if (( r % 2 == 1 )); then order="base head"; else order="head base"; fi
  for s in "${shape_list[@]}"; do
    for who in $order; do
      bin=$base_bin; side_args=$base_args
      [[ $who == head ]] && { bin=$head_bin; side_args=$head_args; }
      json="$run_dir/$s-$who-$r.json"
      echo "bench-guard: round $r/$rounds $s $who" >&2
      # shellcheck disable=SC2046
      # A read with a target has no warm-up: it would eat the read.
      shape_warmup=$warmup; [[ $s == w3cold ]] && shape_warmup=0
      if ! "$bin" $(shape_args "$s") $side_args --duration-secs "$secs" --warmup-secs "$shape_warmup" --quiet --out "$json" > "$run_dir/$s-$who-$r.log" 2>&1; then
        echo "bench-guard: $s $who round $r failed; see $run_dir/$s-$who-$r.log" >&2
        tail -5 "$run_dir/$s-$who-$r.log" >&2
      fi
    done
  done
done

python3 - "$run_dir" "$shapes" "$rounds" "$base_rev" "$head_rev" "$dirty" "$THROUGHPUT_RATIO_MIN" "$P99_RATIO_MAX" "$P99_SLACK_MS" "$secs" "$warmup" "${out:-}" "$base_args" "$head_args" <<'PY'
import json, os, re, statistics, sys
run_dir, shapes, rounds, base_rev, head_rev, dirty, tmin, pmax, slack, secs, warmup, out, base_args, head_args = sys.argv[1:]
rounds, tmin, pmax, slack = int(rounds), float(tmin), float(pmax), float(slack)
shapes = shapes.split(",")
def load(path):
    try:
        with open(path) as f:
            run = json.load(f)["runs"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    rm = run.get("ringmq", {})
    totals = rm["totals"]
    cfg = rm.get("config", "")
    cpu = re.search(r"([0-9.]+) broker CPU-µs/msg", cfg)
    e2e = run.get("aggregatedEndToEndLatency99pct")
    return {
        # A read-back run (w3cold) sends nothing in its measured window: its rate is the read's.
        "rate": totals["sendRatePerSec"] or totals.get("receiveRatePerSec", 0.0),
        "send_p99": run["aggregatedPublishLatency99pct"],
        "e2e_p99": e2e if e2e is not None and run.get("consumersPerTopic", 0) > 0 and totals.get("received", 0) > 0 else None,
        "cpu": float(cpu.group(1)) if cpu else None,
        "errors": totals.get("sendFailed", 0),
    }
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def fmt(x, unit=""):
    return "–" if x is None else (f"{x:,.0f}" if unit == "msg/s" else f"{x:.2f}")
machine = {}
rows, failures = [], []
for s in shapes:
    got = {w: [load(os.path.join(run_dir, f"{s}-{w}-{r}.json")) for r in range(1, rounds + 1)] for w in ("base", "head")}
    m = {}
    for w in ("base", "head"):
        ok = [x for x in got[w] if x]
        if len(ok) < rounds:
            failures.append(f"{s}: {rounds - len(ok)} {w} run(s) produced no result")
        m[w] = {k: med([x[k] for x in ok]) for k in ("rate", "send_p99", "e2e_p99", "cpu")}
        m[w]["each"] = " / ".join(f"{x['rate']:,.0f}" if x else "failed" for x in got[w])
    b, h = m["base"], m["head"]
    ratio = h["rate"] / b["rate"] if b["rate"] and h["rate"] else None
    if ratio is None or ratio < tmin:
        failures.append(f"{s}: HEAD throughput {fmt(h['rate'], 'msg/s')} msg/s is {('%.2f' % ratio) if ratio else '?'}x BASE's {fmt(b['rate'], 'msg/s')} (minimum {tmin}x)")
    for k, name in (("send_p99", "send p99"), ("e2e_p99", "e2e p99")):
        if b[k] is None or h[k] is None:
            continue
        limit = b[k] * pmax + slack
        if h[k] > limit:
            failures.append(f"{s}: HEAD {name} {h[k]:.2f} ms exceeds {pmax}x BASE's {b[k]:.2f} ms + {slack:g} ms = {limit:.2f} ms")
    def r(k):
        return f"{h[k] / b[k]:.2f}x" if b[k] and h[k] is not None else "–"
    rows.append(f"| {s} | {fmt(b['rate'], 'msg/s')} | {fmt(h['rate'], 'msg/s')} | **{r('rate')}** | {fmt(b['send_p99'])} / {fmt(h['send_p99'])} | {fmt(b['e2e_p99'])} / {fmt(h['e2e_p99'])} | {fmt(b['cpu'])} / {fmt(h['cpu'])} | {m['base']['each']} ‖ {m['head']['each']} |")
for s in shapes:
    for w in ("base", "head"):
        try:
            with open(os.path.join(run_dir, f"{s}-{w}-1.json")) as f:
                machine = json.load(f)["runs"][0]["ringmq"]["machine"]
            break
        except (OSError, ValueError, KeyError):
            pass
    if machine:
        break
lines = [
    f"# bench-guard: HEAD {head_rev[:12]}{' + %s changed files' % dirty if dirty != '0' else ''} vs BASE {base_rev[:12]}",
    "",
    f"Machine: {machine.get('cpuModel', '?')}, {machine.get('cpuCount', '?')} CPUs, kernel {machine.get('kernel', '?')}, {machine.get('filesystem', '?')} at {machine.get('dataDir', '?')}; {machine.get('utc', '?')}.",
    f"{rounds} rounds, builds alternated (order flips every round), {secs} s + {warmup} s warm-up per run; medians. Runs: `{run_dir}`.",
    *([f"Extra loadgen flags: BASE `{base_args or '(none)'}`, HEAD `{head_args or '(none)'}`" + (" (one build: BASE is HEAD)." if base_rev == head_rev and dirty == "0" else ".")] if base_args or head_args else []),
    "",
    "| shape | BASE msg/s | HEAD msg/s | HEAD/BASE | send p99 ms (BASE / HEAD) | e2e p99 ms (BASE / HEAD) | broker CPU-µs/msg (BASE / HEAD) | each round, msg/s (BASE ‖ HEAD) |",
    "|---|---:|---:|---:|---|---|---|---|",
    *rows,
    "",
    f"Gate: HEAD ≥ {tmin}x BASE throughput; HEAD send and e2e p99 ≤ {pmax}x BASE + {slack:g} ms.",
    "",
    ("**FAIL**:\n" + "\n".join(f"- {f}" for f in failures)) if failures else "**PASS**",
]
text = "\n".join(lines) + "\n"
print(text)
if out:
    with open(out, "w") as f:
        f.write(text)
sys.exit(1 if failures else 0)
PY
