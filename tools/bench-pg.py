#!/usr/bin/env python3
"""pgbench against Kappa's PostgreSQL listener and against PostgreSQL 15
(issue 39), side by side in interleaved rounds.

The same ROWS rows on both sides: Kappa's view `kv_latest` (the latest
value and count per key of the stream `kv`, loaded over HTTP) and
PostgreSQL's table `kv_latest` (primary key `k`, loaded with
generate_series). pgbench (Debian's, simple query protocol) runs two
custom scripts for SECS seconds with 1, 8 and 32 clients:

- point: `SELECT * FROM kv_latest WHERE k = 'k<random>'` (one row by key);
- range: 100 rows in key order from a random key
  (`WHERE k >= 'k<random>' ORDER BY k LIMIT 100`: a key range on both).

Reports queries/s (pgbench's tps without connection time) and p99 latency
(from pgbench's per-transaction logs), the median of ROUNDS rounds, as a
Markdown table.

    cargo build --release --workspace --bins
    python3 tools/bench-pg.py

Environment: KAPPA_BIN (default $CARGO_TARGET_DIR/release/kappa or
target/release/kappa), ROWS (default 100000), ROUNDS (default 3), SECS
(default 10), CLIENTS (default "1 8 32"). PostgreSQL's binaries come from
Debian's postgresql-15 (/usr/lib/postgresql/15/bin); it runs as the
`postgres` user in a temporary directory on a free loopback port.
"""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
KAPPA_BIN = os.environ.get("KAPPA_BIN", os.path.join(TARGET, "release", "kappa"))
PG_BIN = "/usr/lib/postgresql/15/bin"
ROWS = int(os.environ.get("ROWS", "100000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SECS = int(os.environ.get("SECS", "10"))
CLIENTS = [int(c) for c in os.environ.get("CLIENTS", "1 8 32").split()]

SCRIPTS = {
    "point": ("\\set i random(0, {last})\n"
              "SELECT * FROM kv_latest WHERE k = 'k:i';\n"),
    "range": ("\\set i random(0, {last})\n"
              "SELECT * FROM kv_latest WHERE k >= 'k:i' ORDER BY k LIMIT 100;\n"),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(base, method, path, body=None, content_type="application/json"):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"content-type": content_type})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"null")


