//! Several Kappa nodes sharing views (issue 37): three nodes started with
//! one `--cluster-id` against a Tansu broker (a Kafka broker written by
//! others) share the catalog through the cluster's control topic — a
//! statement run on one node takes effect on all — and split the brief's
//! `purchase_stats` over a 6-partition topic through Kafka's group
//! protocol. Any node answers any key (forwarded to its partition's
//! owner) and a full read gathers every node's rows: both equal the
//! single-node answer over the built-in log fed the same records. A node
//! killed with SIGKILL loses its partitions to the others, which rebuild
//! them; the answers stay exact, and the node rejoins.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod browser;

use std::collections::BTreeMap;
use std::time::Duration;

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::events::{produce_in_chunks, Event};
use kappa_tests::*;

/// Base event time: 2026-01-01T00:00:00Z.
const BASE: i64 = 1_767_225_600_000;

/// Rows of purchase_stats: (user, window start) → (count, total).
type Rows = BTreeMap<(String, i64), (u64, f64)>;

/// `n` events of 40 users, 200 ms apart, three in five purchases.
fn events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| Event {
            user: format!("u{}", (i * 7) % 40),
            kind: if i % 5 < 3 { "purchase" } else { "view" },
            amount: (i % 97) as f64 + 0.5,
            at: BASE + 200 * i as i64,
        })
        .collect()
}

/// Produces `events` to `topic` (6 partitions) on the cluster, keyed by
/// the user, each in the partition Kafka's Java partitioner (murmur2)
/// gives its key — where the Kappa cluster looks for a key's rows.
fn produce_to_cluster(bootstrap: &str, topic: &str, events: &[Event]) {
    kappa_tests::events::produce_to_cluster(bootstrap, topic, events, |e| {
        Some(kappa_log::partition_for_key(e.user.as_bytes(), 6))
    });
}

/// The brief's `user_events`, its topic on the cluster `cluster`, keyed
/// by `user_id` (its KEY column: each user's records in one partition).
fn user_events_on(cluster: &str) -> String {
    let with = "KAFKA_TOPIC='user_events'";
    let user = "user_id VARCHAR,";
    assert!(USER_EVENTS.contains(with) && USER_EVENTS.contains(user));
    USER_EVENTS
        .replace(with, &format!("{with}, CLUSTER='{cluster}'"))
        .replace(user, "user_id VARCHAR KEY,")
}

/// A view grouping by another column than the record key: on a Kappa
/// cluster its records go through a repartition topic.
const PER_KIND: &str =
    "CREATE TABLE per_kind AS SELECT event_type, COUNT(*) AS n, SUM(amount) AS total
  FROM user_events GROUP BY event_type;";

/// Every row of per_kind through `client`: kind → (count, total); `None`
/// while a read fails.
fn kinds(client: &Client) -> Option<BTreeMap<String, (u64, f64)>> {
    let (status, body) = client.get("/v1/views/per_kind/rows?limit=100");
    if status != 200 {
        return None;
    }
    Some(
        body["rows"]
            .as_array()?
            .iter()
            .map(|r| {
                (
                    r["key"].as_str().unwrap().to_string(),
                    (
                        r["row"]["n"].as_u64().unwrap(),
                        r["row"]["total"].as_f64().unwrap(),
                    ),
                )
            })
            .collect(),
    )
}

/// purchase_stats and per_kind over the built-in log (6 partitions), fed
/// `events`.
fn reference_views(events: &[Event]) -> (Rows, BTreeMap<String, (u64, f64)>) {
    let reference = Server::start(&[]);
    reference.create_topic(&json!({"name": "user_events", "partitions": 6}));
    reference.sql_ok(USER_EVENTS);
    reference.sql_ok(PURCHASE_STATS);
    reference.sql_ok(PER_KIND);
    let client = reference.client();
    produce_in_chunks(&client, events, 500);
    eventually("the reference view", Duration::from_secs(120), || {
        let body = client.view_rows("purchase_stats", "limit=1");
        let reflected: u64 = body["as_of"]["offsets"]
            .as_array()?
            .iter()
            .map(|p| p["offset"].as_u64().unwrap())
            .sum();
        (reflected == events.len() as u64).then_some(())
    });
    let kinds = eventually("the reference per_kind", Duration::from_secs(60), || {
        let rows = kinds(&client)?;
        (rows.values().map(|(n, _)| n).sum::<u64>() == events.len() as u64).then_some(rows)
    });
    (
        kappa_tests::events::window_rows(&client, "purchase_stats", "", 1_000),
        kinds,
    )
}

/// Every row of purchase_stats read through `client` in pages of `page`,
/// and the offsets the last page reflects; `None` while a read fails
/// (partitions on the move).
fn rows_through(client: &Client, page: usize) -> Option<(Rows, Vec<u64>)> {
    rows_of_version(client, page).map(|(rows, offsets, _)| (rows, offsets))
}

