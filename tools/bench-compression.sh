#!/usr/bin/env bash
# Compression at rest (issue 40): what each codec costs and saves on the
# seed's events, side by side in interleaved rounds.
#
#   tools/bench-compression.sh [RESULTS_DIR]   # default: /var/tmp/kappa-bench-compression-<UTC date-time>
#
# Input: `kappa-datagen purchases --count EVENTS --out FILE` (NDJSON, one
# user_events record per line). Reference ratio: `zstd -3` of that file
# (the raw NDJSON, the same bytes the records' values hold).
#
# RUNS rounds; a round runs every codec of CODECS once, the order turned by
# one place each round. Each run:
#   1. a fresh `kappa serve` on a free loopback port (a temp data dir,
#      stopped by PID afterwards);
#   2. `kappa-bench build --file FILE --compression CODEC --partitions
#      PARTITIONS --runs 1 --keep`: the file loaded into a new topic
#      (fsync=never, records keyed by user_id, NDJSON requests of 5,000
#      records over 2 connections; "load" = its records/s), then the seed's
#      purchase_stats built from it ("build" = the CREATE TABLE until the
#      view has committed every event);
#   3. the topic's bytes on disk (`GET /v1/topics/user_events`, the
#      segments' sizes) divided by its records.
# The table gives the medians over the rounds.
#
# Settings (environment): EVENTS (2000000), PARTITIONS (1), RUNS (3),
# CODECS ("none lz4 zstd"), BIN_DIR (release binaries: ~/.cache/kappa-target/release;
# build them with `cargo build --release --workspace --bins`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=bench-compression
EVENTS=${EVENTS:-2000000}
PARTITIONS=${PARTITIONS:-1}
RUNS=${RUNS:-3}
CODECS=${CODECS:-"none lz4 zstd"}
BIN_DIR=${BIN_DIR:-${CARGO_TARGET_DIR:-$HOME/.cache/kappa-target}/release}
OUT=${1:-/var/tmp/kappa-bench-compression-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/kappa-bench-compression.XXXXXX")
# shellcheck source=tools/bench-server.sh
source "$ROOT/tools/bench-server.sh"

for bin in kappa kappa-bench kappa-datagen; do
    [[ -x $BIN_DIR/$bin ]] || { say "missing $BIN_DIR/$bin: cargo build --release --workspace --bins"; exit 1; }
done
command -v zstd >/dev/null || { say "zstd (the reference) is missing: apt-get install zstd"; exit 1; }

file=$SCRATCH/events.ndjson
say "generating $EVENTS events"
"$BIN_DIR/kappa-datagen" purchases --count "$EVENTS" --out "$file"
raw=$(stat -c %s "$file")
reference=$(zstd -3 -c -q "$file" | wc -c)
printf '{"events": %s, "raw_bytes": %s, "zstd3_bytes": %s}\n' "$EVENTS" "$raw" "$reference" >"$OUT/input.json"

read -r -a codecs <<<"$CODECS"
for round in $(seq "$RUNS"); do
    turn=$(((round - 1) % ${#codecs[@]}))
    for codec in "${codecs[@]:turn}" "${codecs[@]:0:turn}"; do
        name=$codec.r$round
        say "== round $round: $codec (load average $(cut -d' ' -f1-3 /proc/loadavg))"
        start_server "$name"
        if "$BIN_DIR/kappa-bench" --server "$URL" --json "$OUT/$name.json" build --file "$file" \
            --partitions "$PARTITIONS" --compression "$codec" --runs 1 --keep \
            >"$OUT/$name.md" 2>"$OUT/$name.stderr.log"; then
            curl -sf "$URL/v1/topics/user_events" >"$OUT/$name.topic.json"
        else
            say "$name failed: $(tail -1 "$OUT/$name.stderr.log")"
            rm -f "$OUT/$name.json"
        fi
        stop_server
        rm -rf "$SCRATCH/$name-data"
    done
done

python3 - "$OUT" "$RUNS" "$CODECS" <<'PY' | tee "$OUT/summary.md"
import json, re, statistics, sys
out, runs, codecs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
source = json.load(open(f"{out}/input.json"))
events, raw, ref = source["events"], source["raw_bytes"], source["zstd3_bytes"]
def median(values):
    return statistics.median(values) if values else None
def load_rate(path):
    m = re.search(r"\(([\d,]+) records/s\)", open(path).read())
    return float(m.group(1).replace(",", "")) if m else None
def build_s(path):
    report = json.load(open(path))
    return next(r["spread"]["median"] for r in report["summary"] if r["name"] == "build time")
print(f"{events:,} seed events, {raw / events:.1f} bytes of NDJSON each; "
      f"`zstd -3` of the file: {ref / events:.1f} bytes each ({raw / ref:.2f}x)\n")
print("| codec | bytes on disk per record | vs none | load, records/s | build purchase_stats, s | build events/s |")
print("|---|--:|--:|--:|--:|--:|")
rows = {}
for codec in codecs:
    per_record, loads, builds = [], [], []
    for r in range(1, runs + 1):
        try:
            topic = json.load(open(f"{out}/{codec}.r{r}.topic.json"))
            per_record.append(sum(p["bytes"] for p in topic["partitions"]) / events)
            loads.append(load_rate(f"{out}/{codec}.r{r}.stderr.log"))
            builds.append(build_s(f"{out}/{codec}.r{r}.json"))
        except (FileNotFoundError, StopIteration, json.JSONDecodeError):
            pass
    rows[codec] = (median(per_record), median([l for l in loads if l]), median(builds))
base = rows.get("none", (None,))[0]
for codec, (b, load, build) in rows.items():
    if b is None:
        print(f"| {codec} | failed | | | | |")
        continue
    ratio = f"{base / b:.2f}x smaller" if base and codec != "none" else "–"
    print(f"| {codec} | {b:.1f} | {ratio} | {load:,.0f} | {build:.2f} | {events / build:,.0f} |")
PY
say "results in $OUT"
