#!/usr/bin/env bash
# Tiered storage (issue 40): the seed's purchase_stats replayed from a topic
# whose segments are in an object store, beside the same replay from a
# topic whose segments are on local disk, in interleaved rounds.
#
#   tools/bench-tiered.sh [RESULTS_DIR]   # default: /var/tmp/kappa-bench-tiered-<UTC date-time>
#
# Setup, once: `kappa-datagen purchases --count EVENTS --envelope`, one
# server with `tiered_storage_url` (STORE=dir: a directory on this disk,
# `file://`; STORE=s3: moto's S3 server on 127.0.0.1, from the Kafka
# clients' venv that tests/provision installs), two topics of PARTITIONS
# partitions and SEGMENT_MB MiB segments — `local`, and `tiered` with
# `local_retention_ms: 1` — each loaded with the file (NDJSON requests of
# 5,000 records, fsync=never); then waits until the background pass moved
# every sealed segment of `tiered` to the store.
#
# RUNS rounds; each round restarts the server (so no tiered segment is in
# the download cache and no view state is open) and runs, in a turned
# order, `kappa-bench build --reuse-topic --runs 1` over each topic: the
# seed's purchase_stats built from offset 0 (the CREATE TABLE until the
# view has committed every event). The tiered build downloads every
# segment through the segment cache as it reads. The table gives the
# medians.
#
# Settings (environment): EVENTS (2000000), PARTITIONS (1), SEGMENT_MB (16),
# RUNS (3), STORE (dir | s3), BIN_DIR (release binaries:
# ~/.cache/kappa-target/release; `cargo build --release --workspace --bins`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=bench-tiered
EVENTS=${EVENTS:-2000000}
PARTITIONS=${PARTITIONS:-1}
SEGMENT_MB=${SEGMENT_MB:-16}
RUNS=${RUNS:-3}
STORE=${STORE:-dir}
BIN_DIR=${BIN_DIR:-${CARGO_TARGET_DIR:-$HOME/.cache/kappa-target}/release}
OUT=${1:-/var/tmp/kappa-bench-tiered-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-tiered.XXXXXX")
# shellcheck source=tools/bench-server.sh
source "$ROOT/tools/bench-server.sh"

for bin in kappa kappa-bench kappa-datagen; do
    [[ -x $BIN_DIR/$bin ]] || { say "missing $BIN_DIR/$bin: cargo build --release --workspace --bins"; exit 1; }
done

MOTO_PID=
stop_moto() { [[ -z $MOTO_PID ]] || { kill "$MOTO_PID" 2>/dev/null || true; wait "$MOTO_PID" 2>/dev/null || true; }; }
trap 'cleanup; stop_moto' EXIT

case $STORE in
dir)
    url=file://$SCRATCH/store
    ;;
s3)
    venv=${KAPPA_KAFKA_VENV:-$HOME/.cache/kappa-kafka-venv}
    [[ -x $venv/bin/moto_server ]] || { say "moto is missing: run tests/provision"; exit 1; }
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"$OUT/moto.log" 2>&1 &
    MOTO_PID=$!
    export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=test \
        AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
    for _ in $(seq 300); do curl -sf "$AWS_ENDPOINT_URL" >/dev/null 2>&1 && break; sleep 0.1; done
    "$venv/bin/python" -c "import boto3; boto3.client('s3', endpoint_url='$AWS_ENDPOINT_URL').create_bucket(Bucket='kappa')"
    url=s3://kappa/segments
    ;;
*) say "STORE must be dir or s3"; exit 1 ;;
esac
conf=$SCRATCH/kappa.toml
printf 'retention_check_interval_ms = 200\ntiered_storage_url = "%s"\n' "$url" >"$conf"

file=$SCRATCH/events.ndjson
say "generating $EVENTS events"
"$BIN_DIR/kappa-datagen" purchases --count "$EVENTS" --envelope --out "$file"
split -l 5000 "$file" "$SCRATCH/chunk."

