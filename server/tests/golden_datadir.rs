//! The golden data directory (issue 35: every durable file pinned).
//!
//! `tests/fixtures/datadir-v1/` is a whole data directory written by the
//! server (see its README.md for the commit and the recipe): two declared
//! sources, topics with a few records, and views covering the plan shapes
//! (a keyed aggregate replaced once, so it serves version 2 with version 1
//! in grace; tumbling, hopping and session windows on an event-time
//! column; a manual build waiting for promote; a stream–table join; a
//! deduplicating derived stream; a late topic).
//! `tests/fixtures/datadir-v1.rows.json` holds what it served: every live
//! version's rows and the records of the topics the views wrote.
//!
//! The tests:
//! - a copy of the directory opens with this server and serves exactly the
//!   committed rows, and the catalog it rewrites at start is the same bytes;
//! - the golden `catalog.json` decodes and encodes again byte-identical
//!   (the format is pinned: a renamed field or variant fails here);
//! - a catalog of another format, or with an unknown variant, is refused at
//!   open naming the file (and the format), and left as it was; an unknown
//!   field is ignored (the decoder reads what it knows);
//! - every plan shape the SQL front end makes round-trips through the
//!   stored types and encodes exactly as the planner's types did.
//!
//! `regenerate_golden_datadir` (ignored; never run by CI) writes the
//! fixture again: only do that for a new format, as a new directory.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod support;

use kappa_processor::plan::Plan;
use kappa_processor::runner::StartFrom;
use kappa_processor::sql::{self, CreateAs, SourceDecl, Statement};
use kappa_server::views::catalog::{
    BuildEntry, Catalog, Failure, GraceEntry, VersionEntry, ViewEntry, CATALOG_BACKUP_FILE,
    CATALOG_FILE,
};
use kappa_server::views::stored::{StoredCatalog, StoredPlan, StoredSourceDecl, StoredStartFrom};
use kappa_server::ServerConfig;
use serde_json::{json, Value};

/// The fixture's directory.
fn fixture_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("tests/fixtures/datadir-v1")
}

/// The fixture's rows.
fn rows_file() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("tests/fixtures/datadir-v1.rows.json")
}

/// The catalog of every plan shape ([`shapes_catalog`]).
fn shapes_file() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("tests/fixtures/catalog-v1-shapes.json")
}

