#!/usr/bin/env bash
# Issue 14's benchmark: Kappa building the seed's `purchase_stats` view from
# its log, side by side with DuckDB running the same GROUP BY over the same
# NDJSON file, on this machine, in one run.
#
#   tools/bench-duckdb.sh [RESULTS_DIR]   # default: /var/tmp/kappa-bench-duckdb-<UTC date-time>
#
# For each EVENTS count: `kappa-datagen purchases --count N --out FILE` (the
# seed's user_events: user_id, event_type, amount, event_time; a temp dir
# outside the repo, deleted at the end). Then for each PARTITIONS count:
#   1. a fresh `kappa serve --data-dir TMP --listen 127.0.0.1:0` (stopped by
#      PID, its data dir deleted afterwards); `kappa-bench build --file FILE
#      --partitions P --runs 1 --keep` loads the file once into topic
#      user_events (records keyed by user_id) and builds the view once, a
#      warm-up that is not counted;
#   2. RUNS rounds. A round is one build per PARALLELISM (`kappa-bench build
#      --reuse-topic [--parallelism N] --runs 1`; build time = CREATE TABLE
#      sent → the answer of a read-your-writes read after the end of every
#      partition, answered when the view's committed offsets reach them)
#      and one DuckDB run (`SET threads = DUCKDB_THREADS`, default 2; a
#      fresh process timing CREATE OR REPLACE TABLE .. AS the same
#      aggregate over read_ndjson(FILE, columns = the stream's declared
#      columns), reading and parsing the file included), and the machine's
#      own speed-up of two busy processes over one (a fixed CPU loop in
#      Python, timed alone, in two processes at once, alone again: on a VM two
#      busy vCPUs need not give twice one's work), and the user's path
#      (issue 41: another fresh server, the file loaded with four concurrent
#      NDJSON uploads by curl, then the seed's CREATE TABLE, timed from its
#      answer until the served version has committed every event, no
#      restart in between), in an order that turns by one place each round.
# So every engine and worker count runs once in each round, next to the
# others: a machine whose speed drifts over minutes (a VM's neighbours)
# slows all of them alike, and each ratio is taken within a round. The
# tables at the end give medians over the rounds side by side, the median
# of the rounds' ratios (Kappa / DuckDB time, and each worker count's
# speed-up over the first, next to the machine's two-process speed-up in
# the same rounds: the ceiling for two workers), and both engines' row
# counts and purchase totals (they must agree).
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

# The user's path (issue 41), against a fresh server at URL: the events
# loaded with four concurrent NDJSON uploads (curl, 10,000 records a body:
# the server's max_records_per_request; records keyed by user_id) into a
# topic of PARTITIONS partitions, the seed's stream declared with
# TIMESTAMP='event_time' (as kappa-bench build declares it, so windows follow
# event time as DuckDB's do), then the seed's CREATE TABLE
# purchase_stats, timed from its answer until the served
# version has committed every event (a read-your-writes read after each
# partition's last record, which answers then). No restart between load
# and build. Prints one JSON line.
cat >"$SCRATCH/user_path.py" <<'PY'
import json, os, subprocess, sys, threading, time, urllib.error, urllib.request

url, path, partitions, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
chunks_dir = path + ".records"
if not os.path.isdir(chunks_dir):
    os.makedirs(chunks_dir)
    n, size, out = 0, 0, None
    with open(path) as f:
        for line in f:
            if out is None or size >= 10_000:
                if out:
                    out.close()
                out, size, n = open(f"{chunks_dir}/{n:05d}.ndjson", "w"), 0, n + 1
            event = json.loads(line)
            record = json.dumps({"key": event["user_id"], "value": event}) + "\n"
            out.write(record)
            size += 1
    out.close()
chunks = sorted(os.listdir(chunks_dir))

def http(method, route, body=None, content_type="application/json"):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    request = urllib.request.Request(url + route, data=data, method=method,
                                     headers={"content-type": content_type})
    with urllib.request.urlopen(request, timeout=600) as r:
        return json.loads(r.read() or b"null")

http("POST", "/v1/topics", {"name": "user_events", "partitions": partitions})
http("POST", "/v1/statements", b"CREATE STREAM user_events (user_id VARCHAR, event_type VARCHAR, "
     b"amount DECIMAL(10,2), event_time TIMESTAMP) WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON', "
     b"TIMESTAMP='event_time');",
     "application/sql")
def upload(k):
    for chunk in chunks[k::4]:
        subprocess.run(["curl", "-sSf", "-o", "/dev/null", "-H", "content-type: application/x-ndjson",
                        "--data-binary", f"@{chunks_dir}/{chunk}", url + "/v1/topics/user_events/records"],
                       check=True)
