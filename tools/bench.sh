#!/usr/bin/env bash
# The whole benchmark suite on this machine, in one command: about 2–3
# minutes on 2 CPUs, plus the release build when it is not up to date (the
# last run's time per step is in the summary of BENCHMARKS.md):
#
#   tools/bench.sh [RESULTS_DIR]        # default: bench-results/<UTC date-time>
#
# Steps, each with reduced sizes:
#   1. build      cargo build --release --workspace --bins (a -p build would
#                 resolve features differently and compile RocksDB again)
#   2. log        kappa-log-bench: append (every fsync policy, 1 and 8 writers),
#                 the raw-disk baseline (write+fdatasync, O_DSYNC), sequential read
#   3. http       a fresh `kappa serve` (free port, temp data dir): kappa-bench
#                 produce (fsync=always, batches of 1000, 8 connections; and
#                 1-record requests over 32 connections), consume and replay
#                 (group reset) of ~1,000,000 records
#   4. processor  kappa-processor-bench suite over 1,000,000 events
#   5. e2e        a fresh server: kappa-bench e2e at 10,000 events/s (produce →
#                 visible in an aggregate view, read-your-writes probes)
#   6. rebuild    a fresh server: kappa-bench rebuild of a view over 1,000,000 events
#   7. summary    kappa-bench summary: the table between the `bench.sh summary`
#                 markers of BENCHMARKS.md is replaced (the rest is kept)
#
# RESULTS_DIR receives every kappa-bench result (*.json, with the printed
# table as *.md), log-bench.md, processor-bench.md, timings.tsv and the
# servers' stderr logs. Servers are started on 127.0.0.1:0 and stopped with
# SIGTERM by their PID.
#
# Environment: SKIP_BUILD=1 uses the binaries as they are; CARGO_TARGET_DIR
# (default ~/.cache/kappa-target, as .ci/run); BIN_DIR (default
# $CARGO_TARGET_DIR/release); RUNS (default 3); TINY=1
# shrinks every size to a smoke test (seconds, figures meaningless);
# NO_SUMMARY=1 leaves BENCHMARKS.md alone; TMPDIR is where data goes;
# sizes: HTTP_SECS (5), E2E_SECS (10), PROC_EVENTS (1000000), REBUILD_EVENTS
# (1000000), PROC_CASES (the processor suite's cases, without the cache case).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The same build directory as .ci/run, so the release RocksDB build is shared
# and kept between runs (a cold one takes 20-30 minutes on 2 cores).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/kappa-target}
TARGET_DIR=$CARGO_TARGET_DIR
BIN_DIR=${BIN_DIR:-$TARGET_DIR/release}
OUT=${1:-$ROOT/bench-results/$(date -u +%Y%m%d-%H%M%S)}
RUNS=${RUNS:-3}

if [[ ${TINY:-0} == 1 ]]; then
    RUNS=1 LOG_ARGS=(--append-mb 4 --read-gb 0.004 --runs 1)
    HTTP_SECS=1 HTTP_WARMUP=0 READ_REQUESTS=20 PROC_EVENTS=20000
    E2E_SECS=2 REBUILD_EVENTS=20000
else
    LOG_ARGS=(--append-mb 128 --read-gb 0.25 --runs "$RUNS")
    HTTP_SECS=${HTTP_SECS:-5} HTTP_WARMUP=1 READ_REQUESTS=1000
    PROC_EVENTS=${PROC_EVENTS:-1000000} E2E_SECS=${E2E_SECS:-10}
    REBUILD_EVENTS=${REBUILD_EVENTS:-1000000}
fi
# Processor cases; a case whose first run takes over 30 s gets no more runs.
PROC_CASES=${PROC_CASES:-log-read,json-value,json-fields,tumbling,hopping,session}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
: >"$OUT/timings.tsv"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-suite.XXXXXX")
BENCH_NAME=bench.sh
# shellcheck source=tools/bench-server.sh
source "$ROOT/tools/bench-server.sh"

# step NAME COMMAND...: runs and times one step.
step() {
    local name=$1 t0=$SECONDS
    shift
    say "== $name"
    "$@"
    printf '%s\t%s\n' "$name" $((SECONDS - t0)) >>"$OUT/timings.tsv"
}

# kb NAME ARGS...: one kappa-bench run against $URL, its JSON and table saved.
kb() {
    local name=$1
    shift
    "$BIN_DIR/kappa-bench" --server "$URL" --json "$OUT/$name.json" "$@" | tee "$OUT/$name.md"
}

build() {
    (cd "$ROOT" && cargo build --release --workspace --bins)
}

log_bench() {
    "$BIN_DIR/kappa-log-bench" --dir "$SCRATCH" "${LOG_ARGS[@]}" | tee "$OUT/log-bench.md"
}

http_bench() {
    start_server http
    kb http-produce-always-c8 produce --topic p --create --partitions 1 --fsync always \
        --connections 8 --batch 1000 --record-bytes 100 --duration "$HTTP_SECS" \
        --warmup "$HTTP_WARMUP" --runs "$RUNS"
    kb http-produce-always-c32-batch1 produce --topic d --create --partitions 1 --fsync always \
        --connections 32 --batch 1 --record-bytes 100 --duration "$HTTP_SECS" \
        --warmup "$HTTP_WARMUP" --runs "$RUNS"
    # READ_REQUESTS × 1000 records to read back (not measured).
    "$BIN_DIR/kappa-bench" --server "$URL" produce --topic r --create --partitions 1 \
        --fsync never --connections 8 --batch 1000 --requests "$READ_REQUESTS" --warmup 0 >/dev/null
    kb http-consume consume --topic r --runs "$RUNS"
    kb http-replay-group replay --topic r --runs "$RUNS"
    stop_server
}

processor_bench() {
    "$BIN_DIR/kappa-processor-bench" suite --dir "$SCRATCH/processor" --events "$PROC_EVENTS" \
        --cases "$PROC_CASES" --max-run-secs 30 --runs "$RUNS" --output "$OUT/processor-bench.md" >/dev/null
    rm -rf "$SCRATCH/processor"
}

e2e_bench() {
    start_server e2e
    kb e2e-10k e2e --rate 10000 --duration "$E2E_SECS" --warmup 1 --connections 4 --batch 100 \
        --partitions 1 --fsync always --runs "$RUNS"
    stop_server
}

rebuild_bench() {
    start_server rebuild
    kb rebuild-1m rebuild --events "$REBUILD_EVENTS" --batch 1000 --connections 4 --runs "$RUNS"
    stop_server
}

say "results in $OUT"
t_all=$SECONDS
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    step build build
fi
for bin in kappa kappa-bench kappa-log-bench kappa-processor-bench; do
    [[ -x $BIN_DIR/$bin ]] || { say "missing $BIN_DIR/$bin: build first (or unset SKIP_BUILD)"; exit 1; }
done
t_suite=$SECONDS
step log log_bench
step http http_bench
step processor processor_bench
step e2e e2e_bench
step rebuild rebuild_bench
printf '%s\t%s\n' "suite (without build)" $((SECONDS - t_suite)) >>"$OUT/timings.tsv"
printf '%s\t%s\n' "total" $((SECONDS - t_all)) >>"$OUT/timings.tsv"

if [[ ${NO_SUMMARY:-0} != 1 ]]; then
    "$BIN_DIR/kappa-bench" summary --results "$OUT" --benchmarks "$ROOT/BENCHMARKS.md" \
        --command "tools/bench.sh $(basename "$OUT")"
fi
say "done in $((SECONDS - t_all)) s; results in $OUT"