/// A server running in this process on `data_dir`, port 0; stopped
/// cleanly (processors closed, stores flushed, log closed) by `stop`.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl Server {
    /// Starts a server on `data_dir` with one processor thread per version
    /// (a view's `PARALLELISM` still wins); the error if it does not start.
    fn start(data_dir: &Path) -> Result<Server, String> {
        let config = ServerConfig {
            data_dir: data_dir.to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            processor_threads: 1,
            ..ServerConfig::default()
        };
        let log_config = config.log_config().unwrap();
        let (addr_rx, stop, thread) = support::spawn(config, log_config);
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| "the server thread did not bind".to_string())?;
        let mut server = Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        };
        // A server that failed to open its data directory ends its thread
        // with the error; one that opened answers /health.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if server.thread.as_ref().is_some_and(|t| t.is_finished()) {
                let outcome = server.thread.take().unwrap().join().unwrap();
                return Err(match outcome {
                    Ok(()) => "the server stopped at once".into(),
                    Err(e) => format!("{e:#}"),
                });
            }
            if ureq::get(&format!("http://{addr}/health")).call().is_ok() {
                return Ok(server);
            }
            assert!(Instant::now() < deadline, "the server never answered");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server and waits until it has closed everything.
    fn stop(mut self) {
        self.shut_down().expect("the server stops cleanly");
    }

    fn shut_down(&mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread.join().unwrap(),
            None => Ok(()),
        }
    }

    /// `GET path` of a JSON answer: status and body.
    fn get(&self, path: &str) -> (u16, Value) {
        match ureq::get(&format!("http://{}{path}", self.addr)).call() {
            Ok(r) => (r.status(), r.into_json().unwrap()),
            Err(ureq::Error::Status(status, r)) => (status, r.into_json().unwrap()),
            Err(e) => panic!("GET {path}: {e}"),
        }
    }

    /// `POST path` with a body of `content_type`: status and JSON body.
    fn post(&self, path: &str, content_type: &str, body: &str) -> (u16, Value) {
        let request =
            ureq::post(&format!("http://{}{path}", self.addr)).set("Content-Type", content_type);
        match request.send_string(body) {
            Ok(r) => (r.status(), r.into_json().unwrap()),
            Err(ureq::Error::Status(status, r)) => (status, r.into_json().unwrap()),
            Err(e) => panic!("POST {path}: {e}"),
        }
    }

    /// Runs SQL statements; panics unless they all succeed.
    fn sql(&self, sql: &str) -> Value {
        let (status, body) = self.post("/v1/statements", "application/sql", sql);
        assert_eq!(status, 200, "{sql}: {body}");
        body
    }

    /// Appends `records` (the produce body's `records`) to `topic`.
    fn produce(&self, topic: &str, records: Value) {
        let body = json!({ "records": records }).to_string();
        let (status, answer) = self.post(
            &format!("/v1/topics/{topic}/records"),
            "application/json",
            &body,
        );
        assert_eq!(status, 200, "produce to {topic}: {answer}");
    }

    /// Waits until every view has processed all its input: the served and
    /// the building version at lag 0, running, not catching up.
    fn wait_caught_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (status, views) = self.get("/v1/views");
            assert_eq!(status, 200, "{views}");
            let behind: Vec<String> = views["views"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| !caught_up(v))
                .map(|v| v["name"].as_str().unwrap().to_string())
                .collect();
            if behind.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "views never caught up: {behind:?}: {views}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the server serves: the served version of every table
    /// (`served`), every live version's rows (`rows`, by `view@version`),
    /// the records of every topic (`topics`: each has one partition) and
    /// the stored tokens (`tokens`).
    fn served(&self) -> Value {
        let (status, views) = self.get("/v1/views");
        assert_eq!(status, 200, "{views}");
        let mut rows = BTreeMap::new();
        let mut served = BTreeMap::new();
        let mut topics = BTreeMap::new();
        let (status, listed) = self.get("/v1/topics");
        assert_eq!(status, 200, "{listed}");
        for topic in listed["topics"].as_array().unwrap() {
            let name = topic["name"].as_str().unwrap();
            topics.insert(name.to_string(), self.records(name));
        }
        for view in views["views"].as_array().unwrap() {
            let name = view["name"].as_str().unwrap();
            if view["kind"] != "table" {
                continue;
            }
            served.insert(name.to_string(), view["served_version"]["version"].clone());
            for version in live_versions(view) {
                let (status, mut answer) = self.get(&format!(
                    "/v1/views/{name}/rows?version={version}&limit=1000"
                ));
                assert_eq!(status, 200, "{name}@{version}: {answer}");
                // Present while a version just started again has not been
                // seen at its input's end yet: not part of the rows.
                answer.as_object_mut().unwrap().remove("catching_up");
                rows.insert(format!("{name}@{version}"), answer);
            }
        }
        let (status, tokens) = self.get("/v1/tokens");
        assert_eq!(status, 200, "{tokens}");
        json!({ "served": served, "rows": rows, "topics": topics, "tokens": tokens })
    }

    /// Every record of partition 0 of `topic`.
    fn records(&self, topic: &str) -> Value {
        let path = format!("/v1/topics/{topic}/partitions/0/records?max_records=1000");
        let (status, answer) = self.get(&path);
        assert_eq!(status, 200, "{path}: {answer}");
        answer["records"].clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

/// The version numbers of a described view: served, building, in grace.
fn live_versions(view: &Value) -> Vec<u64> {
    let mut versions = vec![view["served_version"]["version"].as_u64().unwrap()];
    if let Some(v) = view["building_version"]["version"].as_u64() {
        versions.push(v);
    }
    for g in view["grace_versions"].as_array().into_iter().flatten() {
        versions.push(g["version"].as_u64().unwrap());
    }
    versions
}

/// True when the served and the building version of a described view are
/// at their input's end (a version in grace was, when it was replaced).
fn caught_up(view: &Value) -> bool {
    let mut versions = vec![&view["served_version"]];
    if !view["building_version"].is_null() {
        versions.push(&view["building_version"]);
    }
    view["failure"].is_null()
        && versions.iter().all(|v| {
            v["lag"] == json!(0)
                && v["running"] == json!(true)
                && v["catching_up"] != json!(true)
                && v["partitions"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().all(|p| p["committed"] == p["end"]))
        })
}

/// Deletes RocksDB's info logs from every store under `views`.
fn remove_info_logs(views: &Path) {
    for store in std::fs::read_dir(views).unwrap() {
        for file in std::fs::read_dir(store.unwrap().path()).unwrap() {
            let file = file.unwrap();
            if file.file_name().to_string_lossy().starts_with("LOG") {
                std::fs::remove_file(file.path()).unwrap();
            }
        }
    }
}

/// Copies the directory tree `from` into `to` (created).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A copy of the golden data directory in a temporary directory.
fn golden_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), dir.path());
    dir
}

