#!/usr/bin/env bash
# Issue 14's benchmark: Kappa building the seed's `purchase_stats` view from
# its log, side by side with DuckDB running the same GROUP BY over the same
# NDJSON file, on this machine, in one run.
#
#   tools/bench-duckdb.sh [RESULTS_DIR]   # default: /var/tmp/kappa-bench-duckdb-<UTC date-time>
#
# For each EVENTS count: `kappa-datagen purchases --count N --out FILE` (the
# seed's user_events: user_id, event_type, amount, event_time; a temp dir
# outside the repo, deleted at the end). Then for each PARTITIONS × PARALLELISM:
#   1. a fresh `kappa serve --data-dir TMP --listen 127.0.0.1:0` (stopped by
#      PID, its data dir deleted afterwards) and `kappa-bench build --file FILE
#      --partitions P [--parallelism N] --runs RUNS`: the file is loaded once
#      into topic user_events (records keyed by user_id), then the view is
#      created RUNS times; build time = CREATE TABLE sent → the answer of a
#      read-your-writes read after the end of every partition (answered when
#      the view's committed offsets reach them);
#   2. DuckDB (`SET threads = DUCKDB_THREADS`, default 2) RUNS times:
#      CREATE OR REPLACE TABLE .. AS the same aggregate over
#      read_ndjson(FILE, columns = the stream's declared columns), timed
#      around the whole statement (reading and parsing the file included).
# So Kappa and DuckDB runs alternate, configuration by configuration. The
# table at the end puts medians side by side with both engines' row counts
# and purchase totals (they must agree).
#
# DuckDB comes from a scratch venv outside the repo (VENV, default
# ~/.cache/kappa-duckdb-venv: `python3 -m venv` + `pip install duckdb`, made
# on first use). Binaries: BIN_DIR (default $CARGO_TARGET_DIR/release, with
# CARGO_TARGET_DIR defaulting to ~/.cache/kappa-target); build them first with
# `cargo build --release --workspace --bins`.
#
# Environment: EVENTS (default "2000000 10000000"), PARTITIONS ("1 4"),
# PARALLELISM ("1 2"; `none` sends no PARALLELISM clause — the server's
# default, one thread before issue 14's parallel engine), RUNS (3),
# DUCKDB_THREADS (2), DATAGEN_ARGS (extra kappa-datagen options, default
# none: seed 1, 1,000 users with Zipf skew 1, 1,000 events per second of
# event time), TMPDIR (where the events and data dirs go). An EVENTS count
# whose file and log would not fit in the free disk space (with 0.5 GB to
# spare) is skipped, and the table says so.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/kappa-target}
BIN_DIR=${BIN_DIR:-$TARGET_DIR/release}
VENV=${VENV:-$HOME/.cache/kappa-duckdb-venv}
OUT=${1:-/var/tmp/kappa-bench-duckdb-$(date -u +%Y%m%d-%H%M%S)}
EVENTS=${EVENTS:-2000000 10000000}
PARTITIONS=${PARTITIONS:-1 4}
PARALLELISM=${PARALLELISM:-1 2}
RUNS=${RUNS:-3}
DUCKDB_THREADS=${DUCKDB_THREADS:-2}
DATAGEN_ARGS=${DATAGEN_ARGS:-}
# Bytes per event: the NDJSON line (~161 B) plus its record in the log
# (the line, the key and the record framing), rounded up.
BYTES_PER_EVENT=420
SPARE_BYTES=$((512 << 20))

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-duckdb.XXXXXX")
BENCH_NAME=bench-duckdb.sh
# shellcheck source=tools/bench-server.sh
source "$ROOT/tools/bench-server.sh"

setup_venv() {
    if ! "$VENV/bin/python" -c 'import duckdb' 2>/dev/null; then
        say "creating $VENV with duckdb"
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install --quiet duckdb
    fi
    DUCKDB_VERSION=$("$VENV/bin/python" -c 'import duckdb; print(duckdb.__version__)')
    say "duckdb $DUCKDB_VERSION"
}

# The DuckDB side: the seed's aggregate over the NDJSON file, RUNS times.
# Event time, window start and end in epoch ms, as Kappa's view has them.
cat >"$SCRATCH/duckdb_build.py" <<'PY'
import json, statistics, sys, time
import duckdb

path, runs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
con = duckdb.connect()  # in memory
con.execute(f"SET threads = {threads}")
columns = ("{user_id: 'VARCHAR', event_type: 'VARCHAR', amount: 'DECIMAL(10,2)', "
           "event_time: 'TIMESTAMP'}")
query = f"""
CREATE OR REPLACE TABLE purchase_stats AS
SELECT user_id,
       (epoch_ms(event_time) // 300000) * 300000 AS window_start,
       (epoch_ms(event_time) // 300000) * 300000 + 300000 AS window_end,
       COUNT(*) AS purchase_count, SUM(amount) AS total_amount, AVG(amount) AS avg_amount
FROM read_ndjson('{path}', columns = {columns})
WHERE event_type = 'purchase'
GROUP BY ALL"""
times, cpu = [], []
for _ in range(runs):
    c0, t0 = time.process_time(), time.perf_counter()
    con.execute(query)
    times.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
rows, purchases = con.execute(
    "SELECT COUNT(*), SUM(purchase_count) FROM purchase_stats").fetchone()
events = con.execute(f"SELECT COUNT(*) FROM read_ndjson('{path}', columns = {columns})").fetchone()[0]
print(json.dumps({"times_s": times, "median_s": statistics.median(times),
                  "cpu_s": cpu, "median_cores": statistics.median([c / t for c, t in zip(cpu, times)]),
                  "rows": rows,
                  "purchases": int(purchases), "events": events, "threads": threads,
                  "query": " ".join(query.split())}))