t0 = time.perf_counter()
uploads = [threading.Thread(target=upload, args=(k,)) for k in range(4)]
for u in uploads:
    u.start()
for u in uploads:
    u.join()
load_s = time.perf_counter() - t0
http("POST", "/v1/statements", b"CREATE TABLE purchase_stats AS SELECT user_id, WINDOWSTART as window_start, "
     b"WINDOWEND as window_end, COUNT(*) as purchase_count, SUM(amount) as total_amount, "
     b"AVG(amount) as avg_amount FROM user_events WINDOW TUMBLING (SIZE 5 MINUTES) "
     b"WHERE event_type = 'purchase' GROUP BY user_id EMIT CHANGES;", "application/sql")
t0 = time.perf_counter()
# Wait with one read-your-writes read after every partition's last record
# (answered once the served version has committed them), repeated while it
# answers 504: polling GET /v1/views every 5 ms instead cost the 2-CPU
# machine ~10% of the build's time (4 M events: 0.49-0.52 s polled against
# 0.45-0.47 s waited).
ends = http("GET", "/v1/topics/user_events")["partitions"]
after = ",".join(f"{p['partition']}:{p['end_offset'] - 1}" for p in ends if p["end_offset"] > 0)
while True:
    try:
        http("GET", f"/v1/views/purchase_stats/rows?limit=1&max_wait_ms=30000&after={after}")
        break
    except urllib.error.HTTPError as e:
        if e.code != 504 or time.perf_counter() - t0 > 600:
            raise
build_s = time.perf_counter() - t0
view = http("GET", "/v1/views/purchase_stats")
if sum(p["committed"] for p in view["served_version"]["partitions"]) < events:
    sys.exit("the view answered before committing every event")
rows, purchases, cursor = 0, 0, ""
while True:
    page = http("GET", "/v1/views/purchase_stats/rows?limit=10000" + cursor)
    rows += len(page["rows"])
    purchases += sum(r["row"]["purchase_count"] for r in page["rows"])
    if not page.get("next_cursor"):
        break
    cursor = "&cursor=" + page["next_cursor"]
print(json.dumps({"load_s": load_s, "build_s": build_s, "rows": rows, "purchases": purchases}))
PY

# The machine's own parallel speed-up: a fixed CPU loop (no memory shared)
# timed in one process, in two started together, and in one again; prints
# one JSON line. Two workers cannot beat this ratio in the same round.
cat >"$SCRATCH/machine_speedup.py" <<'PY'
import json, multiprocessing as mp, time
LOOP = 3_000_000
def loop(barrier, times):
    barrier.wait()
    t0, x = time.perf_counter(), 0
    for i in range(LOOP):
        x += i * i
    times.put(time.perf_counter() - t0)
