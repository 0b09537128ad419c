"""Nexmark on this machine: Kappa against Apache Flink (issue 38).

    python3 tools/bench-nexmark.py [OUT_DIR]

Generates EVENTS (default 2,000,000) Nexmark events with `kappa-datagen
nexmark` (seed 1, nexmark's default 10,000 events/s of event time) into
OUT_DIR/data as NDJSON, then, for each query of QUERIES (default the ones
tools/nexmark/kappa/ holds: q0 q1 q2 q3 q4 q5 q7 q8 q11), ROUNDS (default 3) rounds in
turn of:

- **Kappa** with 1 and 2 workers (`WITH (PARALLELISM=n)`): one release
  server per round on a fresh data directory, loaded with the same events
  (`kappa-datagen nexmark --produce`, 2 partitions per topic, not timed);
  each query is timed from its statement until its served version has
  committed the end of the stream it reads (`bid`; `auction` for q3 and
  q8), and the server's CPU (utime + stime from
  /proc) is read around it, with its system time apart in results.json
  (`system_seconds`: mostly the log writers filling the output's new
  pages, which this machine's host charges for; BENCHMARKS.md).
- **Flink** at parallelism 1 and 2: tools/nexmark/flink_runner.py (Flink
  2.3 mini-cluster in its venv, RocksDB state, blackhole sink) over the
  same NDJSON files; `seconds` from submitting the INSERT to the job's end,
  and the JVM's CPU over it; and Flink's own net run time of the job
  (`job_seconds`: without planning and the mini-cluster's start).

Before each timed run the page cache's dirty pages are written back,
untimed (`settle`), so that no run pays for the writes of the one before.

With FLINK_TIMEOUT (seconds), a Flink run still going after that long is
stopped (its whole process group, the JVM included) and counted as
unfinished: the table then gives "unfinished after T s" and Flink's
events/s as at most EVENTS/T, and a ratio against an unfinished best as
"over" the ratio against T.

Prints the medians as a Markdown table (events/s over all events of the
three inputs, and CPU seconds per million events); details in
OUT_DIR/results.json. The last column is Kappa's best median time (1 or
2 workers) against Flink's best median job-only time, with each round's
ratio of best against best. Needs the release binaries (cargo build --release
--workspace --bins) and a Java runtime; makes the Flink venv when missing.
"""

