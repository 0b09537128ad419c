#!/usr/bin/env bash
# Kafka producers' zstd batches in a zstd topic (issue 40, log/FORMAT.md
# §2.10): two `kappa` binaries in alternation — one that decompresses a
# producer's batch and compresses the records again, one that stores it as
# sent — on a fresh server and data directory each time:
#
#   tools/bench-kafka-zstd.sh OLD_KAPPA NEW_KAPPA [ROUNDS]   # ROUNDS default 3
#
# Per round and binary: a 1-partition topic with compression_type=zstd and
# fsync=never; confluent-kafka (tools/kafka-load.py) produces RECORDS
# (default 1000000) seed-like JSON events of ~100 bytes with
# compression.type=zstd, then consumes them back. Prints per phase the
# client's records/s and the server's CPU seconds (utime + stime from
# /proc) per million records. Servers listen on 127.0.0.1 and are stopped
# by their PID.
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-3}
RECORDS=${RECORDS:-1000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$HOME/.cache/kappa-kafka-venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for round in $(seq "$ROUNDS"); do
    for side in old new; do
        bin=$OLD
        [[ $side == new ]] && bin=$NEW
        rm -rf "$WORK/data" "$WORK/out"
        kport=$(free_port)
        "$bin" serve --data-dir "$WORK/data" --listen 127.0.0.1:0 --kafka-listen "127.0.0.1:$kport" \
            >"$WORK/out" 2>/dev/null &
        pid=$!
        for _ in $(seq 100); do [[ -s $WORK/out ]] && break; sleep 0.1; done
        url=http://$(awk 'NR==1 {print $3}' "$WORK/out")
        curl -sf -o /dev/null -H 'content-type: application/json' "$url/v1/topics" \
            -d '{"name": "z", "partitions": 1, "fsync": "never", "compression_type": "zstd"}'
        line="round $round $side"
        for phase in produce consume; do
            before=$(cpu_ticks "$pid")
            args=(z "$RECORDS")
            [[ $phase == produce ]] && args+=(zstd)
            rate=$("$PYTHON" "$ROOT/tools/kafka-load.py" "$phase" "127.0.0.1:$kport" "${args[@]}" |
                "$PYTHON" -c 'import json,sys; print(round(json.load(sys.stdin)["records_per_second"]))')
            after=$(cpu_ticks "$pid")
            cpu=$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$RECORDS" \
                'BEGIN {printf "%.2f", t / hz / (n / 1e6)}')
            line="$line $phase=${rate}/s server_cpu_s_per_M=$cpu"
        done
        bytes=$(curl -sf "$url/v1/topics/z" | "$PYTHON" -c 'import json,sys; print(sum(p["bytes"] for p in json.load(sys.stdin)["partitions"]))')
        echo "$line bytes_per_record=$(awk -v b="$bytes" -v n="$RECORDS" 'BEGIN {printf "%.1f", b / n}')"
        kill "$pid"
        wait "$pid" 2>/dev/null || true
    done
done