start_server data --config "$conf"
segment_bytes=$((SEGMENT_MB << 20))
for topic in local tiered; do
    extra=
    [[ $topic == tiered ]] && extra=', "local_retention_ms": 1'
    curl -sf -X POST "$URL/v1/topics" -H 'Content-Type: application/json' \
        -d "{\"name\": \"$topic\", \"partitions\": $PARTITIONS, \"segment_bytes\": $segment_bytes, \"fsync\": \"never\"$extra}" >/dev/null
    say "loading $topic"
    for chunk in "$SCRATCH"/chunk.*; do
        curl -sf -X POST "$URL/v1/topics/$topic/records" -H 'Content-Type: application/x-ndjson' \
            --data-binary "@$chunk" >/dev/null
    done
done
say "waiting for the sealed segments of tiered to move to $url"
for _ in $(seq 3000); do
    done_moving=$(curl -sf "$URL/v1/topics/tiered" | python3 -c '
import json, sys
t = json.load(sys.stdin)
# Every segment but each partition'"'"'s active one is remote.
print(all(p.get("remote_bytes", 0) > 0 and p["segment_count"] >= 2 for p in t["partitions"]))')
    [[ $done_moving == True ]] && break
    sleep 0.2
done
curl -sf "$URL/v1/topics/tiered" >"$OUT/tiered.topic.json"
curl -sf "$URL/v1/topics/local" >"$OUT/local.topic.json"
stop_server
rm -f "$SCRATCH"/chunk.*

topics=(local tiered)
for round in $(seq "$RUNS"); do
    turn=$(((round - 1) % 2))
    for topic in "${topics[@]:turn}" "${topics[@]:0:turn}"; do
        name=$topic.r$round
        start_server data --config "$conf"
        say "== round $round: $topic (load average $(cut -d' ' -f1-3 /proc/loadavg))"
        "$BIN_DIR/kappa-bench" --server "$URL" --json "$OUT/$name.json" build --reuse-topic \
            --topic "$topic" --stream "events_$topic" --view "stats_${topic}_r$round" --runs 1 \
            >"$OUT/$name.md" 2>"$OUT/$name.stderr.log" || { say "$name failed: $(tail -1 "$OUT/$name.stderr.log")"; rm -f "$OUT/$name.json"; }
        stop_server
    done
done

python3 - "$OUT" "$RUNS" "$EVENTS" "$STORE" <<'PY' | tee "$OUT/summary.md"
import json, statistics, sys
out, runs, events, store = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def build_s(path):
    report = json.load(open(path))
    return next(r["spread"]["median"] for r in report["summary"] if r["name"] == "build time")
tiered = json.load(open(f"{out}/tiered.topic.json"))
remote = sum(p.get("remote_bytes", 0) for p in tiered["partitions"])
total = sum(p["bytes"] for p in tiered["partitions"])
print(f"{events:,} seed events; tiered: {remote / 1e6:,.0f} of {total / 1e6:,.0f} MB in the store ({store})\n")
print("| topic | build purchase_stats from offset 0, s (median) | events/s | runs |")
print("|---|--:|--:|---|")
medians = {}
for topic in ["local", "tiered"]:
    times = []
    for r in range(1, runs + 1):
        try:
            times.append(build_s(f"{out}/{topic}.r{r}.json"))
        except (FileNotFoundError, StopIteration, json.JSONDecodeError):
            pass
    if not times:
        print(f"| {topic} | failed | | |")
        continue
    medians[topic] = statistics.median(times)
    print(f"| {topic} | {medians[topic]:.2f} | {events / medians[topic]:,.0f} | {', '.join(f'{t:.2f}' for t in times)} |")
if len(medians) == 2:
    print(f"\ntiered / local: {medians['tiered'] / medians['local']:.2f}x the time")
PY
say "results in $OUT"
