"""Nexmark queries on two or more Kappa builds, side by side (no Flink):
an A/B of a change.

    BUILDS="before:DIR after:DIR" python3 tools/bench-nexmark-ab.py [OUT_DIR]

Each DIR holds a release `kappa` and `kappa-datagen` (copy them out of
the target directory before building the change). For ROUNDS (default 3)
rounds, each build in turn: a fresh server, loaded as
tools/bench-nexmark.py loads it (EVENTS, default 2,000,000), then each
query of QUERIES (default "q0 q1") with each worker count of WORKERS
(default "1 2"), timed as bench-nexmark.py times it. Besides events/s and
the server's CPU seconds per million events, each run reports the CPU
seconds of the server's threads by name (user and system; names cut to
the kernel's 15 bytes, so `kappa-proc-nexm` sums a version's threads),
read from /proc around it: where a change moved work, and whether the thread that
bounds the query got cheaper, which varies less between runs than the
wall time on a shared VM.

With LOADED=1 the events are loaded once, into one data directory, and
each build's server in turn is started on it (the builds must read each
other's data directory): a run then finds the page cache and the input
as the run before left them, and no load's writing back runs beside it.
Each query's stream or table, and its topic, is dropped after its run.

Prints each run as it ends and then, per build, query and worker count,
the medians and every round's events/s; details in OUT_DIR/ab.json.
"""

import importlib.util
import json
import os
import shutil
import statistics
import sys

from kappa_bench_node import thread_cpu_seconds

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else None
BUILDS = [b.split(":", 1) for b in os.environ["BUILDS"].split()]
QUERIES = os.environ.get("QUERIES", "q0 q1").split()
WORKERS = [int(w) for w in os.environ.get("WORKERS", "1 2").split()]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
LOADED = os.environ.get("LOADED") == "1"


def nexmark():
    """tools/bench-nexmark.py as a module (its name has a dash)."""
    spec = importlib.util.spec_from_file_location("bench_nexmark", os.path.join(HERE, "bench-nexmark.py"))
    module = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, sys.argv[:1] + ([OUT] if OUT else [])
    spec.loader.exec_module(module)
    sys.argv = argv
    return module


def threads_used(before, after):
    """CPU seconds per thread name between two `thread_cpu_seconds`
    readings ("<name> sys" for system time); threads under 0.01 s left
    out."""
    used = {}
    for key, (user, system) in after.items():
        user0, system0 = before.get(key, (0.0, 0.0))
        for name, seconds in ((key[1], user - user0), (f"{key[1]} sys", system - system0)):
            if seconds >= 0.01:
                used[name] = round(used.get(name, 0.0) + seconds, 2)
    return used


def drop(bench, node, query, workers):
    """Drops the stream or table of `query`'s run and its output topic, so
    that a later run on the same server can make them again."""
    name, text = bench.kappa_statement(query, workers)
    kind = "TABLE" if f"CREATE TABLE {name}" in text else "STREAM"
    node.sql(f"DROP {kind} {name};")
    # A stream's topic outlives it; a table's may not exist (404).
    node.request("DELETE", f"/v1/topics/{name}")


def main():
    bench = nexmark()
    os.makedirs(bench.OUT, exist_ok=True)
    runs = []
    loaded = None
    for r in range(ROUNDS):
        for label, directory in BUILDS:
            bench.BIN = directory
            node = bench.Kappa(loaded)
            if loaded is None:
                bench.load(node)
            if LOADED:
                loaded = node.dir
            for query in QUERIES:
                for workers in WORKERS:
                    bench.settle()
                    before = thread_cpu_seconds(node.proc.pid)
                    result = bench.run_kappa(node, query, workers)
                    result["threads"] = threads_used(before, thread_cpu_seconds(node.proc.pid))
                    runs.append({"round": r, "build": label, "query": query, "workers": workers, **result})
                    print(f"round {r} {label} {query} x{workers}: "
                          f"{bench.EVENTS / result['seconds']:,.0f} ev/s, "
                          f"{result['cpu_seconds'] / bench.EVENTS * 1e6:.3f} CPU-s/M, "
                          f"threads {result['threads']}", flush=True)
                    if LOADED:
                        drop(bench, node, query, workers)
            node.stop(keep=LOADED)
    if loaded:
        shutil.rmtree(loaded, ignore_errors=True)
    with open(os.path.join(bench.OUT, "ab.json"), "w") as f:
        json.dump({"events": bench.EVENTS, "rounds": ROUNDS, "runs": runs}, f, indent=1)
    print(f"Medians of {ROUNDS} round(s), {bench.EVENTS:,} events.")
    for query in QUERIES:
        for workers in WORKERS:
            for label, _ in BUILDS:
                mine = [x for x in runs if (x["build"], x["query"], x["workers"]) == (label, query, workers)]
                seconds = statistics.median(x["seconds"] for x in mine)
                cpu = statistics.median(x["cpu_seconds"] for x in mine)
                each = ", ".join(f"{bench.EVENTS / x['seconds'] / 1e6:.2f}" for x in mine)
                print(f"{query} x{workers} {label}: {bench.EVENTS / seconds:,.0f} ev/s, "
                      f"{cpu / bench.EVENTS * 1e6:.3f} CPU-s/M (rounds: {each} M ev/s)")


if __name__ == "__main__":
    main()