def timed(n):
    barrier, times = mp.Barrier(n), mp.Queue()
    procs = [mp.Process(target=loop, args=(barrier, times)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return max(times.get() for _ in procs)
# One process before and after the two (their mean), so a drift in the
# machine's speed over the second this takes does not tilt the ratio.
before, two, after = timed(1), timed(2), timed(1)
one = (before + after) / 2
print(json.dumps({"one_s": [before, after], "two_s": two, "speedup": 2 * one / two}))
PY

# The side-by-side tables from the saved results (runs.tsv: one line per
# events × partitions with its parallelism list; per round and engine one
# JSON file).
cat >"$SCRATCH/table.py" <<'PY'
import json, re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def metric(report, name):
    return next((r["spread"]["median"] for r in report["summary"] if r["name"] == name), None)
def load(path):
    try:
        return json.load(open(path))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
def med(values):
    return statistics.median(values) if values else None
def failure(group, par, rounds):
    """Why the first of `rounds` (numbers without a result) failed."""
    for r in rounds:
        try:
            text = open(f"{out}/{group}-par{par}.r{r}.stderr.log").read().strip()
        except FileNotFoundError:
            continue
        if text:
            m = re.search(r'"message":"([^"]{0,100})', text)
            return m.group(1) if m else text.splitlines()[-1][:100]
    return "no result"
def agree(values):
    distinct = sorted(set(values))
    return f"{distinct[0]:,.0f}" if len(distinct) == 1 else "differ: " + ", ".join(f"{v:,.0f}" for v in distinct)
groups = [line.split() for line in open(f"{out}/runs.tsv")]
print("| events | partitions | parallelism | Kappa build | Kappa events/s | Kappa server cores busy "
      "| DuckDB | DuckDB events/s | DuckDB cores busy | Kappa / DuckDB time "
      "| rows Kappa / DuckDB | purchases Kappa / DuckDB |")
print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
speedups = []
for group, events, partitions, pars in groups:
    n = int(events)
    if group == "skipped":
        print(f"| {n:,} | – | – | skipped: not enough free disk | | | | | | | | |")
        continue
    pars = pars.split(",")
    duck = [load(f"{out}/{group}.r{r}.duckdb.json") for r in range(1, runs + 1)]
    duck_s = [d["median_s"] if d else None for d in duck]
    duck_ok = [d for d in duck if d]
    ds = med([t for t in duck_s if t is not None])
    duck_cell = (f"{ds:.2f} s | {n / ds:,.0f} | {med([d['median_cores'] for d in duck_ok]):.2f}"
                 if ds else "failed | | ")
    duck_rows = agree([d["rows"] for d in duck_ok]) if duck_ok else "–"
    duck_purchases = agree([d["purchases"] for d in duck_ok]) if duck_ok else "–"
    times = {}
    for par in pars:
        kappa = [load(f"{out}/{group}-par{par}.r{r}.json") for r in range(1, runs + 1)]
        ks = [metric(k, "build time") if k else None for k in kappa]
        times[par] = ks
        done = [k for k in kappa if k]
        failed = [r for r, k in enumerate(kappa, 1) if not k]
        if not done:
            print(f"| {n:,} | {partitions} | {par} | failed: {failure(group, par, failed)} | | | {duck_cell} | "
                  f"| – / {duck_rows} | – / {duck_purchases} |")
            continue
        kmed = med([t for t in ks if t is not None])
        cores = [metric(k, "server cores busy") for k in done]
        cores = "–" if None in cores else f"{med(cores):.2f}"
        ratio = med([k / d for k, d in zip(ks, duck_s) if k is not None and d is not None])
        ratio = "–" if ratio is None else f"{ratio:.2f}×"
        note = f" ({len(failed)} failed: {failure(group, par, failed)})" if failed else ""
        print(f"| {n:,} | {partitions} | {par} | {kmed:.2f} s{note} | {n / kmed:,.0f} | {cores} "
              f"| {duck_cell} | {ratio} "
              f"| {agree([metric(k, 'view rows') for k in done])} / {duck_rows} "
              f"| {agree([metric(k, 'purchases counted') for k in done])} / {duck_purchases} |")
    base = pars[0]
    for par in pars[1:]:
        rounds = [b / t for b, t in zip(times[base], times[par]) if b is not None and t is not None]
        speedups.append((n, partitions, base, par, rounds, group))
def ratios(values):
    """Per-round ratios and their median, as table cells."""
    shown = ", ".join("–" if v is None else f"{v:.2f}×" for v in values) or "–"
    present = [v for v in values if v is not None]
    return shown, f"**{med(present):.2f}×**" if present else "–"
print()
print("The user's path: a fresh server, the events loaded with 4 concurrent NDJSON uploads, "
      "then CREATE TABLE; build = from the statement's answer until every event is committed.")
print()
print("| events | partitions | load | Kappa first build | Kappa events/s | DuckDB | Kappa / DuckDB time, per round | median "
      "| rows Kappa / DuckDB | purchases Kappa / DuckDB |")
print("|--:|--:|--:|--:|--:|--:|--|--:|--:|--:|")
for group, events, partitions, pars in groups:
    if group == "skipped":
        continue
    n = int(events)
    user = [load(f"{out}/{group}.r{r}.user.json") for r in range(1, runs + 1)]
    duck = [load(f"{out}/{group}.r{r}.duckdb.json") for r in range(1, runs + 1)]
    done = [u for u in user if u]
    if not done:
        print(f"| {n:,} | {partitions} | failed | | | | | | | |")
        continue
    per_round = [u["build_s"] / d["median_s"] if u and d else None for u, d in zip(user, duck)]
    shown, median = ratios(per_round)
    ks = med([u["build_s"] for u in done])
    ds = med([d["median_s"] for d in duck if d])
    duck_ok = [d for d in duck if d]
    print(f"| {n:,} | {partitions} | {med([u['load_s'] for u in done]):.2f} s | {ks:.2f} s | {n / ks:,.0f} "
          f"| {ds:.2f} s | {shown} | {median} "
          f"| {agree([u['rows'] for u in done])} / {agree([d['rows'] for d in duck_ok]) if duck_ok else '–'} "
          f"| {agree([u['purchases'] for u in done])} / {agree([d['purchases'] for d in duck_ok]) if duck_ok else '–'} |")
if speedups:
    print()
    print("| events | partitions | workers | build time of the first / this, per round | median "
          "| the machine: two processes' speed-up over one (a CPU loop), same rounds | median |")
    print("|--:|--:|--|--|--:|--|--:|")
    for n, partitions, base, par, rounds, group in speedups:
        machine = [load(f"{out}/{group}.r{r}.machine.json") for r in range(1, runs + 1)]
        kappa_cells = " | ".join(ratios(rounds))
        machine_cells = " | ".join(ratios([m["speedup"] if m else None for m in machine]))
        print(f"| {n:,} | {partitions} | {par} against {base} | {kappa_cells} | {machine_cells} |")
PY

machine_line() {
    local cpu mem
    cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
    mem=$(awk '/^MemTotal:/{printf "%.1f GiB RAM", $2 / 1048576}' /proc/meminfo)
    echo "Machine: $(nproc) CPUs ($cpu), $mem, $(uname -sr); data on $(df --output=source,fstype "$SCRATCH" | tail -1 | tr -s ' ')."
}

# parallelism_args PARALLELISM: the `kappa-bench build` option for it.
parallelism_args() {
    [[ $1 == none ]] || echo "--parallelism $1"
}

# One events × partitions group: a fresh server, the file loaded once, then
# RUNS rounds of one build per PARALLELISM and one DuckDB run, the order
# turned by one place each round.
run_group() {
    local file=$1 events=$2 partitions=$3
    local group=build-$events-p$partitions
    local -a pars steps
    read -r -a pars <<<"$PARALLELISM"
    say "== $group: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    start_server "$group"
    # shellcheck disable=SC2046 # one option and its value, or nothing
    if ! "$BIN_DIR/kappa-bench" --server "$URL" build --file "$file" --partitions "$partitions" \
        $(parallelism_args "${pars[0]}") --runs 1 --keep >"$OUT/$group.load.md" 2>"$OUT/$group.load.stderr.log"; then
        say "$group: loading failed: $(tail -1 "$OUT/$group.load.stderr.log")"
    fi
    steps=("${pars[@]}" duckdb machine userpath)
    for round in $(seq "$RUNS"); do
        local turn=$(((round - 1) % ${#steps[@]}))
        for step in "${steps[@]:turn}" "${steps[@]:0:turn}"; do
            if [[ $step == machine ]]; then
                "$VENV/bin/python" "$SCRATCH/machine_speedup.py" >"$OUT/$group.r$round.machine.json"
                continue
            fi
            if [[ $step == userpath ]]; then
                say "== $group round $round: kappa, the user's path (a fresh server, load, build)"
                local server_url=$URL server_pid=$SERVER_PID
                start_server "$group-user-r$round"
                if ! "$VENV/bin/python" "$SCRATCH/user_path.py" "$URL" "$file" "$partitions" "$events" \
                    >"$OUT/$group.r$round.user.json" 2>"$OUT/$group.r$round.user.stderr.log"; then
                    say "$group round $round: the user's path failed: $(tail -1 "$OUT/$group.r$round.user.stderr.log")"
                    rm -f "$OUT/$group.r$round.user.json"
                fi
                stop_server
                rm -rf "$SCRATCH/$group-user-r$round-data"
                URL=$server_url SERVER_PID=$server_pid
                continue
            fi
            if [[ $step == duckdb ]]; then
                say "== $group round $round: duckdb, threads = $DUCKDB_THREADS"
                "$VENV/bin/python" "$SCRATCH/duckdb_build.py" "$file" 1 "$DUCKDB_THREADS" \
                    >"$OUT/$group.r$round.duckdb.json"
                continue
            fi
            local name=$group-par$step.r$round
            say "== $group round $round: kappa, parallelism $step"
            # A refused build (e.g. PARALLELISM before the server knows it)
            # is reported in the table; the other builds still run.
            # shellcheck disable=SC2046 # one option and its value, or nothing
            if ! "$BIN_DIR/kappa-bench" --server "$URL" --json "$OUT/$name.json" build --reuse-topic \
                $(parallelism_args "$step") --runs 1 --pause-ms 300 --server-pid "$SERVER_PID" \
                >"$OUT/$name.md" 2>"$OUT/$name.stderr.log"; then
                say "$name failed: $(tail -1 "$OUT/$name.stderr.log")"
                rm -f "$OUT/$name.json"
            fi
        done
    done
    stop_server
    rm -rf "$SCRATCH/$group-data"
    printf '%s\t%s\t%s\t%s\n' "$group" "$events" "$partitions" "${PARALLELISM// /,}" >>"$OUT/runs.tsv"
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
        run_group "$file" "$events" "$partitions"
    done
    rm -f "$file"
done

{
    echo "## bench-duckdb.sh ($(date -u +%Y-%m-%d)), kappa $(git -C "$ROOT" rev-parse --short HEAD)"
    echo
    machine_line
    echo "Load average at the start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "DuckDB $DUCKDB_VERSION (Python), threads = $DUCKDB_THREADS; medians over $RUNS rounds, ratios taken within a round."
    echo
    "$VENV/bin/python" "$SCRATCH/table.py" "$OUT" "$RUNS"
} | tee "$OUT/summary.md"
say "done; results in $OUT"