/// 2024-01-01T00:00:00Z: the event times are seconds after it.
const T0: i64 = 1_704_067_200_000;

/// The statements that declare the sources.
const SOURCES: &str = "
CREATE STREAM orders (order_id VARCHAR, user_id VARCHAR, amount DECIMAL(10, 2), ts TIMESTAMP)
  WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='JSON', PARTITIONS=1, TIMESTAMP='ts',
        WATERMARK_DELAY='1 SECOND');
CREATE TABLE users (user_id VARCHAR PRIMARY KEY, tier VARCHAR)
  WITH (KAFKA_TOPIC='users', VALUE_FORMAT='JSON', PARTITIONS=1);
";

/// The first definitions of the views.
const VIEWS: &str = "
CREATE TABLE orders_per_user AS
  SELECT user_id, COUNT(*) AS orders, SUM(amount) AS total FROM orders GROUP BY user_id;
CREATE TABLE orders_per_minute WITH (LATE_TOPIC='late_orders', PARALLELISM=2) AS
  SELECT user_id, WINDOWSTART AS window_start, COUNT(*) AS n, AVG(amount) AS avg_amount
  FROM orders WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 10 SECONDS, RETENTION 3650 DAYS)
  WHERE amount > 0 GROUP BY user_id HAVING COUNT(*) >= 1 EMIT CHANGES;
CREATE TABLE hopping_totals AS
  SELECT user_id, SUM(amount) AS total FROM orders
  WINDOW HOPPING (SIZE 2 MINUTES, ADVANCE BY 1 MINUTE) GROUP BY user_id;
CREATE TABLE user_sessions AS
  SELECT user_id, WINDOWSTART AS started, WINDOWEND AS ended, COUNT(*) AS n,
         MIN(amount) AS smallest, LATEST_BY_OFFSET(order_id) AS last_order
  FROM orders WINDOW SESSION (5 MINUTES, GRACE PERIOD 0 SECONDS) GROUP BY user_id EMIT FINAL;
CREATE TABLE revenue_by_tier WITH (JOIN_HISTORY='3650 DAYS') AS
  SELECT t.tier, COUNT(*) AS orders, SUM(o.amount) AS total, COUNT_DISTINCT(o.user_id) AS users
  FROM orders o LEFT JOIN users t ON o.user_id = t.user_id GROUP BY t.tier;
CREATE STREAM big_orders WITH (DEDUP_BY='order_id', DEDUP_TTL='1 DAY', PARTITIONS=1) AS
  SELECT order_id, user_id, UPPER(user_id) AS shout, CAST(amount AS DOUBLE) * 2 AS doubled,
         CASE WHEN amount >= 100 THEN 'large' ELSE 'medium' END AS size,
         COALESCE(order_id, 'none') AS id, ROWTIME AS at
  FROM orders
  WHERE amount > 10 AND order_id LIKE 'o%' AND user_id IN ('u1', 'u2', 'u3', 'u4')
    AND NOT (amount BETWEEN 1000 AND 2000) AND order_id IS NOT NULL;
";

/// The replacements: `orders_per_user` becomes version 2 (version 1 kept
/// readable for ten years), `hopping_totals` gets a build that waits for
/// promote.
const REPLACEMENTS: &str = "
CREATE OR REPLACE TABLE orders_per_user WITH (KEEP_VERSIONS=2, VERSION_GRACE='3650 DAYS') AS
  SELECT user_id, COUNT(*) AS orders, SUM(amount) AS total, MAX(amount) AS largest
  FROM orders GROUP BY user_id;
CREATE OR REPLACE TABLE hopping_totals WITH (SWAP='MANUAL') AS
  SELECT user_id, SUM(amount) AS total, COUNT(amount) AS n FROM orders
  WINDOW HOPPING (SIZE 2 MINUTES, ADVANCE BY 1 MINUTE) GROUP BY user_id;
";

/// The `users` table's records: tiers from an hour before T0, u1 upgraded
/// at T0 + 100 s.
fn users() -> Value {
    let at = |s: i64| T0 + s * 1000;
    json!([
        {"key": "u1", "value": {"user_id": "u1", "tier": "gold"}, "timestamp": at(-3600)},
        {"key": "u2", "value": {"user_id": "u2", "tier": "silver"}, "timestamp": at(-3600)},
        {"key": "u3", "value": {"user_id": "u3", "tier": "bronze"}, "timestamp": at(-3600)},
        {"key": "u1", "value": {"user_id": "u1", "tier": "platinum"}, "timestamp": at(100)},
    ])
}