/// [`rows_through`], and the version the last page was read from.
fn rows_of_version(client: &Client, page: usize) -> Option<(Rows, Vec<u64>, u64)> {
    let mut out = Rows::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(c) => format!("limit={page}&cursor={c}"),
            None => format!("limit={page}"),
        };
        let (status, answer) = client.get(&format!("/v1/views/purchase_stats/rows?{query}"));
        if status != 200 {
            return None;
        }
        for r in answer["rows"].as_array().unwrap() {
            let key = (
                r["key"].as_str().unwrap().to_string(),
                r["window_start"].as_i64().unwrap(),
            );
            let value = (
                r["row"]["purchase_count"].as_u64().unwrap(),
                r["row"]["total_amount"].as_f64().unwrap(),
            );
            assert!(out.insert(key, value).is_none(), "each row once: {answer}");
        }
        match answer["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => {
                let offsets = answer["as_of"]["offsets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["offset"].as_u64().unwrap())
                    .collect();
                return Some((out, offsets, answer["version"].as_u64().unwrap()));
            }
        }
    }
}

/// One user's rows read through `client` (a point read), and the offsets
/// the answer reflects.
fn user_rows(client: &Client, user: &str) -> Option<(Rows, Vec<u64>)> {
    let (status, answer) = client.get(&format!("/v1/views/purchase_stats/rows?key={user}"));
    if status != 200 {
        return None;
    }
    let offsets = answer["as_of"]["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["offset"].as_u64().unwrap())
        .collect();
    let rows = answer["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                (
                    r["key"].as_str().unwrap().to_string(),
                    r["window_start"].as_i64().unwrap(),
                ),
                (
                    r["row"]["purchase_count"].as_u64().unwrap(),
                    r["row"]["total_amount"].as_f64().unwrap(),
                ),
            )
        })
        .collect();
    Some((rows, offsets))
}

/// The rows of a pull query's result over purchase_stats.
fn pulled_rows(result: &Value) -> Rows {
    let mut out = Rows::new();
    for r in result["rows"].as_array().unwrap() {
        let key = (
            r["key"].as_str().unwrap().to_string(),
            r["window_start"].as_i64().unwrap(),
        );
        let value = (
            r["row"]["purchase_count"].as_u64().unwrap(),
            r["row"]["total_amount"].as_f64().unwrap(),
        );
        assert!(out.insert(key, value).is_none(), "each row once: {result}");
    }
    out
}

/// A node of the Kappa cluster `id` over the cluster `prod` at
/// `bootstrap`, on `port`.
fn node_args(bootstrap: &str, id: &str, port: u16) -> Vec<String> {
    vec![
        "--cluster".into(),
        format!("prod={bootstrap}"),
        "--cluster-id".into(),
        id.into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--advertise-url".into(),
        format!("http://127.0.0.1:{port}"),
    ]
}

fn start_node(bootstrap: &str, id: &str) -> Server {
    start_node_with(bootstrap, id, &[], &[])
}

/// [`start_node`] with more arguments and environment variables.
fn start_node_with(bootstrap: &str, id: &str, more: &[&str], env: &[(&str, &str)]) -> Server {
    let mut args = node_args(bootstrap, id, free_port());
    args.extend(more.iter().map(|a| a.to_string()));
    Server::start_env(&args.iter().map(String::as_str).collect::<Vec<_>>(), env)
}