import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from kappa_bench_node import KappaServer, free_port, user_and_system_seconds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/kappa-target"))
BIN = os.environ.get("BIN_DIR", os.path.join(TARGET, "release"))
EVENTS = int(os.environ.get("EVENTS", "2000000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
QUERIES = os.environ.get("QUERIES", "q0 q1 q2 q3 q4 q5 q7 q8 q11").split()
# Seconds after which a Flink run is stopped and counted unfinished (0: never).
FLINK_TIMEOUT = float(os.environ.get("FLINK_TIMEOUT", "0"))
# The input whose end a query's version must commit: the stream it reads
# FROM. q3 and q8 read auction (joined with person, whose batches come
# before auction's last one in the log, so they are processed by then).
INPUT = {"q3": "auction", "q8": "auction"}
PARTITIONS = 2
OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="kappa-bench-nexmark-")
DATA = os.path.join(OUT, "data")
FLINK_RUNNER = os.path.join(ROOT, "tools/nexmark/flink_runner.py")
FLINK_VENV = os.path.join(ROOT, "tools/nexmark/flink-venv.sh")


def say(*what):
    print("bench-nexmark:", *what, file=sys.stderr, flush=True)


class Kappa(KappaServer):
    """A release `kappa serve` on a fresh data directory, or on `directory`,
    one a server before it loaded (then kept at `stop`)."""

    def __init__(self, directory=None):
        self.keep = directory is not None
        self.dir = directory or tempfile.mkdtemp(prefix="kappa-bench-nexmark-node-", dir=OUT)
        port = free_port()
        args = [os.path.join(BIN, "kappa"), "serve", "--data-dir", os.path.join(self.dir, "data"),
                "--listen", f"127.0.0.1:{port}"]
        super().__init__(args, port, os.path.join(self.dir, "stderr.log"))

    def end_offsets(self, topic):
        _, body = self.request("GET", f"/v1/topics/{topic}")
        return [p["end_offset"] for p in body["partitions"]]

    def caught_up(self, name, ends):
        status, body = self.request("GET", f"/v1/views/{name}")
        if status != 200 or not body.get("served_version"):
            return False
        committed = [p["committed"] for p in body["served_version"]["partitions"]]
        return committed == ends

    def stop(self, keep=False):
        """Stops the server; removes its data directory unless `keep` or
        it was given one."""
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()
        if not (keep or self.keep):
            shutil.rmtree(self.dir, ignore_errors=True)


def kappa_statement(query, workers):
    """The query's statement, named for this run and with its parallelism."""
    text = open(os.path.join(ROOT, f"tools/nexmark/kappa/{query}.sql")).read()
    name = f"nexmark_{query}_w{workers}"
    text, n = re.subn(r"CREATE (STREAM|TABLE) nexmark_\w+ AS",
                      lambda m: f"CREATE {m.group(1)} {name} WITH (PARALLELISM={workers}) AS", text)
    assert n == 1, f"{query}.sql names one CREATE .. AS"
    return name, text


def run_kappa(node, query, workers):
    """One Kappa run, timed from the statement until the version committed
    its input's end: its seconds, and the server's CPU seconds in that
    time, in all and of them in the kernel (`system_seconds`: mostly the
    log writers filling the output's new pages, BENCHMARKS.md's "The
    machine's memory")."""
    name, text = kappa_statement(query, workers)
    ends = node.end_offsets(INPUT.get(query, "bid"))
    stat = f"/proc/{node.proc.pid}/stat"
    (user0, system0), t0 = user_and_system_seconds(stat), time.time()
    node.sql(text)
    while not node.caught_up(name, ends):
        time.sleep(0.02)
    seconds = time.time() - t0
    user1, system1 = user_and_system_seconds(stat)
    return {"seconds": seconds, "cpu_seconds": user1 + system1 - user0 - system0,
            "system_seconds": system1 - system0}


def run_flink(query, parallelism):
    """One Flink run; with FLINK_TIMEOUT, one still going after it is
    stopped with its process group and given as `unfinished_after`."""
    python = subprocess.run(["bash", FLINK_VENV], check=True, capture_output=True,
                            text=True).stdout.strip()
    runner = subprocess.Popen([python, FLINK_RUNNER, "--data", DATA, "--query", query,
                               "--parallelism", str(parallelism)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        out, err = runner.communicate(timeout=FLINK_TIMEOUT or None)
    except subprocess.TimeoutExpired:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.communicate()
        return {"seconds": None, "job_seconds": None, "cpu_seconds": None,
                "unfinished_after": FLINK_TIMEOUT}
    if runner.returncode != 0:
        raise subprocess.CalledProcessError(runner.returncode, runner.args, out, err)
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    result = json.loads(line)
    return {"seconds": result["seconds"], "job_seconds": result.get("job_seconds"),
            "cpu_seconds": result["cpu_seconds"]}


def generate():
    os.makedirs(DATA, exist_ok=True)
    subprocess.run([os.path.join(BIN, "kappa-datagen"), "nexmark", "--seed", "1",
                    "--count", str(EVENTS), "--out-dir", DATA], check=True)


def load(node):
    subprocess.run([os.path.join(BIN, "kappa-datagen"), "nexmark", "--seed", "1",
                    "--count", str(EVENTS), "--produce", node.url,
                    "--partitions", str(PARTITIONS), "--batch", "5000"],
                   check=True, stdout=subprocess.DEVNULL)
    node.sql(open(os.path.join(ROOT, "tools/nexmark/kappa/schema.sql")).read())


def settle():
    """Writes back the page cache's dirty pages before a timed run, untimed:
    the load's log (about 2.5 GB at 10 M events) and each run's output are
    otherwise written back by the kernel's flusher threads on the same two
    cores while the next run is timed, whichever engine it is."""
    os.sync()


def main():
    os.makedirs(OUT, exist_ok=True)
    generate()
    say(f"generated {EVENTS:,} events in {DATA}")
    runs = []
    for r in range(ROUNDS):
        node = Kappa()
        t0 = time.time()
        load(node)
        say(f"round {r}: loaded into kappa in {time.time() - t0:.1f} s")
        for query in QUERIES:
            for workers in (1, 2):
                settle()
                result = run_kappa(node, query, workers)
                say(f"round {r}: {query} kappa x{workers}: {result}")
                runs.append({"round": r, "query": query, "engine": "kappa", "workers": workers, **result})
            for parallelism in (1, 2):
                settle()
                result = run_flink(query, parallelism)
                say(f"round {r}: {query} flink x{parallelism}: {result}")
                runs.append({"round": r, "query": query, "engine": "flink", "workers": parallelism, **result})
        node.stop()
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"events": EVENTS, "rounds": ROUNDS, "runs": runs}, f, indent=1)
    print_table(runs)


def print_table(runs):
    """Prints the medians of `runs` as BENCHMARKS.md's Markdown table."""

    def runs_of(query, engine, workers):
        return [x for x in runs if (x["query"], x["engine"], x["workers"]) == (query, engine, workers)]

    def median(query, engine, workers, key):
        return statistics.median(timed(x, key) for x in runs_of(query, engine, workers))

    print(f"Medians of {ROUNDS} round(s), {EVENTS:,} events (persons, auctions and bids).")
    print()
    print("| query | Kappa 1 worker | Kappa 2 workers | Flink p=1 | Flink p=2 | Flink p=2, job only "
          "| Kappa best vs Flink best (job only) |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for query in QUERIES:
        cells = []
        for engine, workers in (("kappa", 1), ("kappa", 2), ("flink", 1), ("flink", 2)):
            s = median(query, engine, workers, "seconds")
            if s == math.inf:
                # Its median run did not finish: when its runs were stopped.
                stopped = stopped_at(runs_of(query, engine, workers))
                cells.append(f"unfinished after {stopped:,.0f} s (under {EVENTS / stopped:,.0f} ev/s)")
                continue
            cpu = median(query, engine, workers, "cpu_seconds")
            cells.append(f"{EVENTS / s:,.0f} ev/s, {cpu / EVENTS * 1e6:.2f} CPU-s/M")
        job = median(query, "flink", 2, "job_seconds")
        cells.append("—" if job == math.inf else f"{EVENTS / job:,.0f} ev/s")
        print(f"| {query} | " + " | ".join(cells) + f" | {best_ratio(runs, query)} |")


def best_ratio(runs, query):
    """Kappa's best median time (1 or 2 workers) against Flink's best
    median job-only time (p=1 or 2), and each round's ratio of its best
    against its best, as BENCHMARKS.md gives it. Where Flink's best did
    not finish, the ratio is against the time it was stopped at, as
    "over" it."""
    mine = [x for x in runs if x["query"] == query]

    def ratio(of):
        def best(engine, key):
            return min(statistics.median(timed(x, key) for x in of
                                         if (x["engine"], x["workers"]) == (engine, w))
                       for w in (1, 2))
        flink = best("flink", "job_seconds")
        if flink == math.inf:
            flink = stopped_at(of)
            return "over ", flink / best("kappa", "seconds")
        return "", flink / best("kappa", "seconds")

    rounds = sorted({x["round"] for x in mine})
    each = ", ".join("{}{:.2f}".format(*ratio([x for x in mine if x["round"] == r])) for r in rounds)
    return "{}{:.1f}x ({})".format(*ratio(mine), each)


def timed(run, key):
    """A run's `key` (seconds), infinite for a run stopped unfinished."""
    return math.inf if "unfinished_after" in run else run[key]


def stopped_at(runs):
    """The latest time any of `runs` was stopped at unfinished."""
    return max(x["unfinished_after"] for x in runs if "unfinished_after" in x)


if __name__ == "__main__":
    main()