/// The `orders` stream's records: o3 twice (deduplicated by `big_orders`),
/// o6 late for its minute, o7 by a user without a tier, o8's time an RFC
/// 3339 string.
fn orders() -> Value {
    let order = |id: &str, user: &str, amount: f64, s: i64| {
        json!({"key": user,
               "value": {"order_id": id, "user_id": user, "amount": amount, "ts": T0 + s * 1000},
               "timestamp": T0 + s * 1000})
    };
    json!([
        order("o1", "u1", 12.5, 5),
        order("o2", "u2", 7.25, 20),
        order("o3", "u1", 120.0, 65),
        order("o3", "u1", 120.0, 65),
        order("o4", "u3", 30.0, 130),
        order("o5", "u2", 15.0, 400),
        order("o6", "u1", 5.0, 10),
        order("o7", "u4", 50.0, 410),
        {"key": "u3",
         "value": {"order_id": "o8", "user_id": "u3", "amount": 0.1,
                   "ts": "2024-01-01T00:07:00Z"},
         "timestamp": T0 + 420_000},
    ])
}

/// Declarations for the plan table: every column type, a key column, a
/// schemaless stream, a table with its own time column.
const PLAN_SOURCES: &str = "
CREATE STREAM events (id VARCHAR KEY, flag BOOLEAN, small INT, big BIGINT, x DOUBLE,
                      price DECIMAL(12, 3), name VARCHAR, at TIMESTAMP, tags ARRAY<VARCHAR>)
  WITH (KAFKA_TOPIC='events', VALUE_FORMAT='JSON', TIMESTAMP='at', WATERMARK_DELAY='2 SECONDS',
        IDLE_TIMEOUT='1 MINUTE', PARTITIONS=2);
CREATE STREAM raw WITH (KAFKA_TOPIC='raw');
CREATE TABLE accounts (id VARCHAR PRIMARY KEY, tier VARCHAR, since TIMESTAMP)
  WITH (KAFKA_TOPIC='accounts', TIMESTAMP='since');
";

/// A plan of every shape: every function, operator, predicate, cast,
/// aggregate, window, emit, join kind, dedup, late topic and sink.
const PLAN_STATEMENTS: &str = "
CREATE STREAM scalar_functions AS
  SELECT UPPER(name) AS a, LOWER(name) AS b, LENGTH(name) AS c, TRIM(name) AS d,
         SUBSTRING(name, 2, 3) AS e, CONCAT(name, '-', id) AS f, REPLACE(name, 'a', 'b') AS g,
         ABS(x) AS h, ROUND(x, 2) AS i, FLOOR(x) AS j, CEIL(x) AS k, SQRT(x) AS l,
         COALESCE(name, 'n') AS m, IFNULL(small, 0) AS n, GREATEST(small, big) AS o,
         LEAST(small, big) AS p, TO_TIMESTAMP(name) AS q, FORMAT_TIMESTAMP(at) AS r,
         DATE_TRUNC('hour', at) AS s
  FROM events;
CREATE STREAM operators WITH (KAFKA_TOPIC='ops_out', PARTITIONS=3, MAX_FUTURE='1 HOUR') AS
  SELECT small + big AS a, small - big AS b, small * big AS c, small / big AS d,
         small % big AS e, -x AS f, name || '!' AS g, ROWKEY AS k, ROWTIME AS t
  FROM events
  WHERE (flag = true OR small <> 1) AND small < 5 AND small <= 6 AND big > 1 AND big >= 2
    AND NOT (x = 0.5);
CREATE STREAM predicates AS
  SELECT id,
         CASE small WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' END AS word,
         CASE WHEN x > 1 THEN 'big' END AS size,
         CAST(name AS BOOLEAN) AS b, CAST(x AS INTEGER) AS i, CAST(name AS DOUBLE) AS d,
         CAST(x AS DECIMAL(8, 2)) AS m, CAST(small AS VARCHAR) AS s, CAST(name AS TIMESTAMP) AS t
  FROM events
  WHERE small IN (1, 2) AND big NOT IN (3) AND x BETWEEN 1 AND 2 AND x NOT BETWEEN 5 AND 6
    AND name LIKE 'a%' AND name NOT LIKE '_b' AND tags IS NULL AND name IS NOT NULL;