/// The value of the Prometheus sample `name{labels…}` on `node` (0 when
/// absent), summed over the samples whose labels contain `labels`.
fn metric(node: &Server, name: &str, labels: &str) -> f64 {
    let text = node.send("GET", "/metrics", None, &[], None).text;
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Calls `done` every 100 ms, at most `tries` times, until it is true;
/// answers whether it became so.
fn poll(tries: usize, mut done: impl FnMut() -> bool) -> bool {
    (0..tries).any(|_| {
        let now = done();
        if !now {
            std::thread::sleep(Duration::from_millis(100));
        }
        now
    })
}

/// Waits until per_kind read through `client` equals `want`.
fn wait_kinds(client: &Client, want: &BTreeMap<String, (u64, f64)>, who: &str) {
    let mut last = None;
    let equal = poll(600, || {
        last = kinds(client);
        last.as_ref() == Some(want)
    });
    if !equal {
        // Which partitions' tasks lag, and where, for the failure's reader.
        let (_, view) = client.get("/v1/views/per_kind");
        let (_, cluster) = client.get("/v1/cluster");
        panic!("{who}: per_kind {last:?}, want {want:?}\nview: {view}\ncluster: {cluster}");
    }
}

/// Waits until every row read through `client` equals `want`, reflecting
/// `produced` records.
fn wait_equal(client: &Client, want: &Rows, produced: u64, who: &str) {
    let mut last = None;
    let found = poll(1_200, || {
        let got = rows_through(client, 7);
        let done = got
            .as_ref()
            .is_some_and(|(rows, offsets)| rows == want && offsets.iter().sum::<u64>() == produced);
        last = got;
        done
    });
    assert!(
        found,
        "{who}: the rows never equalled the single-node answer; last read: {:?}",
        last.map(|(rows, offsets)| (rows.len(), offsets))
    );
}

#[test]
fn three_nodes_share_a_view_and_answer_any_key_like_one_node() {
    let events = events(3_000);
    let (want, want_kinds) = reference_views(&events);

    let tansu = Tansu::start();
    tansu.create_topic("user_events", 6);
    let bootstrap = tansu.bootstrap();
    // The tasks checkpoint to an S3-compatible server every 200 ms.
    let moto = Moto::start();
    moto.create_bucket("checkpoints");
    let env = moto.client_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let more = [
        "--checkpoint-url",
        "s3://checkpoints/c1",
        "--checkpoint-interval-ms",
        "200",
    ];
    let nodes: Vec<Server> = (0..3)
        .map(|_| start_node_with(&bootstrap, "c1", &more, &env))
        .collect();

    // A statement on one node takes effect on all.
    let declared = nodes[0].sql_ok(&user_events_on("prod"));
    assert_eq!(declared[0]["topic_created"], false, "{declared:?}");
    nodes[1].sql_ok(PURCHASE_STATS);
    // A GROUP BY on another column than the record key: re-keyed through
    // a repartition topic, each kind's rows on one node.
    nodes[2].sql_ok(PER_KIND);
    for node in &nodes {
        eventually("every node knows the view", Duration::from_secs(60), || {
            (node.client().get("/v1/views/purchase_stats").0 == 200).then_some(())
        });
    }

    produce_to_cluster(&bootstrap, "user_events", &events);
    for (i, node) in nodes.iter().enumerate() {
        wait_equal(
            &node.client(),
            &want,
            events.len() as u64,
            &format!("node {i}"),
        );
    }

    // The repartitioned view equals the single node's through every node.
    for (i, node) in nodes.iter().enumerate() {
        wait_kinds(&node.client(), &want_kinds, &format!("node {i}"));
        let (status, one) = node.client().get("/v1/views/per_kind/rows?key=purchase");
        assert_eq!(status, 200, "{one}");
        assert_eq!(
            one["rows"][0]["row"]["n"].as_u64(),
            Some(want_kinds["purchase"].0),
            "{one}"
        );
    }

    // Every node checkpointed its tasks to S3.
    for node in &nodes {
        eventually("a checkpoint in S3", Duration::from_secs(60), || {
            (metric(
                node,
                "kappa_view_checkpoint_seconds_count",
                "purchase_stats",
            ) > 0.0)
                .then_some(())
        });
    }

    // GET /v1/cluster on one node has every node's work: its partitions
    // caught up, and checkpointed.
    eventually("every node's stats", Duration::from_secs(60), || {
        let (status, body) = nodes[0].client().get("/v1/cluster");
        assert_eq!(status, 200, "{body}");
        let nodes = body["nodes"].as_array()?;
        let done = nodes.len() == 3
            && nodes.iter().all(|n| {
                let view = &n["stats"]["views"]["purchase_stats@1"];
                view["lag_records"] == 0
                    && view["checkpoint_age_ms"].is_u64()
                    && !view["partitions"].as_array().is_none_or(Vec::is_empty)
            });
        done.then_some(())
    });

    // `kappa cluster` shows the three nodes up, each owning partitions.
    let shown = String::from_utf8(run_cli(&nodes[2], &["cluster"]).stdout).unwrap();
    assert!(shown.starts_with("Kappa cluster c1\n"), "{shown}");
    for node in &nodes {
        let line = shown
            .lines()
            .find(|l| l.starts_with(&node.url()))
            .unwrap_or_else(|| panic!("{} missing: {shown}", node.url()));
        assert!(line.contains("  yes  "), "{line}");
        assert!(line.contains("purchase_stats@1:"), "{line}");
    }

    // The console's cluster page shows the three nodes, up, with what
    // each owns.
    let browser = browser::Browser::start();
    browser.goto(&format!("{}/#/cluster", nodes[0].url()));
    browser.text_until("#cluster-title", |t| t == "Kappa cluster c1");
    browser.until("the three nodes up", || {
        let rows = browser.execute(
            "return [...document.querySelectorAll('#cluster-nodes tr')].slice(1)
               .map((tr) => [...tr.cells].map((c) => c.textContent));",
            vec![],
        );
        let rows = rows.as_array()?.clone();
        let up: Vec<&Value> = rows.iter().filter(|r| r[1] == "up").collect();
        let owning = rows
            .iter()
            .filter(|r| r[3] == "purchase_stats@1" && r[4] != "")
            .count();
        (up.len() == 3 && owning == 3).then_some(())
    });
    drop(browser);

    // Each node owns part of the partitions, and every key reads the same
    // through every node.
    let users: Vec<String> = want.keys().map(|(u, _)| u.clone()).collect();
    let some_users: Vec<&String> = users.iter().step_by(3).collect();
    assert!(some_users.len() >= 5, "{users:?}");
    for node in &nodes {
        for user in &some_users {
            let expected: Rows = want
                .iter()
                .filter(|((u, _), _)| u == *user)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            assert!(!expected.is_empty());
            let (rows, offsets) = user_rows(&node.client(), user).unwrap();
            assert_eq!(rows, expected, "{user}");
            // Answered by the owner of the user's partition alone.
            let partition = kappa_log::partition_for_key(user.as_bytes(), 6) as usize;
            assert!(offsets[partition] > 0, "{user}: {offsets:?}");
            assert!(
                offsets.iter().filter(|o| **o > 0).count() < 6,
                "{user}: {offsets:?}"
            );
        }
        // A key no partition holds: every node is asked, none has rows.
        let (rows, offsets) = user_rows(&node.client(), "nobody").unwrap();
        assert!(rows.is_empty(), "{rows:?}");
        assert_eq!(offsets.iter().sum::<u64>(), events.len() as u64);
    }

    // The SQL pull query answers the same through every node: a key's
    // rows from its partition's owner; window bounds without a key (a
    // window-end bound too, which the rows API has no parameter for) from
    // every node, merged.
    let from = BASE + 300_000;
    let until = BASE + 900_000;
    let bounded: Rows = want
        .iter()
        .filter(|((_, start), _)| *start >= from && *start + 300_000 <= until)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert!(!bounded.is_empty() && bounded.len() < want.len());
    for node in &nodes {
        for user in some_users.iter().take(3) {
            let pulled = node.sql_ok(&format!(
                "SELECT * FROM purchase_stats WHERE user_id = '{user}';"
            ));
            let expected: Rows = want
                .iter()
                .filter(|((u, _), _)| u == *user)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            assert_eq!(pulled_rows(&pulled[0]), expected, "{user}: {pulled:?}");
        }
        let pulled = node.sql_ok(&format!(
            "SELECT * FROM purchase_stats WHERE WINDOWSTART >= {from} AND WINDOWEND <= {until} LIMIT 10000;"
        ));
        assert_eq!(pulled[0]["truncated"], false, "{pulled:?}");
        assert_eq!(pulled_rows(&pulled[0]), bounded, "{}", node.url());
    }

    // Read-your-writes through any node: one more purchase, read at once
    // with `after` naming its offset (the records before it in its
    // partition are the ones produced above).
    let extra = Event {
        user: "u1".into(),
        kind: "purchase",
        amount: 1.5,
        at: BASE + 200 * events.len() as i64,
    };
    let partition = kappa_log::partition_for_key(extra.user.as_bytes(), 6);
    let offset = events
        .iter()
        .filter(|e| kappa_log::partition_for_key(e.user.as_bytes(), 6) == partition)
        .count();
    produce_to_cluster(&bootstrap, "user_events", std::slice::from_ref(&extra));
    let window = extra.at - extra.at.rem_euclid(300_000);
    for node in &nodes {
        let (status, body) = node.client().get(&format!(
            "/v1/views/purchase_stats/rows?key=u1&after={partition}:{offset}&max_wait_ms=30000"
        ));
        assert_eq!(status, 200, "{body}");
        let rows = body["rows"].as_array().unwrap();
        let last = rows.iter().find(|r| r["window_start"] == window);
        assert!(last.is_some(), "the new purchase is not read back: {body}");
        let (status, body) = node.client().get(&format!(
            "/v1/views/purchase_stats/rows?limit=10000&after={partition}:{offset}&max_wait_ms=30000"
        ));
        assert_eq!(status, 200, "{body}");
        assert!(
            body["as_of"]["offsets"][partition as usize]["offset"].as_u64() > Some(offset as u64),
            "{}",
            body["as_of"]
        );
    }
}

/// The rows purchase_stats holds after the records of each partition
/// before `offsets` (`events` in the order produced: a partition's
/// records get consecutive offsets in that order).
fn rows_at(events: &[Event], offsets: &[u64]) -> Rows {
    rows_in_windows(events, offsets, 300_000)
}

/// [`rows_at`] for windows of `window` ms.
fn rows_in_windows(events: &[Event], offsets: &[u64], window: i64) -> Rows {
    let mut seen = [0u64; 6];
    let mut rows = Rows::new();
    for e in events {
        let p = kappa_log::partition_for_key(e.user.as_bytes(), 6) as usize;
        let offset = seen[p];
        seen[p] += 1;
        if offset >= offsets[p] || e.kind != "purchase" {
            continue;
        }
        let start = e.at - e.at.rem_euclid(window);
        let row = rows.entry((e.user.clone(), start)).or_insert((0, 0.0));
        row.0 += 1;
        row.1 += e.amount;
    }
    rows
}

/// Reads every row through `client` in one page; when it answers, checks
/// the rows against the offsets the answer says it reflects. Answers
/// the offsets.
fn checked_read(client: &Client, events: &[Event], who: &str) -> Option<Vec<u64>> {
    let (rows, offsets) = rows_through(client, 10_000)?;
    assert_eq!(
        rows,
        rows_at(events, &offsets),
        "{who}: an answer differs from the records it says it reflects ({offsets:?})"
    );
    Some(offsets)
}

/// Reads through `client` until every answer reflects all of `events`,
/// checking each answer on the way.
fn converge(client: &Client, events: &[Event], who: &str) -> u64 {
    let mut answers = 0;
    let done = poll(1_800, || {
        let offsets = checked_read(client, events, who);
        answers += u64::from(offsets.is_some());
        offsets.is_some_and(|o| o.iter().sum::<u64>() == events.len() as u64)
    });
    assert!(done, "{who}: never reflected every record");
    answers
}

#[test]
fn a_node_killed_mid_ingest_loses_its_partitions_to_the_others_and_takes_them_back() {
    let events = events(4_000);
    let (first, second) = events.split_at(2_000);
    let tansu = Tansu::start();
    tansu.create_topic("user_events", 6);
    let bootstrap = tansu.bootstrap();
    // The tasks checkpoint to a directory the nodes share.
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().display());
    let more = ["--checkpoint-url", &url, "--checkpoint-interval-ms", "200"];
    let mut nodes: Vec<Server> = (0..3)
        .map(|_| start_node_with(&bootstrap, "c2", &more, &[]))
        .collect();
    nodes[0].sql_ok(&user_events_on("prod"));
    nodes[0].sql_ok(PURCHASE_STATS);
    nodes[1].sql_ok(PER_KIND);
    produce_to_cluster(&bootstrap, "user_events", first);
    converge(&nodes[1].client(), first, "before the kill");
    eventually("node 2 checkpointed", Duration::from_secs(60), || {
        (metric(
            &nodes[2],
            "kappa_view_checkpoint_seconds_count",
            "purchase_stats",
        ) > 0.0)
            .then_some(())
    });

    // Node 2 dies mid-ingest: the others take its partitions over and
    // rebuild them; every answer on the way matches its offsets.
    nodes[2].kill9();
    produce_to_cluster(&bootstrap, "user_events", second);
    let answers = converge(&nodes[0].client(), &events, "after the kill");
    assert!(answers > 0);
    // The partitions taken over started from node 2's checkpoints.
    let restores: f64 = nodes[..2]
        .iter()
        .map(|n| metric(n, "kappa_view_checkpoint_restores_total", "purchase_stats"))
        .sum();
    assert!(restores > 0.0, "no checkpoint was restored on takeover");
    // The repartitioned view counted every event once, though the first
    // stages taken over wrote again what they wrote since their last
    // checkpoint.
    let mut want_kinds: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for e in &events {
        let row = want_kinds.entry(e.kind.to_string()).or_insert((0, 0.0));
        row.0 += 1;
        row.1 += e.amount;
    }
    wait_kinds(&nodes[0].client(), &want_kinds, "after the kill");
    for user in ["u0", "u1", "u2", "u3"] {
        if let Some((rows, offsets)) = user_rows(&nodes[1].client(), user) {
            let want: Rows = rows_at(&events, &offsets)
                .into_iter()
                .filter(|((u, _), _)| u == user)
                .collect();
            assert_eq!(rows, want, "{user} at {offsets:?}");
        }
    }

    // It comes back and takes its partitions back; still exact.
    let dead = nodes.pop().unwrap();
    let back = dead.restart();
    converge(&back.client(), &events, "the restarted node");
    converge(&nodes[0].client(), &events, "after the rejoin");
    eventually(
        "the restarted node to own partitions again",
        Duration::from_secs(120),
        || {
            let (status, body) = back.client().get("/v1/cluster");
            (status == 200
                && body["nodes"].as_array()?.iter().any(|n| {
                    n["url"] == back.url()
                        && n["views"]["purchase_stats@1"]
                            .as_array()
                            .is_some_and(|p| !p.is_empty())
                }))
            .then_some(())
        },
    );
    converge(&back.client(), &events, "once the partitions moved back");

    // A node stopping gracefully checkpoints its tasks and leaves its
    // groups: the others take its partitions over, still exact.
    nodes[1].terminate_ok();
    converge(&nodes[0].client(), &events, "after a graceful stop");
    converge(&back.client(), &events, "after a graceful stop");
}

