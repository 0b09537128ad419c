#!/usr/bin/env bash
# Runs the HTTP benchmarks of BENCHMARKS-http.md against a fresh release
# `kappa` server per configuration, with kappa-bench on the same machine.
#
#   cargo build --release -p kappa-server --bin kappa -p kappa-tools --bin kappa-bench
#   tools/bench-http.sh [OUT_DIR] [GROUP|CONFIG...]   # default: all three groups
#
# Groups and their configurations (a configuration can also be named alone):
#   produce  produce-{interval,always}-p{1,4}-c{1,8,32}: batches of 1000 records
#            of ~100 B over 1, 8, 32 connections, topic with 1 or 4 partitions
#   durable  durable-always-p{1,4}-c32-batch1: 1 record per request, 32 connections
#   read     read-p{1,4}: consume ~2 million records from the start
#
# Each configuration: a server on a fresh data directory under $TMPDIR
# (`kappa serve --listen 127.0.0.1:0`), `kappa-bench ... --runs 3` with a
# fresh topic per run (--recreate), stopped with SIGTERM afterwards.
# OUT_DIR (default bench-http-out) receives one .json and one .md per
# configuration; the .md files are the tables kappa-bench printed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The binaries (override when CARGO_TARGET_DIR is elsewhere).
KAPPA_BIN=${KAPPA_BIN:-$ROOT/target/release/kappa}
BENCH_BIN=${BENCH_BIN:-$ROOT/target/release/kappa-bench}
OUT=${1:-bench-http-out}
shift || true
TO_RUN=${*:-produce durable read}
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
mkdir -p "$OUT"

for bin in "$KAPPA_BIN" "$BENCH_BIN"; do
    [[ -x $bin ]] || { echo "missing $bin: build the release binaries first" >&2; exit 1; }
done
KAPPA=("$KAPPA_BIN")
BENCH=("$BENCH_BIN")

SERVER_PID=
DATA_DIR=
URL=

# Percent of all CPUs busy over one second (from /proc/stat).
cpu_busy() {
    local a b
    read -ra a < /proc/stat
    sleep 1
    read -ra b < /proc/stat
    local busy=0 total=0 i
    for i in 1 2 3 4 5 6 7 8; do
        total=$((total + b[i] - a[i]))
        ((i == 4 || i == 5)) || busy=$((busy + b[i] - a[i]))
    done
    echo $((100 * busy / (total > 0 ? total : 1)))
}

# On a shared machine, waits (up to QUIET_MAX_WAIT seconds, default 1800)
# until the CPUs have been < 10% busy for 5 s in a row; QUIET=0 skips this.
wait_quiet() {
    [[ ${QUIET:-1} != 0 ]] || return 0
    local quiet=0 waited=0
    while ((quiet < 5 && waited < ${QUIET_MAX_WAIT:-1800})); do
        if (($(cpu_busy) < 10)); then quiet=$((quiet + 1)); else quiet=0; fi
        waited=$((waited + 1))
    done
    ((quiet >= 5)) || echo "warning: the machine is still busy; measuring anyway" >&2
}

start_server() {
    wait_quiet
    DATA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-data.XXXXXX")
    local out=$DATA_DIR.stdout
    "${KAPPA[@]}" serve --data-dir "$DATA_DIR" --listen 127.0.0.1:0 >"$out" 2>"$DATA_DIR.stderr" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        grep -q '^listening on ' "$out" 2>/dev/null && break
        sleep 0.1
    done
    URL=http://$(awk '/^listening on /{print $3}' "$out")
    [[ $URL != http:// ]] || { echo "server did not start" >&2; cat "$DATA_DIR.stderr" >&2; exit 1; }
}

stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID" || true
    rm -rf "$DATA_DIR" "$DATA_DIR.stdout" "$DATA_DIR.stderr"
    SERVER_PID=
}
trap stop_server EXIT

# bench NAME ARGS...: one kappa-bench invocation on a fresh server.
bench() {
    local name=$1
    shift
    start_server
    echo "== $name ($URL)" >&2
    "${BENCH[@]}" --url "$URL" --json "$OUT/$name.json" "$@" | tee "$OUT/$name.md"
    stop_server
}

# read_config NAME PARTITIONS: ~2 million records written (not measured), then read.
read_config() {
    local name=$1 partitions=$2
    start_server
    echo "== $name ($URL)" >&2
    # 2,000 counted requests of 1,000 records, plus the few in flight at the end.
    "${BENCH[@]}" --url "$URL" produce --topic "r$partitions" --create \
        --partitions "$partitions" --fsync never --connections 8 --batch 1000 \
        --record-bytes 100 --requests 2000 --warmup 0 >/dev/null
    "${BENCH[@]}" --url "$URL" --json "$OUT/$name.json" consume --topic "r$partitions" \
        --runs "$RUNS" | tee "$OUT/$name.md"
    stop_server
}

# run_config NAME: one configuration, its parameters read from its name.
run_config() {
    local name=$1 fsync partitions connections
    case $name in
    produce-*-p*-c*)
        IFS=- read -r _ fsync partitions connections <<<"$name"
        partitions=${partitions#p} connections=${connections#c}
        bench "$name" produce --topic "t$partitions" --create --recreate \
            --partitions "$partitions" --fsync "$fsync" --connections "$connections" \
            --batch 1000 --record-bytes 100 --duration "$DURATION" --warmup "$WARMUP" \
            --runs "$RUNS"
        ;;
    durable-always-p*-c32-batch1)
        partitions=${name#durable-always-p} partitions=${partitions%%-*}
        bench "$name" produce --topic "d$partitions" --create --recreate \
            --partitions "$partitions" --fsync always --connections 32 --batch 1 \
            --record-bytes 100 --duration "$DURATION" --warmup "$WARMUP" --runs "$RUNS"
        ;;
    read-p*) read_config "$name" "${name#read-p}" ;;
    *)
        echo "unknown configuration $name" >&2
        exit 1
        ;;
    esac
}

# Expands group names into their configurations.
configs() {
    local item
    for item in "$@"; do
        case $item in
        produce) echo produce-{interval,always}-p{1,4}-c{1,8,32} ;;
        durable) echo durable-always-p{1,4}-c32-batch1 ;;
        read) echo read-p{1,4} ;;
        *) echo "$item" ;;
        esac
    done
}

for name in $(configs $TO_RUN); do
    run_config "$name"
done