CREATE TABLE every_aggregate WITH (KEEP_VERSIONS=3, VERSION_GRACE='1 HOUR', PARALLELISM=4) AS
  SELECT id, name, COUNT(*) AS a, COUNT(x) AS b, SUM(x) AS c, AVG(x) AS d, MIN(x) AS e,
         MAX(x) AS f, COUNT_DISTINCT(name) AS g, LATEST_BY_OFFSET(name) AS h,
         EARLIEST_BY_OFFSET(name) AS i, SUM(price) AS j, AVG(price) AS k
  FROM events GROUP BY id, name HAVING COUNT(*) > 1;
CREATE TABLE tumbling_final WITH (LATE_TOPIC='late', DEDUP_BY='name', DEDUP_TTL='2 HOURS',
                                  WATERMARK_DELAY='3 SECONDS', IDLE_TIMEOUT='10 SECONDS') AS
  SELECT name, WINDOWSTART AS ws, WINDOWEND AS we, COUNT(*) AS n FROM events
  WINDOW TUMBLING (SIZE 1 HOUR, GRACE PERIOD 5 MINUTES, RETENTION 2 DAYS)
  GROUP BY name EMIT FINAL;
CREATE TABLE hopping AS
  SELECT name, SUM(x) AS s FROM events
  WINDOW HOPPING (SIZE 10 MINUTES, ADVANCE BY 1 MINUTE) GROUP BY name;
CREATE TABLE sessions AS
  SELECT name, COUNT(*) AS n FROM events WINDOW SESSION (30 SECONDS) GROUP BY name;
CREATE TABLE by_tier WITH (JOIN_HISTORY='7 DAYS') AS
  SELECT a.tier, COUNT(*) AS n FROM events e JOIN accounts a ON e.name = a.id GROUP BY a.tier;
CREATE STREAM enriched AS
  SELECT e.name, a.tier FROM events e LEFT JOIN accounts a ON e.name = a.id;
CREATE TABLE totals AS SELECT COUNT(*) AS n FROM raw;
CREATE STREAM nested AS
  SELECT payload.inner.value AS v, payload.list.first AS f FROM raw WHERE payload.kind = 'x';
CREATE STREAM joined_streams AS
  SELECT e.name, r.payload FROM events e FULL JOIN raw r WITHIN (1 MINUTE, 2 MINUTES)
    GRACE PERIOD 30 SECONDS ON e.name = r.name;
CREATE TABLE self_join AS
  SELECT a.name, COUNT(*) AS n FROM events a LEFT JOIN events b WITHIN 1 HOUR ON a.id = b.id
  GROUP BY a.name;
CREATE TABLE over_rows AS
  SELECT n, COUNT(*) AS names, SUM(total) AS total, AVG(total) AS mean, MIN(total) AS least,
         MAX(total) AS most, COUNT_DISTINCT(total) AS totals
  FROM (SELECT name, COUNT(*) AS n, SUM(x) AS total FROM events GROUP BY name) AS per_name
  WHERE total > 0 GROUP BY n;
CREATE TABLE over_windows AS
  WITH per_hour AS (SELECT name, COUNT(*) AS n FROM events WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY name)
  SELECT MAX(n) AS busiest FROM per_hour;
CREATE TABLE top_names AS
  SELECT name, n FROM (SELECT name, COUNT(*) AS n FROM events GROUP BY name) q
  WHERE n > 1 QUALIFY RANK() OVER (PARTITION BY n ORDER BY name DESC) <= 3;
CREATE TABLE accounts_per_tier AS
  SELECT tier, COUNT(*) AS n FROM accounts WHERE tier <> 'none' GROUP BY tier;
CREATE TABLE newest_accounts AS
  SELECT id, tier FROM accounts QUALIFY ROW_NUMBER() OVER (PARTITION BY tier ORDER BY since DESC) <= 1;
CREATE TABLE account_tiers AS
  SELECT a.id, b.tier AS other FROM accounts a LEFT JOIN accounts b ON a.tier = b.id WHERE a.id <> 'x';
CREATE TABLE tier_links AS
  SELECT b.tier, COUNT(*) AS n FROM accounts a JOIN accounts b ON a.tier = b.id GROUP BY b.tier;
CREATE TABLE several_joins WITH (JOIN_HISTORY='1 DAY') AS
  SELECT b.tier, COUNT(*) AS n FROM events e JOIN accounts a ON e.name = a.id
    LEFT JOIN accounts b ON a.tier = b.id GROUP BY b.tier;