PY

# The side-by-side table from the saved results.
cat >"$SCRATCH/table.py" <<'PY'
import json, re, sys
out = sys.argv[1]
def median(report, name):
    return next((r["spread"]["median"] for r in report["summary"] if r["name"] == name), None)
print("| events | partitions | parallelism | Kappa build | Kappa events/s | Kappa server cores busy "
      "| DuckDB | DuckDB events/s | DuckDB cores busy | Kappa / DuckDB time "
      "| rows Kappa / DuckDB | purchases Kappa / DuckDB |")
print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for line in open(f"{out}/runs.tsv"):
    name, events, partitions, parallelism = line.split()
    n = int(events)
    if name == "skipped":
        print(f"| {n:,} | – | – | skipped: not enough free disk | | | | | | | | |")
        continue
    d = json.load(open(f"{out}/{name}.duckdb.json"))
    ds = d["median_s"]
    duck = f"{ds:.2f} s | {n / ds:,.0f} | {d['median_cores']:.2f}"
    try:
        k = json.load(open(f"{out}/{name}.json"))
    except FileNotFoundError:
        text = open(f"{out}/{name}.stderr.log").read()
        m = re.search(r'"message":"([^"]{0,100})', text)
        reason = m.group(1) if m else text.strip().splitlines()[-1][:100]
        print(f"| {n:,} | {partitions} | {parallelism} | failed: {reason} | | | {duck} | "
              f"| – / {d['rows']:,} | – / {d['purchases']:,} |")
        continue
    ks = median(k, "build time")
    cores = median(k, "server cores busy")
    cores = "–" if cores is None else f"{cores:.2f}"
    print(f"| {n:,} | {partitions} | {parallelism} | {ks:.2f} s | {n / ks:,.0f} | {cores} "
          f"| {duck} | {ks / ds:.2f}× "
          f"| {median(k, 'view rows'):,.0f} / {d['rows']:,} "
          f"| {median(k, 'purchases counted'):,.0f} / {d['purchases']:,} |")
PY

machine_line() {
    local cpu mem
    cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
    mem=$(awk '/^MemTotal:/{printf "%.1f GiB RAM", $2 / 1048576}' /proc/meminfo)
    echo "Machine: $(nproc) CPUs ($cpu), $mem, $(uname -sr); data on $(df --output=source,fstype "$SCRATCH" | tail -1 | tr -s ' ')."
}

# One configuration: Kappa (a fresh server), then DuckDB on the same file.
run_config() {
    local file=$1 events=$2 partitions=$3 parallelism=$4
    local name=build-$events-p$partitions-par$parallelism extra=()
    [[ $parallelism == none ]] || extra=(--parallelism "$parallelism")
    say "== $name: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    start_server "$name"
    # A refused configuration (e.g. PARALLELISM before the server knows it)
    # is reported in the table; the other configurations still run.
    if ! "$BIN_DIR/kappa-bench" --server "$URL" --json "$OUT/$name.json" build --file "$file" \
        --partitions "$partitions" "${extra[@]}" --runs "$RUNS" --server-pid "$SERVER_PID" 2>"$OUT/$name.stderr.log" \
        | tee "$OUT/$name.md"; then
        say "$name failed: $(tail -1 "$OUT/$name.stderr.log")"
        rm -f "$OUT/$name.json"
    fi
    stop_server
    rm -rf "$SCRATCH/$name-data"
    say "== $name: duckdb, $RUNS runs, threads = $DUCKDB_THREADS"
    "$VENV/bin/python" "$SCRATCH/duckdb_build.py" "$file" "$RUNS" "$DUCKDB_THREADS" \
        | tee "$OUT/$name.duckdb.json"
    printf '%s\t%s\t%s\t%s\n' "$name" "$events" "$partitions" "$parallelism" >>"$OUT/runs.tsv"
}

for bin in kappa kappa-bench kappa-datagen; do
    [[ -x $BIN_DIR/$bin ]] || { say "missing $BIN_DIR/$bin: cargo build --release --workspace --bins"; exit 1; }
done
setup_venv
: >"$OUT/runs.tsv"
say "results in $OUT; scratch in $SCRATCH"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for events in $EVENTS; do
    free=$(df --output=avail -B1 "$SCRATCH" | tail -1)
    need=$((events * BYTES_PER_EVENT + SPARE_BYTES))
    if ((free < need)); then
        say "skipping $events events: needs about $((need >> 20)) MiB, $((free >> 20)) MiB free"
        printf 'skipped\t%s\t-\t-\n' "$events" >>"$OUT/runs.tsv"
        continue
    fi
    file=$SCRATCH/user_events-$events.ndjson
    # shellcheck disable=SC2086 # DATAGEN_ARGS is a list of options
    "$BIN_DIR/kappa-datagen" purchases --count "$events" $DATAGEN_ARGS --out "$file"
    say "$file: $(du -m "$file" | cut -f1) MiB"
    for partitions in $PARTITIONS; do
        for parallelism in $PARALLELISM; do
            run_config "$file" "$events" "$partitions" "$parallelism"
        done
    done
    rm -f "$file"
done

{
    echo "## bench-duckdb.sh ($(date -u +%Y-%m-%d)), kappa $(git -C "$ROOT" rev-parse --short HEAD)"
    echo
    machine_line
    echo "Load average at the start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "DuckDB $DUCKDB_VERSION (Python), threads = $DUCKDB_THREADS; medians of $RUNS runs each."
    echo
    "$VENV/bin/python" "$SCRATCH/table.py" "$OUT"
} | tee "$OUT/summary.md"
say "done; results in $OUT"