def start_kappa(work):
    proc = subprocess.Popen(
        [KAPPA_BIN, "serve", "--data-dir", os.path.join(work, "kappa"),
         "--listen", "127.0.0.1:0", "--pg-listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(work, "kappa.log"), "w"), text=True)
    http_addr = proc.stdout.readline().strip().removeprefix("listening on ")
    pg_addr = proc.stdout.readline().strip().removeprefix("pg listening on ")
    base = "http://" + http_addr
    http(base, "POST", "/v1/statements", {"sql":
        "CREATE STREAM kv (k VARCHAR KEY, v BIGINT) WITH (KAFKA_TOPIC='kv', PARTITIONS=2);"
        "CREATE TABLE kv_latest AS SELECT k, LATEST_BY_OFFSET(v) AS v, COUNT(*) AS n"
        " FROM kv GROUP BY k;"})
    batch = 10_000
    for start in range(0, ROWS, batch):
        lines = "".join(json.dumps({"key": f"k{i}", "value": {"v": i}}) + "\n"
                        for i in range(start, min(start + batch, ROWS)))
        http(base, "POST", "/v1/topics/kv/records", lines.encode(), "application/x-ndjson")
    deadline = time.time() + 300
    while time.time() < deadline:
        view = http(base, "GET", "/v1/views/kv_latest")
        parts = view["served_version"]["partitions"]
        if sum(p["committed"] for p in parts) >= ROWS:
            break
        time.sleep(0.2)
    else:
        sys.exit("kv_latest did not read every record")
    return proc, int(pg_addr.rsplit(":", 1)[1])


def start_postgres(work):
    data = os.path.join(work, "pg")
    os.makedirs(data)
    shutil.chown(work, "postgres")
    shutil.chown(data, "postgres")
    as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run(as_postgres + [f"{PG_BIN}/initdb", "-D", data, "--auth=trust", "-U", "postgres"],
                   check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    proc = subprocess.Popen(
        as_postgres + [f"{PG_BIN}/postgres", "-D", data, "-p", str(port), "-c", "listen_addresses=127.0.0.1",
                       "-k", work, "-c", "max_connections=100"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "postgres.log"), "w"))
    psql = ["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "postgres"]
    for _ in range(100):
        if subprocess.run(psql + ["-c", "SELECT 1"], capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    subprocess.run(psql + ["-c",
        "CREATE TABLE kv_latest (k text PRIMARY KEY, v bigint, n bigint);"
        f"INSERT INTO kv_latest SELECT 'k' || i, i, 1 FROM generate_series(0, {ROWS - 1}) i;"
        "ANALYZE kv_latest;"], check=True)
    return proc, port


def pgbench(system, port, script, clients, work):
    path = os.path.join(work, f"{system}-{script}.sql")
    text = SCRIPTS[script]
    text = text[system] if isinstance(text, dict) else text.format(last=ROWS - 1)
    with open(path, "w") as f:
        f.write(text)
    logs = os.path.join(work, "logs")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    user = "postgres" if system == "postgres" else "kappa"
    out = subprocess.run(
        ["pgbench", "-n", "-M", "simple", "-c", str(clients), "-j", str(min(clients, 2)),
         "-T", str(SECS), "-f", path, "-l", "--log-prefix", os.path.join(logs, "tx"),
         "-h", "127.0.0.1", "-p", str(port), "-U", user, "postgres" if system == "postgres" else "kappa"],
        capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"pgbench against {system} failed:\n{out.stderr}")
    tps = next(float(l.split()[2]) for l in out.stdout.splitlines()
               if l.startswith("tps =") and "without" in l)
    latencies = []
    for name in os.listdir(logs):
        with open(os.path.join(logs, name)) as f:
            latencies.extend(int(l.split()[2]) for l in f if l.strip())
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1] / 1000 if latencies else float("nan")
    return tps, p99


def main():
    for tool in ("pgbench", "psql", "runuser"):
        if not shutil.which(tool):
            sys.exit(f"missing {tool}")
    if not os.access(KAPPA_BIN, os.X_OK):
        sys.exit(f"missing {KAPPA_BIN}: cargo build --release --workspace --bins")
    work = tempfile.mkdtemp(prefix="kappa-bench-pg-")
    procs = []
    try:
        kappa, kappa_port = start_kappa(work)
        procs.append(kappa)
        postgres, pg_port = start_postgres(work)
        procs.append(postgres)
        results = {}
        for r in range(ROUNDS):
            for script in SCRIPTS:
                for clients in CLIENTS:
                    for system, port in (("kappa", kappa_port), ("postgres", pg_port)):
                        tps, p99 = pgbench(system, port, script, clients, work)
                        results.setdefault((script, clients, system), []).append((tps, p99))
                        print(f"round {r + 1} {script} c={clients} {system}: {tps:,.0f} q/s, p99 {p99:.2f} ms",
                              flush=True)
        print()
        print(f"ROWS={ROWS} ROUNDS={ROUNDS} SECS={SECS}: medians")
        print()
        print("| query | clients | Kappa q/s | Kappa p99 ms | PostgreSQL q/s | PostgreSQL p99 ms | Kappa / PostgreSQL |")
        print("|---|--:|--:|--:|--:|--:|--:|")
        for script in SCRIPTS:
            for clients in CLIENTS:
                k = results[(script, clients, "kappa")]
                p = results[(script, clients, "postgres")]
                kt, kp = statistics.median(t for t, _ in k), statistics.median(l for _, l in k)
                pt, pp = statistics.median(t for t, _ in p), statistics.median(l for _, l in p)
                print(f"| {script} | {clients} | {kt:,.0f} | {kp:.2f} | {pt:,.0f} | {pp:.2f} | {kt / pt:.2f}× |")
    finally:
        data = os.path.join(work, "pg")
        if os.path.isdir(data):
            subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "stop", "-D", data,
                            "-m", "fast"], capture_output=True)
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