";

/// The declarations and plans of [`PLAN_SOURCES`] and [`PLAN_STATEMENTS`],
/// planned by this checkout's SQL front end.
fn planned() -> (Vec<SourceDecl>, Vec<(CreateAs, Plan)>) {
    let mut sources = Vec::new();
    for statement in sql::parse(PLAN_SOURCES).unwrap() {
        match statement {
            Statement::CreateSource(decl) => sources.push(decl),
            other => panic!("not a declaration: {other:?}"),
        }
    }
    let mut plans = Vec::new();
    for statement in sql::parse(PLAN_STATEMENTS).unwrap() {
        match statement {
            Statement::CreateAs(create) => {
                let plan =
                    sql::plan(&create, &sources).unwrap_or_else(|e| panic!("{}: {e}", create.sql));
                plans.push((create, plan));
            }
            other => panic!("not a CREATE .. AS: {other:?}"),
        }
    }
    (sources, plans)
}

/// A catalog holding every shape [`planned`] makes, and every form of
/// the catalog's own fields: each start, a build, a kept version, a
/// failure, the optional settings set and unset.
fn shapes_catalog() -> Catalog {
    let (sources, plans) = planned();
    let starts = [
        StartFrom::Earliest,
        StartFrom::Latest,
        StartFrom::Timestamp(T0),
        StartFrom::Offsets(vec![3, 4]),
    ];
    let mut catalog = Catalog::default();
    for decl in sources {
        catalog.sources.insert(decl.name.clone(), decl);
    }
    for (i, (create, plan)) in plans.into_iter().enumerate() {
        let entry = |version: u64| VersionEntry {
            version,
            plan: plan.clone(),
            sql: Some(create.sql.clone()),
            start: starts[(i + version as usize) % starts.len()].clone(),
            started_ms: T0 + version as i64,
            first_offsets: (i % 2 == 0).then(|| vec![0, 7]),
            workers: create.parallelism,
        };
        let building = (i % 3 == 0).then(|| BuildEntry {
            entry: entry(3),
            start_offsets: vec![0, 1],
            target_offsets: vec![10, 11],
            manual: i % 2 == 0,
        });
        let grace = if i % 3 == 1 {
            vec![GraceEntry {
                entry: VersionEntry {
                    sql: None,
                    ..entry(1)
                },
                readable_until_ms: T0 + 60_000,
            }]
        } else {
            Vec::new()
        };
        let failure = (i % 4 == 2).then(|| Failure {
            version: 3,
            reason: "state store: disk full".into(),
            at_ms: T0 + 5,
            during_build: true,
        });
        catalog.views.insert(
            create.name.clone(),
            ViewEntry {
                name: create.name.clone(),
                served: entry(2),
                building,
                grace,
                failure,
                next_version: 4,
                created_ms: T0,
                keep_versions: create.keep_versions,
                version_grace_ms: create.version_grace_ms.map(|ms| ms as u64),
                parallelism: create.parallelism,
            },
        );
    }
    catalog
}

/// Writes the golden data directory again with this checkout's server:
/// the sources, the users, the views, the orders, the replacements; waits
/// until every version has processed everything, records what they serve
/// in `datadir-v1.rows.json`, stops the server cleanly (so the stores are
/// flushed) and copies the directory to `tests/fixtures/datadir-v1/`.
///
/// Run it only to make a new fixture (a new format gets a new directory):
/// `cargo test --workspace --test golden_datadir -- --ignored
/// regenerate_golden_datadir`. CI never runs ignored tests.
#[test]
#[ignore = "writes the golden fixture; run by hand only"]
fn regenerate_golden_datadir() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let server = Server::start(&data).unwrap();
    server.sql(SOURCES);
    server.produce("users", users());
    server.sql(VIEWS);
    server.produce("orders", orders());
    server.wait_caught_up();
    server.sql(REPLACEMENTS);
    server.wait_caught_up();
    let token = json!({"name": "orders-writer", "grants": ["produce:orders", "read:big_*"],
                       "produce_records_per_second": 500});
    let (status, created) = server.post("/v1/tokens", "application/json", &token.to_string());
    assert_eq!(status, 201, "{created}");
    let served = server.served();
    server.stop();
    // RocksDB's info logs (`LOG`, `LOG.old.*`) hold this machine's paths
    // and options dump; a store opens without them.
    remove_info_logs(&data.join("views"));

    let fixture = fixture_dir();
    let readme = std::fs::read(fixture.join("README.md")).ok();
    if fixture.exists() {
        std::fs::remove_dir_all(&fixture).unwrap();
    }
    copy_dir(&data, &fixture);
    if let Some(readme) = readme {
        std::fs::write(fixture.join("README.md"), readme).unwrap();
    }
    let mut text = serde_json::to_string_pretty(&served).unwrap();
    text.push('\n');
    std::fs::write(rows_file(), text).unwrap();
    std::fs::write(shapes_file(), shapes_catalog().encode().unwrap()).unwrap();

    // What was served before the stop is what a start serves again.
    let again = Server::start(&data).unwrap();
    let served_again = again.served();
    again.stop();
    if served_again != served {
        let path = std::env::temp_dir().join("golden-datadir-after-restart.json");
        std::fs::write(&path, serde_json::to_string_pretty(&served_again).unwrap()).unwrap();
        panic!(
            "a restart serves other rows (written to {})",
            path.display()
        );
    }
}

