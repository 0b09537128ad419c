#!/usr/bin/env bash
# Two `kappa` binaries in alternation, HTTP produce with fsync=always on a
# fresh server and data directory each time, so that both see the same
# machine (an A/B check; its last results are in git history of BENCHMARKS.md):
#
#   tools/bench-ab.sh OLD_KAPPA NEW_KAPPA [ROUNDS]     # ROUNDS default 4
#
# Per round and binary: 32 connections of 1-record requests, then 8
# connections of 1,000-record requests (kappa-bench produce, 5 s after 1 s
# of warm-up); prints one line per round and binary with both records/s.
# Servers listen on 127.0.0.1:0 and are stopped by their PID.
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-4}
BENCH=${BENCH:-${CARGO_TARGET_DIR:-$HOME/.cache/kappa-target}/release/kappa-bench}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

produce() { # URL CONNECTIONS BATCH TOPIC
    "$BENCH" --server "$1" produce --topic "$4" --create --partitions 1 --fsync always \
        --connections "$2" --batch "$3" --record-bytes 100 --duration 5 --warmup 1 --runs 1 2>&1 |
        awk -F'|' '/^\| records\/s/ {gsub(/ /, "", $3); print $3}'
}

for round in $(seq "$ROUNDS"); do
    for side in old new; do
        bin=$OLD
        [[ $side == new ]] && bin=$NEW
        rm -rf "$WORK/data" "$WORK/out"
        "$bin" serve --data-dir "$WORK/data" --listen 127.0.0.1:0 >"$WORK/out" 2>/dev/null &
        pid=$!
        for _ in $(seq 100); do [[ -s $WORK/out ]] && break; sleep 0.1; done
        url=http://$(awk 'NR==1 {print $3}' "$WORK/out")
        echo "round $round $side c32-batch1=$(produce "$url" 32 1 d) c8-batch1000=$(produce "$url" 8 1000 p)"
        kill "$pid"
        wait "$pid" 2>/dev/null || true
    done
done
