#!/usr/bin/env bash
# Kafka-protocol throughput (issue 17): kcat (librdkafka, Debian's package)
# produces RECORDS records of 100 bytes to a 1-partition topic and consumes
# them back, against Kappa's --kafka-listen (topic fsync=always: acknowledged
# from disk) and against the peer tansu (memory storage: acknowledged from
# memory), one fresh topic per run; then Kappa's HTTP produce at batch 1000
# (kappa-bench, 8 connections, fsync=always) in the same run, side by side.
#
#   cargo build --release --workspace --bins
#   cargo install tansu --version 0.6.0 --features dynostore --root ~/.cache/tansu
#   tools/bench-kafka.sh [OUT_DIR]
#
# Environment: KAPPA_BIN, BENCH_BIN (default target/release/ or
# $CARGO_TARGET_DIR/release/), TANSU_BIN (default ~/.cache/tansu/bin/tansu;
# skipped when missing), RECORDS (default 2000000), RUNS (default 3).
# Prints one line per run and a Markdown table of medians; OUT_DIR (default
# bench-kafka-out) keeps the logs and the table.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KAPPA_BIN=${KAPPA_BIN:-$TARGET/release/kappa}
BENCH_BIN=${BENCH_BIN:-$TARGET/release/kappa-bench}
TANSU_BIN=${TANSU_BIN:-$HOME/.cache/tansu/bin/tansu}
RECORDS=${RECORDS:-2000000}
RUNS=${RUNS:-3}
OUT=${1:-bench-kafka-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

for bin in "$KAPPA_BIN" "$BENCH_BIN"; do
    [[ -x $bin ]] || { echo "missing $bin: build the release binaries first" >&2; exit 1; }
done
command -v kcat >/dev/null || { echo "kcat is missing (apt-get install kcat)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-kafka.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
rate() { python3 -c "print(round($1 / ($3 - $2)))"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# The input: RECORDS values of exactly 100 bytes, one per line.
INPUT=$WORK/records.txt
python3 - "$RECORDS" > "$INPUT" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout
for i in range(n):
    out.write(f"{i:012d}" + "x" * 88 + "\n")
EOF

# produce_consume SYSTEM BROKER TOPIC: one run; appends "produce consume"
# records/s to $OUT/SYSTEM.runs.
produce_consume() {
    local system=$1 broker=$2 topic=$3
    local t0 t1 t2 t3 got
    t0=$(now)
    kcat -b "$broker" -P -t "$topic" -X linger.ms=5 -X batch.size=1000000 < "$INPUT" \
        2>> "$OUT/$system.kcat.log"
    t1=$(now)
    got=$(kcat -b "$broker" -C -t "$topic" -o beginning -e -q -f '%s\n' 2>> "$OUT/$system.kcat.log" | wc -l)
    t2=$(now)
    [[ $got == "$RECORDS" ]] || { echo "$system: consumed $got of $RECORDS" >&2; exit 1; }
    local p c
    p=$(rate "$RECORDS" "$t0" "$t1")
    c=$(rate "$RECORDS" "$t1" "$t2")
    echo "$system $topic: produce $p records/s ($(python3 -c "print(round($t1-$t0, 2))") s), consume $c records/s"
    echo "$p $c" >> "$OUT/$system.runs"
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
    produce_consume kappa "$KAFKA" "k$run"
done
"$BENCH_BIN" --url "http://$HTTP" --json "$OUT/http.json" produce --topic h --create --recreate \
    --partitions 1 --fsync always --connections 8 --batch 1000 --record-bytes 100 \
    --duration 10 --warmup 2 --runs "$RUNS" > "$OUT/http.md"
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true

# --- tansu (memory storage) ------------------------------------------------
TANSU_ROW="| tansu 0.6.0 (memory) | not run: $TANSU_BIN missing | |"
if [[ -x $TANSU_BIN ]]; then
    : > "$OUT/tansu.runs"
    PORT=$(free_port)
    "$TANSU_BIN" broker --listener-url "tcp://127.0.0.1:$PORT" \
        --advertised-listener-url "tcp://127.0.0.1:$PORT" --storage-engine memory://tansu/ \
        > "$OUT/tansu.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do kcat -b "127.0.0.1:$PORT" -L -m 1 > /dev/null 2>&1 && break; sleep 0.1; done
    for run in $(seq "$RUNS"); do
        "$TANSU_BIN" topic create --broker "tcp://127.0.0.1:$PORT" "t$run" --partitions 1 \
            >> "$OUT/tansu.log" 2>&1
        produce_consume tansu "127.0.0.1:$PORT" "t$run"
    done
    TANSU_ROW="| tansu 0.6.0 (memory, acknowledged from memory) | $(cut -d' ' -f1 "$OUT/tansu.runs" | median) | $(cut -d' ' -f2 "$OUT/tansu.runs" | median) |"
fi

HTTP_RATE=$(python3 -c "
import json
rows = json.load(open('$OUT/http.json'))['summary']
print(round(next(r['spread']['median'] for r in rows if r['name'] == 'records/s')))" 2>/dev/null || echo "see http.md")
{
    echo "| server and protocol ($RECORDS records of 100 B, 1 partition, $RUNS runs) | produce records/s (median) | consume records/s (median) |"
    echo "|---|--:|--:|"
    echo "| Kappa, Kafka protocol, kcat (fsync=always) | $(cut -d' ' -f1 "$OUT/kappa.runs" | median) | $(cut -d' ' -f2 "$OUT/kappa.runs" | median) |"
    echo "$TANSU_ROW"
    echo "| Kappa, HTTP, kappa-bench batch 1000 x 8 connections (fsync=always) | $HTTP_RATE | |"
} | tee "$OUT/table.md"
