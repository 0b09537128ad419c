# Shared by the benchmark scripts (sourced, not run): a log line, a fresh
# `kappa serve` on a free loopback port, stopping it by PID, and cleaning up
# on exit. The sourcing script sets BENCH_NAME (the log prefix), BIN_DIR
# (where `kappa` is), OUT (results: each server's stderr goes there) and
# SCRATCH (a temp dir: data dirs, stdout; removed on exit).

SERVER_PID=
URL=

say() { echo "[$BENCH_NAME $(date -u +%H:%M:%S)] $*" >&2; }

# start_server NAME [ARGS..]: a server on $SCRATCH/NAME-data (ARGS added
# to `kappa serve`); sets SERVER_PID and URL.
start_server() {
    local name=$1 out=$SCRATCH/$1.stdout
    shift
    "$BIN_DIR/kappa" serve --data-dir "$SCRATCH/$name-data" --listen 127.0.0.1:0 "$@" \
        >"$out" 2>"$OUT/server-$name.stderr.log" &
    SERVER_PID=$!
    # The server prints `listening on ADDR` once bound (bounded wait: 30 s).
    for _ in $(seq 300); do
        grep -q '^listening on ' "$out" 2>/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    URL=http://$(awk '/^listening on /{print $3}' "$out")
    [[ $URL != http:// ]] || { say "server $name did not start"; cat "$OUT/server-$name.stderr.log" >&2; exit 1; }
    say "server $name on $URL (pid $SERVER_PID)"
}

stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

cleanup() {
    stop_server
    rm -rf "$SCRATCH"
}
trap cleanup EXIT
