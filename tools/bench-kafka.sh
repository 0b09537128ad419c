#!/usr/bin/env bash
# Kafka-protocol throughput (issue 17): confluent-kafka (librdkafka 2.16,
# tools/kafka-load.py) produces RECORDS records of 100 bytes to a
# 1-partition topic and consumes them back, against Kappa's --kafka-listen (topic fsync=always: acknowledged
# from disk) and against the peer tansu (memory storage: acknowledged from
# memory), one fresh topic per run; then the lean Rust generators side by
# side on the same server: `kappa-bench kafka-produce` (Produce v9, 8
# connections x 5 and x 1 requests in flight, 1000 records a request) and
# `kappa-bench produce` over HTTP (8 connections, batch 1000), the same
# keyed 100-byte records, fsync=always, on 1 and on 4 partitions, then
# `kappa-bench kafka-consume` (Fetch) and `consume` (HTTP) reading them back.
#
#   cargo build --release --workspace --bins
#   cargo install tansu --version 0.6.0 --features dynostore --root ~/.cache/tansu
#   tools/bench-kafka.sh [OUT_DIR]
#
# Environment: KAPPA_BIN, BENCH_BIN (default target/release/ or
# $CARGO_TARGET_DIR/release/), TANSU_BIN (default ~/.cache/tansu/bin/tansu;
# skipped when missing), PYTHON (default the tests' venv,
# ~/.cache/kappa-kafka-venv/bin/python, which .ci/run makes), RECORDS
# (default 2000000), RUNS (default 3), SECS (measured seconds of each
# kappa-bench run, default 10, after a 2 s warm-up). Needs /usr/bin/time,
# curl, and disk for a run's records (a 12 s kappa-bench run can leave
# 5 GB; topics are dropped after use). Debian's kcat (librdkafka 2.0)
# cannot talk to tansu 0.6 (its ApiVersions answer is cut short for that
# client), so the load comes from the newer librdkafka of confluent-kafka.
# Prints one line per run and a Markdown table of medians; OUT_DIR (default
# bench-kafka-out) keeps the logs, kappa-bench's JSON and Markdown, and the
# table. Server cores = the server's CPU seconds over the phase's wall
# seconds; for kappa-bench rows the phase is its runs (warm-up included),
# and the generator's own cores are given too (2 CPUs on this machine).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KAPPA_BIN=${KAPPA_BIN:-$TARGET/release/kappa}
BENCH_BIN=${BENCH_BIN:-$TARGET/release/kappa-bench}
TANSU_BIN=${TANSU_BIN:-$HOME/.cache/tansu/bin/tansu}
RECORDS=${RECORDS:-2000000}
RUNS=${RUNS:-3}
SECS=${SECS:-10}
OUT=${1:-bench-kafka-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

for bin in "$KAPPA_BIN" "$BENCH_BIN"; do
    [[ -x $bin ]] || { echo "missing $bin: build the release binaries first" >&2; exit 1; }
done
PYTHON=${PYTHON:-${KAPPA_TEST_PYTHON:-$HOME/.cache/kappa-kafka-venv/bin/python}}
"$PYTHON" -c 'import confluent_kafka' || { echo "confluent-kafka missing for $PYTHON (.ci/run installs it)" >&2; exit 1; }
LOAD=("$PYTHON" "$ROOT/tools/kafka-load.py")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-kafka.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# CPU seconds the process PID has used so far (user + system).
cpu_seconds() { awk -v tck="$(getconf CLK_TCK)" '{print ($14 + $15) / tck}' "/proc/$1/stat"; }

# produce_consume SYSTEM BROKER TOPIC PID: one run; appends "produce
# consume produce-server-cores consume-server-cores" to $OUT/SYSTEM.runs
# (server cores = the server's CPU seconds over the phase's wall seconds).
produce_consume() {
    local system=$1 broker=$2 topic=$3 pid=$4
    local c0 c1 c2 produced consumed
    c0=$(cpu_seconds "$pid")
    produced=$("${LOAD[@]}" produce "$broker" "$topic" "$RECORDS")
    c1=$(cpu_seconds "$pid")
    consumed=$("${LOAD[@]}" consume "$broker" "$topic" "$RECORDS")
    c2=$(cpu_seconds "$pid")
    python3 - "$produced" "$consumed" "$c0" "$c1" "$c2" "$system $topic" >> "$OUT/$system.runs" <<'PY'
import json, sys
p, c = json.loads(sys.argv[1]), json.loads(sys.argv[2])
c0, c1, c2 = map(float, sys.argv[3:6])
row = [round(p["records_per_second"]), round(c["records_per_second"]),
       round((c1 - c0) / p["seconds"], 2), round((c2 - c1) / c["seconds"], 2)]
print(*row)
print(f"{sys.argv[6]}: produce {row[0]} records/s (server {row[2]} cores), "
      f"consume {row[1]} records/s (server {row[3]} cores)", file=sys.stderr)
PY
}

# kappa_bench NAME ARGS...: kappa-bench ARGS against the Kappa server with
# --json $OUT/NAME.json; writes "median-records/s server-cores
# generator-cores" to $OUT/NAME.row (cores over the runs' wall time).
kappa_bench() {
    local name=$1; shift
    local c0 c1
    c0=$(cpu_seconds "${PIDS[0]}")
    /usr/bin/time -f '%U %S' -o "$WORK/$name.time" \
        "$BENCH_BIN" --url "http://$HTTP" --json "$OUT/$name.json" "$@" > "$OUT/$name.md"
    c1=$(cpu_seconds "${PIDS[0]}")
    python3 - "$OUT/$name.json" "$c0" "$c1" "$(cat "$WORK/$name.time")" "$name" > "$OUT/$name.row" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
c0, c1 = float(sys.argv[2]), float(sys.argv[3])
user, system = map(float, sys.argv[4].split())
wall = sum(r["finished_unix_ms"] - r["started_unix_ms"] for r in report["runs"]) / 1000
rate = next(r["spread"]["median"] for r in report["summary"] if r["name"] == "records/s")
row = [round(rate), round((c1 - c0) / wall, 2), round((user + system) / wall, 2)]
print(*row)
print(f"{sys.argv[5]}: median {row[0]} records/s, server {row[1]} cores, "
      f"kappa-bench {row[2]} cores", file=sys.stderr)
PY
}

# --- Kappa over the Kafka protocol, then over HTTP -----------------------
: > "$OUT/kappa.runs"
"$KAPPA_BIN" serve --data-dir "$WORK/kappa" --listen 127.0.0.1:0 --kafka-listen 127.0.0.1:0 \
    > "$WORK/kappa.out" 2> "$OUT/kappa.log" &
PIDS+=($!)
for _ in $(seq 100); do [[ $(wc -l < "$WORK/kappa.out") -ge 2 ]] && break; sleep 0.1; done
HTTP=$(sed -n 1p "$WORK/kappa.out" | awk '{print $3}')
KAFKA=$(sed -n 2p "$WORK/kappa.out" | awk '{print $4}')
for run in $(seq "$RUNS"); do
    curl -sf -X POST "http://$HTTP/v1/topics" -H 'content-type: application/json' \
        -d "{\"name\":\"k$run\",\"partitions\":1,\"fsync\":\"always\"}" > /dev/null
    produce_consume kappa "$KAFKA" "k$run" "${PIDS[0]}"
done
# The same records through kcat (C, Debian's librdkafka 2.0; it cannot talk
# to tansu 0.6): values from a file, timed around the process.
if command -v kcat > /dev/null; then
    : > "$OUT/kappa-kcat.runs"
    python3 -c "import sys; sys.stdout.write(('x' * 100 + '\n') * $RECORDS)" > "$WORK/values.txt"
    for run in $(seq "$RUNS"); do
        curl -sf -X POST "http://$HTTP/v1/topics" -H 'content-type: application/json' \
            -d "{\"name\":\"c$run\",\"partitions\":1,\"fsync\":\"always\"}" > /dev/null
        c0=$(cpu_seconds "${PIDS[0]}"); t0=$(date +%s.%N)
        kcat -b "$KAFKA" -P -t "c$run" -X linger.ms=5 < "$WORK/values.txt" 2>> "$OUT/kcat.log"
        c1=$(cpu_seconds "${PIDS[0]}"); t1=$(date +%s.%N)
        got=$(kcat -b "$KAFKA" -C -t "c$run" -o beginning -e -q -f '%o\n' 2>> "$OUT/kcat.log" | wc -l)
        c2=$(cpu_seconds "${PIDS[0]}"); t2=$(date +%s.%N)
        [[ $got == "$RECORDS" ]] || { echo "kcat consumed $got of $RECORDS" >&2; exit 1; }
        python3 -c "
r=$RECORDS; print(round(r/($t1-$t0)), round(r/($t2-$t1)), round(($c1-$c0)/($t1-$t0),2), round(($c2-$c1)/($t2-$t1),2))" \
            | tee -a "$OUT/kappa-kcat.runs" | sed "s/^/kappa c$run (kcat): produce, consume, server cores: /"
    done
fi
# The lean generators: the same keyed 100-byte records, pre-built, over
# the Kafka protocol and over HTTP; a fresh topic per run.
COMMON=(--create --recreate --fsync always --connections 8 --batch 1000 --record-bytes 100
    --duration "$SECS" --warmup 2 --runs "$RUNS")
# kafka-produce with 1 request in flight per connection has HTTP's 8
# requests outstanding; with 5 (librdkafka's default) it has 40.
# Then both read back what the last run left in kp$p, over each protocol
# (one connection per partition, up to SECS seconds); topics are dropped
# after use, as a run leaves gigabytes.
for p in 1 4; do
    for f in 5 1; do
        kappa_bench "kafka-p$p-f$f" kafka-produce --kafka "$KAFKA" --topic "kp$p" --partitions "$p" \
            --in-flight "$f" "${COMMON[@]}"
    done
    kappa_bench "kafka-consume-p$p" kafka-consume --kafka "$KAFKA" --topic "kp$p" \
        --duration "$SECS" --runs "$RUNS"
    kappa_bench "http-consume-p$p" consume --topic "kp$p" --duration "$SECS" --runs "$RUNS"
    curl -sf -X DELETE "http://$HTTP/v1/topics/kp$p" > /dev/null
    kappa_bench "http-p$p" produce --topic "hp$p" --partitions "$p" "${COMMON[@]}"
    curl -sf -X DELETE "http://$HTTP/v1/topics/hp$p" > /dev/null
done
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true

# --- tansu (memory storage) ------------------------------------------------
TANSU_ROW="| tansu 0.6.0 (memory) | not run: $TANSU_BIN missing | | | | |"
if [[ -x $TANSU_BIN ]]; then
    : > "$OUT/tansu.runs"
    PORT=$(free_port)
    "$TANSU_BIN" broker --listener-url "tcp://127.0.0.1:$PORT" \
        --advertised-listener-url "tcp://127.0.0.1:$PORT" --storage-engine memory://tansu/ \
        > "$OUT/tansu.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q 'ready in' "$OUT/tansu.log" && break; sleep 0.1; done
    for run in $(seq "$RUNS"); do
        "$TANSU_BIN" topic create --broker "tcp://127.0.0.1:$PORT" "t$run" --partitions 1 \
            >> "$OUT/tansu.log" 2>&1
        produce_consume tansu "127.0.0.1:$PORT" "t$run" "${PIDS[1]}"
    done
    TANSU_ROW="| tansu 0.6.0 (memory: acknowledged from memory) | $(cut -d' ' -f1 "$OUT/tansu.runs" | median) | $(cut -d' ' -f2 "$OUT/tansu.runs" | median) | $(cut -d' ' -f3 "$OUT/tansu.runs" | median) | $(cut -d' ' -f4 "$OUT/tansu.runs" | median) | |"
fi

# A kappa-bench row of produce NAME: "| LABEL | records/s | | server cores | | generator cores |";
# of consume NAME: "| LABEL | | records/s | | server cores | generator cores |".
bench_row() {
    read -r rate server gen < "$OUT/$1.row"
    case $1 in
        *consume*) echo "| $2 | | $rate | | $server | $gen |" ;;
        *) echo "| $2 | $rate | | $server | | $gen |" ;;
    esac
}
{
    echo "| server and protocol ($RECORDS records of 100 B or ${SECS} s runs, $RUNS runs) | produce records/s | consume records/s | server cores, produce | server cores, consume | load generator cores |"
    echo "|---|--:|--:|--:|--:|--:|"
    echo "| Kappa, Kafka protocol, confluent-kafka, 1 partition (fsync=always: acknowledged from disk) | $(cut -d' ' -f1 "$OUT/kappa.runs" | median) | $(cut -d' ' -f2 "$OUT/kappa.runs" | median) | $(cut -d' ' -f3 "$OUT/kappa.runs" | median) | $(cut -d' ' -f4 "$OUT/kappa.runs" | median) | |"
    if [[ -s $OUT/kappa-kcat.runs ]]; then
        echo "| Kappa, Kafka protocol, kcat, 1 partition (fsync=always) | $(cut -d' ' -f1 "$OUT/kappa-kcat.runs" | median) | $(cut -d' ' -f2 "$OUT/kappa-kcat.runs" | median) | $(cut -d' ' -f3 "$OUT/kappa-kcat.runs" | median) | $(cut -d' ' -f4 "$OUT/kappa-kcat.runs" | median) | |"
    fi
    echo "$TANSU_ROW"
    for p in 1 4; do
        for f in 5 1; do
            bench_row "kafka-p$p-f$f" "Kappa, Kafka protocol, kappa-bench kafka-produce 8 connections x $f in flight, batch 1000, $p partition(s) (fsync=always)"
        done
        bench_row "http-p$p" "Kappa, HTTP, kappa-bench produce 8 connections, batch 1000, $p partition(s) (fsync=always)"
        bench_row "kafka-consume-p$p" "Kappa, Kafka protocol, kappa-bench kafka-consume (Fetch v12, 16 MiB), $p partition(s)"
        bench_row "http-consume-p$p" "Kappa, HTTP, kappa-bench consume (10,000 records a read), $p partition(s)"
    done
} | tee "$OUT/table.md"