#[test]
fn the_golden_data_directory_serves_its_rows() {
    let expected: Value = serde_json::from_slice(&std::fs::read(rows_file()).unwrap()).unwrap();
    let dir = golden_copy();
    let catalog_before = std::fs::read(dir.path().join(CATALOG_FILE)).unwrap();
    let server = Server::start(dir.path()).unwrap();
    let served = server.served();
    server.stop();
    assert_eq!(
        served, expected,
        "the golden data directory serves other rows"
    );
    for file in [CATALOG_FILE, CATALOG_BACKUP_FILE] {
        assert_eq!(
            String::from_utf8(std::fs::read(dir.path().join(file)).unwrap()).unwrap(),
            String::from_utf8(catalog_before.clone()).unwrap(),
            "{file}: the catalog rewritten at start differs from the golden one"
        );
    }
}

#[test]
fn the_golden_catalog_decodes_and_encodes_byte_identical() {
    let bytes = std::fs::read(fixture_dir().join(CATALOG_FILE)).unwrap();
    let catalog = Catalog::decode(&bytes).unwrap();
    let encoded = catalog.encode().unwrap();
    assert_eq!(
        String::from_utf8(encoded).unwrap(),
        String::from_utf8(bytes.clone()).unwrap(),
        "catalog.json format 1 changed"
    );
    assert_eq!(
        std::fs::read(fixture_dir().join(CATALOG_BACKUP_FILE)).unwrap(),
        bytes,
        "the backup is a copy of the catalog"
    );
    // The fixture covers what it claims to.
    assert_eq!(catalog.sources.len(), 2);
    let per_user = &catalog.views["orders_per_user"];
    assert_eq!(per_user.served.version, 2);
    assert_eq!(per_user.grace.len(), 1);
    assert!(
        catalog.views["hopping_totals"]
            .building
            .as_ref()
            .unwrap()
            .manual
    );
    assert!(catalog.views.values().any(|v| v.served.plan.join.is_some()));
    assert!(catalog
        .views
        .values()
        .any(|v| v.served.plan.dedup.is_some()));
}

/// Starts a server on `dir`, expecting a refusal; returns its message.
fn refused(dir: &Path) -> String {
    match Server::start(dir) {
        Ok(server) => {
            server.stop();
            panic!("the server started");
        }
        Err(e) => e,
    }
}

#[test]
fn a_catalog_of_another_format_is_refused_and_left_alone() {
    let dir = golden_copy();
    let golden = std::fs::read_to_string(dir.path().join(CATALOG_FILE)).unwrap();
    assert!(
        golden.starts_with("{\n  \"format\": 1,"),
        "{}",
        &golden[..40]
    );
    // As a newer server would write it: both files, with a field and a
    // variant this server does not know (the format is read first, so the
    // refusal names the format, not the variant).
    let newer = golden
        .replacen(
            "\"format\": 1,",
            "\"format\": 2,\n  \"owner\": \"kappa 2\",",
            1,
        )
        .replace("\"emit\": \"changes\"", "\"emit\": \"sometimes\"");
    assert!(newer.contains("sometimes"));
    for file in [CATALOG_FILE, CATALOG_BACKUP_FILE] {
        std::fs::write(dir.path().join(file), &newer).unwrap();
    }
    let err = refused(dir.path());
    let path = dir.path().join(CATALOG_FILE);
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("has format 2"), "{err}");
    assert!(err.contains("reads format 1"), "{err}");
    assert!(err.contains("a newer version of kappa"), "{err}");
    for file in [CATALOG_FILE, CATALOG_BACKUP_FILE] {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(file)).unwrap(),
            newer,
            "{file} was changed"
        );
    }
}