/// Per node URL, the partitions of purchase_stats@1 it owns and those it
/// keeps a caught-up standby of.
type Layout = BTreeMap<String, (Vec<u32>, Vec<u32>)>;

/// The [`Layout`] `GET /v1/cluster` on `node` says.
fn layout(node: &Server) -> Option<Layout> {
    let (status, body) = node.client().get("/v1/cluster");
    if status != 200 {
        return None;
    }
    let mut out = BTreeMap::new();
    for n in body["nodes"].as_array()? {
        let view = &n["stats"]["views"]["purchase_stats@1"];
        let numbers = |v: &Value| -> Vec<u32> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| p.as_u64())
                        .map(|p| p as u32)
                        .collect()
                })
                .unwrap_or_default()
        };
        let owned = numbers(&view["partitions"]);
        let standbys = view["standbys"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|s| s["staleness_ms"].is_u64())
                    .filter_map(|s| s["partition"].as_u64())
                    .map(|p| p as u32)
                    .collect()
            })
            .unwrap_or_default();
        out.insert(n["url"].as_str()?.to_string(), (owned, standbys));
    }
    Some(out)
}

/// The partitions an answer read (a nonzero offset in its `as_of`).
fn partitions_read(answer: &Value) -> Vec<u32> {
    answer["as_of"]["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["offset"].as_u64() > Some(0))
        .map(|p| p["partition"].as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn standbys_keep_partitions_warm_answer_stale_reads_and_take_a_killed_nodes_over() {
    let events = events(4_000);
    let (first, second) = events.split_at(2_000);
    let tansu = Tansu::start();
    tansu.create_topic("user_events", 6);
    let bootstrap = tansu.bootstrap();
    // No checkpoints: a partition taken over without a standby would be
    // rebuilt from its start.
    let more = ["--standby-replicas", "1"];
    let mut nodes: Vec<Server> = (0..3)
        .map(|_| start_node_with(&bootstrap, "c4", &more, &[]))
        .collect();
    nodes[0].sql_ok(&user_events_on("prod"));
    nodes[0].sql_ok(PURCHASE_STATS);
    produce_to_cluster(&bootstrap, "user_events", first);
    converge(&nodes[1].client(), first, "before the kill");

    // Every partition has one owner and one caught-up standby elsewhere.
    let all: Vec<u32> = (0..6).collect();
    let layout = eventually(
        "every partition's standby",
        Duration::from_secs(120),
        || {
            let layout = layout(&nodes[0])?;
            let mut owned: Vec<u32> = layout.values().flat_map(|(o, _)| o.clone()).collect();
            let mut standbys: Vec<u32> = layout.values().flat_map(|(_, s)| s.clone()).collect();
            owned.sort();
            standbys.sort();
            let apart = layout
                .values()
                .all(|(o, s)| s.iter().all(|p| !o.contains(p)));
            (layout.len() == 3 && owned == all && standbys == all && apart).then_some(layout)
        },
    );

    // A read accepting staleness is answered by a standby on the node
    // asked; without it, by the partition's owner.
    let (keeper_url, (kept_owned, kept)) = layout
        .iter()
        .find(|(_, (o, s))| !o.is_empty() && !s.is_empty())
        .map(|(u, v)| (u.clone(), v.clone()))
        .unwrap();
    let keeper = nodes.iter().find(|n| n.url() == keeper_url).unwrap();
    let partition = kept[0];
    let user = first
        .iter()
        .find(|e| kappa_log::partition_for_key(e.user.as_bytes(), 6) == partition)
        .map(|e| e.user.clone())
        .unwrap();
    let owner_owned = &layout
        .values()
        .find(|(o, _)| o.contains(&partition))
        .unwrap()
        .0;
    let (status, stale) = keeper.client().get(&format!(
        "/v1/views/purchase_stats/rows?key={user}&max_staleness_ms=60000"
    ));
    assert_eq!(status, 200, "{stale}");
    let read = partitions_read(&stale);
    assert!(read.contains(&partition), "{read:?}");
    assert!(
        read.iter().any(|p| kept_owned.contains(p)),
        "not answered on the node asked: {read:?}, it owns {kept_owned:?}"
    );
    let (rows, offsets) = user_rows(&keeper.client(), &user).unwrap();
    let want: Rows = rows_at(first, &offsets)
        .into_iter()
        .filter(|((u, _), _)| *u == user)
        .collect();
    assert_eq!(rows, want);
    let (status, fresh) = keeper
        .client()
        .get(&format!("/v1/views/purchase_stats/rows?key={user}"));
    assert_eq!(status, 200, "{fresh}");
    let read = partitions_read(&fresh);
    assert!(
        read.iter().all(|p| owner_owned.contains(p)),
        "not answered by the owner {owner_owned:?}: {read:?}"
    );
    let (status, bad) = keeper.client().get(&format!(
        "/v1/views/purchase_stats/rows?key={user}&max_staleness_ms=soon"
    ));
    assert_eq!(status, 400, "{bad}");

    // The node owning the most partitions dies mid-ingest: the nodes
    // keeping its standbys take them over from there, and the rows come
    // out exact.
    let victim = (0..3)
        .max_by_key(|&i| layout[&nodes[i].url()].0.len())
        .unwrap();
    let lost = layout[&nodes[victim].url()].0.len() as f64;
    nodes[victim].kill9();
    let survivors: Vec<Server> = {
        let dead = nodes.remove(victim);
        drop(dead);
        nodes
    };
    produce_to_cluster(&bootstrap, "user_events", second);
    // Reads accepting staleness go on through the takeover.
    let (status, during) = survivors[0].client().get(&format!(
        "/v1/views/purchase_stats/rows?key={user}&max_staleness_ms=60000"
    ));
    assert_eq!(status, 200, "{during}");
    converge(&survivors[0].client(), &events, "after the kill");
    converge(&survivors[1].client(), &events, "after the kill");
    let takeovers: f64 = survivors
        .iter()
        .map(|n| metric(n, "kappa_view_standby_takeovers_total", "purchase_stats"))
        .sum();
    assert!(
        takeovers >= lost,
        "{takeovers} partitions resumed from a standby, {lost} were lost"
    );
}

/// The version `node` serves of purchase_stats.
fn served(node: &Server) -> u64 {
    let (status, view) = node.client().get("/v1/views/purchase_stats");
    assert_eq!(status, 200, "{view}");
    view["served_version"]["version"].as_u64().unwrap()
}

/// Reads every row through each node; each answer must be one version's
/// rows (5-minute windows for `five`, 1-minute ones otherwise) at the
/// offsets it reports. Answers the versions read.
fn check_versions(nodes: &[&Server], events: &[Event], five: u64) -> Vec<u64> {
    nodes
        .iter()
        .filter_map(|node| {
            let (rows, offsets, version) = rows_of_version(&node.client(), 10_000)?;
            let window = if version == five { 300_000 } else { 60_000 };
            assert_eq!(
                rows,
                rows_in_windows(events, &offsets, window),
                "version {version} through {}: an answer that is not one version's rows at {offsets:?}",
                node.url()
            );
            Some(version)
        })
        .collect()
}

#[test]
fn a_replacement_swaps_in_on_every_node_together_and_a_rollback_on_one_rolls_back_all() {
    let events = events(3_000);
    let tansu = Tansu::start();
    tansu.create_topic("user_events", 6);
    let bootstrap = tansu.bootstrap();
    let nodes: Vec<Server> = (0..3).map(|_| start_node(&bootstrap, "c3")).collect();
    let all: Vec<&Server> = nodes.iter().collect();
    nodes[0].sql_ok(&user_events_on("prod"));
    nodes[0].sql_ok(PURCHASE_STATS);
    produce_to_cluster(&bootstrap, "user_events", &events);
    for node in &nodes {
        converge(&node.client(), &events, "version 1");
    }

    // A replacement on one node builds on all and swaps in on all; no
    // answer on the way mixes the versions' rows.
    nodes[2].sql_ok(
        "CREATE OR REPLACE TABLE purchase_stats AS SELECT user_id, COUNT(*) AS purchase_count,
           SUM(amount) AS total_amount FROM user_events WINDOW TUMBLING (SIZE 1 MINUTE)
           WHERE event_type = 'purchase' GROUP BY user_id;",
    );
    let mut seen = std::collections::BTreeSet::new();
    let swapped = poll(1_200, || {
        seen.extend(check_versions(&all, &events, 1));
        nodes.iter().all(|n| served(n) == 2)
    });
    assert!(swapped, "not every node swapped version 2 in");
    for node in &nodes {
        let (status, view) = node.client().get("/v1/views/purchase_stats");
        assert_eq!(status, 200);
        assert!(view["building_version"].is_null(), "{view}");
    }
    let versions = check_versions(&all, &events, 1);
    assert_eq!(versions, vec![2, 2, 2]);
    let (rows, offsets, _) = rows_of_version(&nodes[0].client(), 10_000).unwrap();
    assert_eq!(offsets.iter().sum::<u64>(), events.len() as u64);
    assert_eq!(rows, rows_in_windows(&events, &offsets, 60_000));

    // A rollback through one node's CLI rolls back every node.
    run_cli(&nodes[1], &["rollback", "purchase_stats"]);
    assert_eq!(served(&nodes[1]), 1);
    for node in &nodes {
        eventually("every node to roll back", Duration::from_secs(30), || {
            (served(node) == 1).then_some(())
        });
    }
    assert_eq!(check_versions(&all, &events, 1), vec![1, 1, 1]);
    let (rows, offsets, _) = rows_of_version(&nodes[2].client(), 10_000).unwrap();
    assert_eq!(rows, rows_at(&events, &offsets));
    assert_eq!(offsets.iter().sum::<u64>(), events.len() as u64);

    // The SQL statement on another node rolls the rollback back on every
    // node; it runs in a request of its own.
    let (status, body) = nodes[0]
        .client()
        .sql("DROP TABLE IF EXISTS nothing; ROLLBACK TABLE purchase_stats;");
    assert_eq!(status, 400, "{body}");
    assert_eq!(served(&nodes[0]), 1);
    let results = nodes[0].sql_ok("ROLLBACK TABLE purchase_stats");
    assert_eq!(results[0]["served_version"], 2, "{results:?}");
    assert_eq!(results[0]["previous_version"], 1, "{results:?}");
    for node in &nodes {
        eventually(
            "every node to serve version 2 again",
            Duration::from_secs(30),
            || (served(node) == 2).then_some(()),
        );
    }
}

/// Every row of `view` through `client`: key → (n, total); `None` while a
/// read fails.
fn counted(client: &Client, view: &str) -> Option<BTreeMap<String, (u64, f64)>> {
    let (status, body) = client.get(&format!("/v1/views/{view}/rows?limit=1000"));
    if status != 200 {
        return None;
    }
    Some(
        body["rows"]
            .as_array()?
            .iter()
            .map(|r| {
                (
                    r["key"].as_str().unwrap().to_string(),
                    (
                        r["row"]["n"].as_u64().unwrap(),
                        r["row"]["total"].as_f64().unwrap(),
                    ),
                )
            })
            .collect(),
    )
}

#[test]
fn a_join_reads_its_co_partitioned_table_per_task_and_re_keys_after_joining() {
    let tansu = Tansu::start();
    tansu.create_topic("users", 4);
    tansu.create_topic("orders", 4);
    let bootstrap = tansu.bootstrap();
    let nodes: Vec<Server> = (0..2).map(|_| start_node(&bootstrap, "c5")).collect();
    nodes[0].sql_ok(
        "CREATE TABLE users (id VARCHAR PRIMARY KEY, tier VARCHAR) WITH (KAFKA_TOPIC='users', CLUSTER='prod');
         CREATE STREAM orders (user_id VARCHAR KEY, amount DOUBLE) WITH (KAFKA_TOPIC='orders', CLUSTER='prod');
         CREATE TABLE spend_by_user AS SELECT o.user_id AS user_id, COUNT(*) AS n, SUM(o.amount) AS total
           FROM orders o JOIN users u ON o.user_id = u.id GROUP BY o.user_id;
         CREATE TABLE spend_by_tier AS SELECT u.tier AS tier, COUNT(*) AS n, SUM(o.amount) AS total
           FROM orders o JOIN users u ON o.user_id = u.id WHERE u.tier <> 'none' GROUP BY u.tier;",
    );
    let partition = |key: &str| kappa_log::partition_for_key(key.as_bytes(), 4);
    // Users u0..u19 where Kafka's Java partitioner puts them, and "x" in
    // another partition than its orders: co-partitioned tasks never see
    // that row (as in Kafka Streams). "n0" has the tier the filter drops.
    let mut users: Vec<Value> = (0..20)
        .map(|i| {
            let id = format!("u{i}");
            json!({"key": id, "partition": partition(&id), "timestamp": BASE + i,
                   "value": {"id": id, "tier": if i % 2 == 0 { "gold" } else { "basic" }}})
        })
        .collect();
    users.push(
        json!({"key": "x", "partition": (partition("x") + 1) % 4, "timestamp": BASE,
                      "value": {"id": "x", "tier": "gold"}}),
    );
    users.push(
        json!({"key": "n0", "partition": partition("n0"), "timestamp": BASE,
                      "value": {"id": "n0", "tier": "none"}}),
    );
    produce_records(&bootstrap, "users", &users);
    let buyers: Vec<String> = (0..20)
        .map(|i| format!("u{i}"))
        .chain(["x".to_string(), "n0".to_string()])
        .collect();
    let orders: Vec<(String, f64)> = (0..440)
        .map(|i| (buyers[i % buyers.len()].clone(), (i % 7) as f64 + 1.0))
        .collect();
    let records: Vec<Value> = orders
        .iter()
        .enumerate()
        .map(|(i, (user, amount))| {
            json!({"key": user, "partition": partition(user), "timestamp": BASE + 1_000 + i as i64,
                   "value": {"user_id": user, "amount": amount}})
        })
        .collect();
    produce_records(&bootstrap, "orders", &records);

    let mut by_user: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    let mut by_tier: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for (user, amount) in &orders {
        if user == "x" {
            continue;
        }
        let row = by_user.entry(user.clone()).or_insert((0, 0.0));
        row.0 += 1;
        row.1 += amount;
        if user == "n0" {
            continue;
        }
        let n: usize = user[1..].parse().unwrap();
        let tier = if n.is_multiple_of(2) { "gold" } else { "basic" };
        let row = by_tier.entry(tier.to_string()).or_insert((0, 0.0));
        row.0 += 1;
        row.1 += amount;
    }
    for (i, node) in nodes.iter().enumerate() {
        for (view, want) in [("spend_by_user", &by_user), ("spend_by_tier", &by_tier)] {
            let done = poll(1_200, || {
                counted(&node.client(), view).as_ref() == Some(want)
            });
            assert!(
                done,
                "node {i}, {view}: {:?}, want {want:?}",
                counted(&node.client(), view)
            );
        }
    }
}

/// The distinct output records of `purchases` on the cluster, each once
/// per outbox entry that holds it (Tansu 0.6 also shows an aborted
/// transaction's records, under the entry appended again), as (user,
/// event time) and how many entries hold it.
fn purchases_written(bootstrap: &str) -> BTreeMap<(String, i64), u32> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = BTreeMap::new();
    for (entry, v) in read_committed_records(bootstrap, "purchases") {
        if seen.insert((entry, v.to_string())) {
            let key = (
                v["user_id"].as_str().unwrap().to_string(),
                v["event_time"].as_i64().unwrap(),
            );
            *out.entry(key).or_insert(0) += 1;
        }
    }
    out
}

#[test]
fn a_derived_streams_partition_rebuilt_on_another_node_loses_no_record() {
    let tansu = Tansu::start();
    tansu.create_topic("user_events", 1);
    tansu.create_topic("purchases", 1);
    let bootstrap = tansu.bootstrap();
    let events = events(60);
    let is_purchase = |e: &&Event| e.kind == "purchase";
    let produce = |events: &[Event]| {
        kappa_tests::events::produce_to_cluster(&bootstrap, "user_events", events, |_| Some(0))
    };
    let mut lost = start_node(&bootstrap, "c5");
    lost.sql_ok(&user_events_on("prod"));
    lost.sql_ok(
        "CREATE STREAM purchases WITH (KAFKA_TOPIC='purchases', CLUSTER='prod') AS
         SELECT user_id, amount, event_time FROM user_events
         WHERE event_type = 'purchase' EMIT CHANGES;",
    );
    // Two commits on the node that is then lost with its disk: two outbox
    // entries, each of a few records.
    for end in [10, 20] {
        produce(&events[end - 10..end]);
        let want = events[..end].iter().filter(is_purchase).count();
        eventually("the lost node's output", Duration::from_secs(60), || {
            (purchases_written(&bootstrap).len() >= want).then_some(())
        });
    }
    lost.kill9();
    produce(&events[20..]);

    // Another node, without the lost one's store or any checkpoint,
    // builds the partition from its start: its first entry holds more
    // records than the lost node's first, and none may be skipped
    // (numbered as the lost node's first entry, it was).
    let node = start_node(&bootstrap, "c5");
    let want: Vec<(String, i64)> = events
        .iter()
        .filter(is_purchase)
        .map(|e| (e.user.clone(), e.at))
        .collect();
    let mut written = BTreeMap::new();
    let complete = poll(150, || {
        written = purchases_written(&bootstrap);
        want.iter().all(|w| written.contains_key(w))
    });
    assert!(
        complete,
        "records never written: {:?}\nnode log:\n{}",
        want.iter()
            .filter(|w| !written.contains_key(*w))
            .collect::<Vec<_>>(),
        node.stderr_log()
    );
    // What the lost node had not written comes once. What it had comes
    // again: Tansu 0.6 keeps no offset-commit metadata, so the new node
    // does not learn how far the lost one read (with it, those are
    // dropped: processor/tests/lost_run.rs).
    for e in events[20..].iter().filter(is_purchase) {
        assert_eq!(written[&(e.user.clone(), e.at)], 1, "{e:?}: {written:?}");
    }
    assert!(
        node.stderr_log()
            .contains("outbox entries of a run whose state is lost"),
        "{}",
        node.stderr_log()
    );
}
