#!/usr/bin/env python3
"""The Apache Flink side of the Nexmark benchmark: runs one query in a local mini-cluster.

    ~/.cache/kappa-flink-venv/bin/python tools/nexmark/flink_runner.py \\
        --data DIR --query q5 --parallelism 2 [--check OUT.ndjson]

DIR holds `kappa-datagen nexmark`'s person.ndjson, auction.ndjson and bid.ndjson.
flink/ddl.sql declares them as bounded filesystem/json tables with event-time
watermarks (at parallelism P > 1 over P round-robin parts of each file, made
once and kept in DIR/.flink-split-P/: Flink reads a local file as one split, so
one file would feed one source task); flink/qN.sql (nexmark-flink's query, its
changes listed at its top) declares `nexmark_sink` with a `${SINK_OPTIONS}`
placeholder and INSERTs into it.
The sink choice lives here only: blackhole for timing, as nexmark runs it, or with
--check a filesystem sink in debezium-json (it accepts the updating results of q4
and q5), whose changelog this script folds into the final rows and writes to
OUT.ndjson sorted, one object per row, sink column names, timestamps as epoch ms,
so another engine's results can be compared.

The job runs in streaming mode, as nexmark runs it; the bounded sources end, so
the job finishes. Prints one JSON line:
  query, parallelism, events (lines of the three files, counted once and cached
  in DIR/.flink-runner-events.json), startup_seconds (JVM start, table
  environment, DDL and a planner warm-up EXPLAIN of the query), split_seconds
  (making or checking the split copies, 0 when cached), seconds (wall
  time from submitting the INSERT to the job's end: planning, mini-cluster start,
  run), job_seconds (Flink's own net runtime of the job), cpu_seconds (user +
  system CPU of the gateway JVM, which hosts the mini-cluster, over `seconds`,
  from /proc/<pid>/stat), events_per_second (events / seconds), and more.

Settings follow nexmark-flink's conf/config.yaml where they apply to one JVM:
RocksDB state backend (--state-backend), mini-batch (2 s, 50000 rows), split
distinct aggregates. No checkpoints unless --checkpoint-ms. Session time zone UTC.

If pyflink is missing, the script makes the venv (tools/nexmark/flink-venv.sh,
see ensure_venv) and re-runs itself with the venv's python.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
SQL_DIR = HERE / "flink"
VENV_SCRIPT = HERE / "flink-venv.sh"
VENV_DIR = Path(os.environ.get("VENV", Path.home() / ".cache" / "kappa-flink-venv"))
QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11")
TABLES = ("person", "auction", "bid")
EVENTS_CACHE = ".flink-runner-events.json"


def ensure_venv() -> Path:
    """Creates the Flink venv when missing (idempotent); returns its python."""
    out = subprocess.run([str(VENV_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def reexec_in_venv_if_needed() -> None:
    try:
        import pyflink  # noqa: F401
    except ImportError:
        python = ensure_venv()
        if Path(sys.prefix).resolve() == python.parent.parent.resolve():
            raise  # already in the venv: it is broken
        os.execv(str(python), [str(python), *sys.argv])


def ensure_java_home() -> None:
    """Points JAVA_HOME at the `java` on PATH when unset (pyflink's gateway wants a JVM)."""
    if os.environ.get("JAVA_HOME"):
        return
    java = shutil.which("java")
    if java:
        os.environ["JAVA_HOME"] = str(Path(java).resolve().parent.parent)


def count_lines(path: Path) -> int:
    lines, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def count_events(data_dir: Path) -> int:
    """Total lines of the three files; cached in DIR/.flink-runner-events.json, keyed by size and mtime."""
    cache_path = data_dir / EVENTS_CACHE
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    total, changed = 0, False
    for table in TABLES:
        path = data_dir / f"{table}.ndjson"
        st = path.stat()
        key = [st.st_size, st.st_mtime_ns]
        entry = cache.get(table)
        if not entry or entry[:2] != key:
            cache[table] = key + [count_lines(path)]
            changed = True
        total += cache[table][2]
    if changed:
        try:
            cache_path.write_text(json.dumps(cache) + "\n")
        except OSError:
            pass  # a read-only data dir: count again next time
    return total


def source_stamp(data_dir: Path) -> dict:
    return {t: [st.st_size, st.st_mtime_ns]
            for t in TABLES for st in [(data_dir / f"{t}.ndjson").stat()]}


def split_sources(data_dir: Path, parts: int, scratch: Path) -> Path:
    """Round-robin copies of the three files, `parts` part files per table.

    A local file is a single split for Flink's file source, so at parallelism P
    each table is read from P files instead (line i goes to part i mod P: every
    part spans the whole event-time range, as a partition of a topic would).
    Made before the timed job and kept in DIR/.flink-split-P/ (or in the
    scratch dir when DIR is read-only), remade when the files change.
    """
    stamp = source_stamp(data_dir)
    for out in (data_dir / f".flink-split-{parts}", scratch / f"split-{parts}"):
        try:
            if json.loads((out / "stamp.json").read_text()) == stamp:
                return out
        except (OSError, ValueError):
            pass
        try:
            shutil.rmtree(out, ignore_errors=True)
            for table in TABLES:
                (out / table).mkdir(parents=True)
                files = [open(out / table / f"part-{i}.ndjson", "wb") for i in range(parts)]
                with open(data_dir / f"{table}.ndjson", "rb") as src:
                    for n, line in enumerate(src):
                        files[n % parts].write(line)
                for f in files:
                    f.close()
            (out / "stamp.json").write_text(json.dumps(stamp) + "\n")
            return out
        except OSError:
            shutil.rmtree(out, ignore_errors=True)
    raise SystemExit(f"{data_dir}: cannot write the split copies")


def source_paths(data_dir: Path, parallelism: int, scratch: Path) -> dict:
    """${PERSON_PATH} etc. for ddl.sql: the files, or at parallelism > 1 their parts."""
    if parallelism == 1:
        paths = {t: data_dir / f"{t}.ndjson" for t in TABLES}
    else:
        split = split_sources(data_dir, parallelism, scratch)
        paths = {t: split / t for t in TABLES}
    return {f"{t.upper()}_PATH": str(path).replace("'", "''") for t, path in paths.items()}


def sql_statements(path: Path, substitutions: dict) -> list:
    """The file's statements, comments dropped, ${NAME}s substituted."""
    text = "\n".join(re.sub(r"--.*$", "", line) for line in path.read_text().splitlines())
    for name, value in substitutions.items():
        text = text.replace("${%s}" % name, value)
    if missing := re.findall(r"\$\{\w+\}", text):
        raise SystemExit(f"{path}: no value for {', '.join(sorted(set(missing)))}")
    return [s.strip() for s in text.split(";") if s.strip()]


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def sink_options(check_dir) -> str:
    if check_dir is None:
        return "'connector' = 'blackhole'"
    return ",\n  ".join([
        "'connector' = 'filesystem'",
        f"'path' = {sql_string(str(check_dir))}",
        "'format' = 'debezium-json'",
        "'debezium-json.timestamp-format.standard' = 'ISO-8601'",
        "'debezium-json.encode.decimal-as-plain-number' = 'true'",
    ])


def jvm_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def table_environment(args, checkpoint_dir):
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    conf = Configuration()
    settings = {
        "parallelism.default": str(args.parallelism),
        "pipeline.name": f"nexmark {args.query}",
        "table.local-time-zone": "UTC",
        "state.backend.type": args.state_backend,
        "taskmanager.memory.managed.size": args.managed_memory,
        "table.exec.mini-batch.enabled": "true",
        "table.exec.mini-batch.allow-latency": "2s",
        "table.exec.mini-batch.size": "50000",
        "table.optimizer.distinct-agg.split.enabled": "true",
    }
    if args.checkpoint_ms:
        settings["execution.checkpointing.interval"] = f"{args.checkpoint_ms}ms"
        settings["execution.checkpointing.dir"] = Path(checkpoint_dir).as_uri()
    for key, value in settings.items():
        conf.set_string(key, value)
    env_settings = (EnvironmentSettings.new_instance().in_streaming_mode()
                    .with_configuration(conf).build())
    return TableEnvironment.create(env_settings)


def sink_columns(t_env) -> list:
    """(name, type root) of nexmark_sink's columns, e.g. ("stime", "TIMESTAMP_WITHOUT_TIME_ZONE")."""
    j_schema = t_env.from_path("nexmark_sink")._j_table.getResolvedSchema()
    return [(c.getName(), c.getDataType().getLogicalType().getTypeRoot().name())
            for c in j_schema.getColumns()]


def fold_changelog(check_dir: Path, columns: list) -> list:
    """The final rows of the debezium-json changelog files the sink wrote.

    Flink writes an insert or update-after as {"op":"c","after":row} and a delete
    or update-before as {"op":"d","before":row}; rows are kept as a multiset.
    """
    names = [name for name, _ in columns]
    counts = {}
    files = sorted(p for p in check_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    for path in files:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                change = json.loads(line, parse_float=Decimal)
                if change["op"] in ("c", "r", "u"):
                    row, delta = change["after"], 1
                elif change["op"] == "d":
                    row, delta = change["before"], -1
                else:
                    raise ValueError(f"{path}: unknown op {change['op']!r}")
                key = tuple(row.get(name) for name in names)
                counts[key] = counts.get(key, 0) + delta
                if counts[key] == 0:
                    del counts[key]
    if negative := [k for k, n in counts.items() if n < 0]:
        raise ValueError(f"changelog retracts rows it never inserted, e.g. {negative[0]}")
    return [key for key, n in counts.items() for _ in range(n)]


def epoch_ms(text: str) -> int:
    """An ISO-8601 timestamp from the sink (session zone UTC) as epoch milliseconds."""
    moment = datetime.fromisoformat(text.rstrip("Z")).replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1000)


def json_value(value, type_root: str) -> str:
    if value is None:
        return "null"
    if type_root.startswith("TIMESTAMP"):
        return str(epoch_ms(value))
    if isinstance(value, Decimal):
        return format(value, "f")  # exact, as the sink wrote it
    return json.dumps(value)


def write_rows(rows: list, columns: list, out: Path) -> None:
    def sort_key(row):
        return tuple((v is None, v if v is not None else 0) for v in row)

    with open(out, "w") as f:
        for row in sorted(rows, key=sort_key):
            fields = (f"{json.dumps(name)}: {json_value(v, root)}"
                      for (name, root), v in zip(columns, row))
            f.write("{" + ", ".join(fields) + "}\n")


def start_flink(args, source_paths_sql: dict, check_dir, scratch: Path):
    """JVM, table environment, sources and sink; returns (t_env, JVM pid, the INSERT)."""
    ensure_java_home()
    t_env = table_environment(args, scratch / "checkpoints")
    from pyflink.java_gateway import get_gateway
    jvm_pid = int(get_gateway().jvm.java.lang.management.ManagementFactory
                  .getRuntimeMXBean().getPid())
    for statement in sql_statements(SQL_DIR / "ddl.sql", source_paths_sql):
        t_env.execute_sql(statement)
    *ddl, insert = sql_statements(SQL_DIR / f"{args.query}.sql",
                                  {"SINK_OPTIONS": sink_options(check_dir)})
    for statement in ddl:
        t_env.execute_sql(statement)
    t_env.explain_sql(insert)  # warms the planner up: class loading is start-up, not job time
    return t_env, jvm_pid, insert


def run(args) -> dict:
    """Runs one query; returns the report."""
    import pyflink.version

    data_dir = Path(args.data).resolve()
    for table in TABLES:
        if not (data_dir / f"{table}.ndjson").is_file():
            raise SystemExit(f"{data_dir}: no {table}.ndjson")
    events = count_events(data_dir)
    scratch = Path(tempfile.mkdtemp(prefix="kappa-flink-"))
    try:
        split_started = time.monotonic()
        paths = source_paths(data_dir, args.parallelism, scratch)
        started = time.monotonic()
        check_dir = scratch / "sink" if args.check else None
        t_env, jvm_pid, insert = start_flink(args, paths, check_dir, scratch)

        cpu_before = jvm_cpu_seconds(jvm_pid)
        submitted = time.monotonic()
        job = t_env.execute_sql(insert).get_job_client()
        job_result = job.get_job_execution_result().result()  # waits; raises if the job failed
        seconds = time.monotonic() - submitted
        cpu_seconds = jvm_cpu_seconds(jvm_pid) - cpu_before

        report = {
            "query": args.query,
            "parallelism": args.parallelism,
            "events": events,
            "seconds": round(seconds, 3),
            "job_seconds": job_result.get_net_runtime() / 1000,
            "startup_seconds": round(submitted - started, 3),
            "split_seconds": round(started - split_started, 3),
            "cpu_seconds": round(cpu_seconds, 2),
            "events_per_second": round(events / seconds),
            "engine": f"flink {pyflink.version.__version__}",
            "state_backend": args.state_backend,
            "checkpoint_ms": args.checkpoint_ms,
        }
        if check_dir is not None:
            columns = sink_columns(t_env)
            rows = fold_changelog(check_dir, columns)
            write_rows(rows, columns, Path(args.check))
            report.update(rows=len(rows), check=str(Path(args.check).resolve()))
        return report
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="directory with person/auction/bid.ndjson")
    p.add_argument("--query", required=True, choices=QUERIES)
    p.add_argument("--parallelism", type=int, default=1)
    p.add_argument("--check", metavar="OUT.ndjson",
                   help="write the query's final rows here instead of a blackhole sink")
    p.add_argument("--state-backend", choices=("rocksdb", "hashmap"), default="rocksdb",
                   help="nexmark's config uses rocksdb (default)")
    p.add_argument("--managed-memory", default="512m",
                   help="mini-cluster managed memory, RocksDB's share (default 512m)")
    p.add_argument("--checkpoint-ms", type=int, default=0,
                   help="checkpoint interval; 0 (default) = no checkpoints")
    args = p.parse_args(argv)
    if args.parallelism < 1:
        p.error("--parallelism must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    reexec_in_venv_if_needed()
    report = run(args)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