#[test]
fn a_catalog_with_an_unknown_variant_is_refused_and_left_alone() {
    let dir = golden_copy();
    let golden = std::fs::read_to_string(dir.path().join(CATALOG_FILE)).unwrap();
    let changed = golden.replacen("\"emit\": \"changes\"", "\"emit\": \"sometimes\"", 1);
    assert_ne!(changed, golden);
    std::fs::write(dir.path().join(CATALOG_FILE), &changed).unwrap();
    let err = refused(dir.path());
    let path = dir.path().join(CATALOG_FILE);
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("unknown variant `sometimes`"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join(CATALOG_FILE)).unwrap(),
        changed
    );
}

#[test]
fn a_catalog_with_an_unknown_field_is_read_without_it() {
    let golden = std::fs::read_to_string(fixture_dir().join(CATALOG_FILE)).unwrap();
    let changed = golden.replacen(
        "\"format\": 1,",
        "\"format\": 1,\n  \"written_by\": \"a later kappa\",",
        1,
    );
    let catalog = Catalog::decode(changed.as_bytes()).unwrap();
    assert_eq!(catalog, Catalog::decode(golden.as_bytes()).unwrap());
    assert_eq!(catalog.encode().unwrap(), golden.into_bytes());
}

/// Writes the shapes catalog fixture again from [`shapes_catalog`], alone
/// (a new plan shape needs no new data directory):
/// `cargo test --workspace --test golden_datadir -- --ignored
/// regenerate_shapes_catalog`.
#[test]
#[ignore = "writes the shapes fixture; run by hand only"]
fn regenerate_shapes_catalog() {
    std::fs::write(shapes_file(), shapes_catalog().encode().unwrap()).unwrap();
}

/// Every plan shape this checkout plans is in the fixture, as the fixture
/// spells it: a new shape (or a changed spelling) fails here until the
/// fixture is written again and the change reviewed.
#[test]
fn the_shapes_fixture_holds_every_shape_this_checkout_plans() {
    let bytes = std::fs::read(shapes_file()).unwrap();
    assert_eq!(
        String::from_utf8(shapes_catalog().encode().unwrap()).unwrap(),
        String::from_utf8(bytes).unwrap(),
        "the plan shapes changed: review, then run regenerate_shapes_catalog"
    );
}

#[test]
fn the_shapes_catalog_decodes_and_encodes_byte_identical() {
    let bytes = std::fs::read(shapes_file()).unwrap();
    let catalog = Catalog::decode(&bytes).unwrap();
    assert_eq!(
        String::from_utf8(catalog.encode().unwrap()).unwrap(),
        String::from_utf8(bytes).unwrap(),
        "catalog.json format 1 changed"
    );
}

/// `value` through its stored type and back, and through JSON: the same
/// value, and JSON that reads back as the same stored value.
fn round_trips<T, S>(value: &T)
where
    T: Clone + PartialEq + std::fmt::Debug + From<S>,
    S: From<T> + serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let stored = S::from(value.clone());
    let json = serde_json::to_string_pretty(&stored).unwrap();
    let read: S = serde_json::from_str(&json).unwrap();
    assert_eq!(read, stored, "{json}");
    assert_eq!(&T::from(read), value, "{json}");
}

#[test]
fn every_plan_shape_round_trips_through_the_stored_types() {
    let (sources, plans) = planned();
    for decl in &sources {
        round_trips::<SourceDecl, StoredSourceDecl>(decl);
    }
    for (_, plan) in &plans {
        round_trips::<Plan, StoredPlan>(plan);
    }
    for start in [
        StartFrom::Earliest,
        StartFrom::Latest,
        StartFrom::Timestamp(-5),
        StartFrom::Offsets(vec![1, 2]),
    ] {
        round_trips::<StartFrom, StoredStartFrom>(&start);
    }
    // The whole catalog of every shape, and the golden one.
    let catalog = shapes_catalog();
    assert_eq!(
        Catalog::decode(&catalog.encode().unwrap()).unwrap(),
        catalog
    );
    let golden = std::fs::read(fixture_dir().join(CATALOG_FILE)).unwrap();
    let stored: StoredCatalog = serde_json::from_slice(&golden).unwrap();
    assert_eq!(StoredCatalog::from(&Catalog::from(stored.clone())), stored);
}
