//! Rows of a view spread over the nodes of a Kappa cluster, from any node.
//!
//! A key's rows live in the task of the key's partition — the partition
//! Kafka's Java partitioner gives the key (murmur2 of its bytes), which
//! is where producers put records keyed by the view's `GROUP BY` key. A
//! read of a key is answered here when this node owns that partition, and
//! otherwise forwarded to the owner the control topic names; when that
//! finds no rows (a producer that partitions otherwise, such as
//! librdkafka's default `consistent_random`), every node is asked. A
//! prefix or full read gathers one page from every node and merges them
//! in key order ([`kappa_processor::view::merge_pages`]).
//!
//! A node answering a forwarded read (header [`FORWARDED`]) reads only its
//! own tasks and says which partitions it read (header [`PARTITIONS`]). A
//! read sent to a key's owner ([`TO_OWNER`]) is answered `421 not_owner` by
//! a node that does not own the key's partition; a gathering one
//! ([`GATHER`]) is answered from whatever partitions the node owns.
//! The asking node checks that the answers cover every partition: while
//! partitions move (a node joined, left or died) it asks again, and after
//! [`HANDOVER_WAIT`] answers `503 partitions_unavailable` — never rows
//! that miss a partition.

use std::time::{Duration, Instant};

use kappa_processor::view::{merge_pages, Page, ViewQuery, ViewRow};

use super::Nodes;
use crate::dto::{cursor_bytes, cursor_text, AsOfOut, PartitionOffset, RowsOut};
use crate::views::{RowsOutExt, RowsRequest, SpreadRows};
use crate::AppState;

/// Header of a read one node forwards to another: answer from your own
/// tasks only. Its value is [`TO_OWNER`] or [`GATHER`].
pub const FORWARDED: &str = "kappa-forwarded";

/// [`FORWARDED`] of a key's read sent to the owner of its partition.
pub const TO_OWNER: &str = "owner";

/// [`FORWARDED`] of a read gathering every node's rows.
pub const GATHER: &str = "gather";

/// Header of a forwarded read's answer: the partitions it read.
pub const PARTITIONS: &str = "kappa-partitions";

/// How long a read waits for partitions on the move before it gives up.
pub const HANDOVER_WAIT: Duration = Duration::from_secs(10);

/// How long one forwarded read may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a read across nodes was not answered.
#[derive(Debug)]
pub struct RowsError {
    /// The HTTP status.
    pub status: u16,
    /// The error code.
    pub code: &'static str,
    /// What happened.
    pub message: String,
}

impl RowsError {
    fn new(status: u16, code: &'static str, message: String) -> RowsError {
        RowsError {
            status,
            code,
            message,
        }
    }
}

/// A read as it came in, to pass on.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The view.
    pub view: String,
    /// The query string, as given.
    pub query: String,
    /// The `Authorization` header, as given.
    pub authorization: Option<String>,
}

/// The partition of a view's key: where Kafka's default partitioner puts
/// a record with that key.
pub fn partition_of_key(key: &str, partitions: usize) -> u32 {
    kappa_log::partition_for_key(key.as_bytes(), partitions.max(1) as u32)
}

/// The key a query reads, when it reads one.
fn key_of(query: &ViewQuery) -> Option<&str> {
    match query {
        ViewQuery::Key(k) | ViewQuery::KeyWindows { key: k, .. } => Some(k),
        ViewQuery::Prefix(_) | ViewQuery::All => None,
    }
}

/// Whether a forwarded read may be answered here: a key's read only by
/// its partition's owner.
pub fn owns_read(spread: &SpreadRows, query: &ViewQuery) -> bool {
    key_of(query).is_none_or(|k| {
        spread
            .owned
            .contains(&partition_of_key(k, spread.partitions))
    })
}

/// The rows `request` asks of `incoming.view`, whose served (or asked)
/// version is `spread`, from the nodes holding them.
pub fn rows(
    state: &AppState,
    nodes: &Nodes,
    incoming: &Incoming,
    request: &RowsRequest,
    spread: &SpreadRows,
) -> Result<RowsOut, RowsError> {
    let deadline = Instant::now() + HANDOVER_WAIT;
    let version = format!("{}@{}", incoming.view, spread.version);
    let mut request = request.clone();
    request.version = Some(spread.version);
    loop {
        let attempt = match key_of(&request.query) {
            Some(key) => {
                let partition = partition_of_key(key, spread.partitions);
                match read_key(state, nodes, incoming, &request, &version, partition) {
                    // Not where Kafka's Java partitioner puts the key (a
                    // producer with another partitioner): ask every node.
                    Ok(out) if out.rows.is_empty() => {
                        gather(state, nodes, incoming, &request, spread.partitions)
                    }
                    other => other,
                }
            }
            None => gather(state, nodes, incoming, &request, spread.partitions),
        };
        match attempt {
            Ok(out) => return Ok(out),
            Err(Retry(why)) if Instant::now() < deadline => {
                tracing::debug!(view = %incoming.view, why, "partitions on the move; asking again");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(Retry(why)) => {
                return Err(RowsError::new(
                    503,
                    "partitions_unavailable",
                    format!(
                        "view {:?}: {why} (waited {} s for partitions on the move)",
                        incoming.view,
                        HANDOVER_WAIT.as_secs()
                    ),
                ))
            }
        }
    }
}

/// A read to try again: partitions are moving, or a node did not answer.
struct Retry(String);

/// This node's rows for `request` (its own tasks), and the partitions
/// they come from.
fn local(
    state: &AppState,
    view: &str,
    request: &RowsRequest,
) -> Result<(RowsOut, Vec<u32>), Retry> {
    let answer = state
        .views
        .rows(view, request)
        .map_err(|e| Retry(format!("this node: {e}")))?;
    let held = answer.partitions_read.clone().unwrap_or_default();
    Ok((RowsOut::from_answer(view.to_string(), answer), held))
}

fn read_key(
    state: &AppState,
    nodes: &Nodes,
    incoming: &Incoming,
    request: &RowsRequest,
    version: &str,
    partition: u32,
) -> Result<RowsOut, Retry> {
    let here = state
        .views
        .spread_of(&incoming.view, request.version)
        .map_err(|e| Retry(e.to_string()))?
        .is_some_and(|s| s.owned.contains(&partition));
    if here {
        let (out, held) = local(state, &incoming.view, request)?;
        if !held.contains(&partition) {
            return Err(Retry(format!("partition {partition} left this node")));
        }
        return Ok(out);
    }
    let owner = nodes
        .owner(version, partition)
        .ok_or_else(|| Retry(format!("no node owns partition {partition}")))?;
    if owner == nodes.node() {
        return Err(Retry(format!(
            "partition {partition} is being taken over here"
        )));
    }
    let (out, _) = forward(&owner, incoming, request, TO_OWNER)?;
    Ok(out)
}

fn gather(
    state: &AppState,
    nodes: &Nodes,
    incoming: &Incoming,
    request: &RowsRequest,
    partitions: usize,
) -> Result<RowsOut, Retry> {
    let mut answers = vec![local(state, &incoming.view, request)?];
    for (_, peer) in nodes.peers() {
        match forward(&peer.url, incoming, request, GATHER) {
            Ok(answer) => answers.push(answer),
            // A node that stopped: its partitions are someone else's soon.
            Err(Retry(why)) => tracing::debug!(node = %peer.url, why, "no answer"),
        }
    }
    // Every partition read once: none missing (a node gone, its
    // partitions not yet taken over), none twice (handed over while read).
    let mut held_by = vec![0u32; partitions];
    for (_, held) in &answers {
        for &p in held {
            if let Some(n) = held_by.get_mut(p as usize) {
                *n += 1;
            }
        }
    }
    if let Some(p) = held_by.iter().position(|n| *n == 0) {
        return Err(Retry(format!("no node answered for partition {p}")));
    }
    if let Some(p) = held_by.iter().position(|n| *n > 1) {
        return Err(Retry(format!("partition {p} is being handed over")));
    }
    Ok(merge(answers, request.limit, partitions))
}

/// Asks the node at `url` for its own rows of `request` (`how`:
/// [`TO_OWNER`] or [`GATHER`]); answers them and the partitions they come
/// from.
fn forward(
    url: &str,
    incoming: &Incoming,
    request: &RowsRequest,
    how: &str,
) -> Result<(RowsOut, Vec<u32>), Retry> {
    let mut target = format!(
        "{}/v1/views/{}/rows?{}",
        url.trim_end_matches('/'),
        incoming.view,
        incoming.query
    );
    // A read-your-writes read waits for the served version on each node
    // (`after` is not given with `version`).
    if let Some(v) = request.version.filter(|_| request.after.is_empty()) {
        if !incoming.query.split('&').any(|p| p.starts_with("version=")) {
            if !incoming.query.is_empty() {
                target.push('&');
            }
            target.push_str(&format!("version={v}"));
        }
    }
    let mut call = ureq::get(&target)
        .timeout(FORWARD_TIMEOUT)
        .set(FORWARDED, how);
    if let Some(auth) = &incoming.authorization {
        call = call.set("authorization", auth);
    }
    match call.call() {
        Ok(response) => {
            let held = response
                .header(PARTITIONS)
                .map(parse_partitions)
                .unwrap_or_default();
            let out: RowsOut = response
                .into_json()
                .map_err(|e| Retry(format!("node {url}: {e}")))?;
            Ok((out, held))
        }
        Err(ureq::Error::Status(421 | 503, _)) => {
            Err(Retry(format!("node {url} does not hold the partition now")))
        }
        Err(ureq::Error::Status(status, response)) => {
            let body = response.into_string().unwrap_or_default();
            Err(Retry(format!("node {url} answered {status}: {body}")))
        }
        Err(e) => Err(Retry(format!("node {url}: {e}"))),
    }
}

/// `0,3,5` as partitions.
pub fn parse_partitions(text: &str) -> Vec<u32> {
    text.split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

/// The partitions as [`PARTITIONS`] says them.
pub fn partitions_text(partitions: &[u32]) -> String {
    partitions
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// One answer from the nodes' answers (each of its own partitions).
fn merge(answers: Vec<(RowsOut, Vec<u32>)>, limit: usize, partitions: usize) -> RowsOut {
    let mut offsets = vec![0u64; partitions];
    let mut watermark: Option<i64> = None;
    let mut pages = Vec::with_capacity(answers.len());
    let mut first: Option<RowsOut> = None;
    let mut catching_up = false;
    for (out, held) in answers {
        for o in &out.as_of.offsets {
            if held.contains(&o.partition) {
                if let Some(slot) = offsets.get_mut(o.partition as usize) {
                    *slot = o.offset;
                }
            }
        }
        if let Some(w) = out.as_of.watermark {
            watermark = Some(watermark.map_or(w, |m| m.min(w)));
        }
        catching_up |= out.catching_up;
        pages.push(Page {
            rows: out
                .rows
                .iter()
                .map(|r| ViewRow {
                    key: r.key.clone(),
                    window_start: r.window_start,
                    window_end: r.window_end,
                    row: r.row.clone(),
                })
                .collect(),
            next_cursor: out.next_cursor.as_deref().and_then(cursor_bytes),
            scanned: 0,
            scan_limited: false,
        });
        first.get_or_insert(out);
    }
    let page = merge_pages(pages, limit);
    let first = first.expect("this node's answer is always there");
    RowsOut {
        view: first.view,
        version: first.version,
        columns: first.columns,
        rows: page
            .rows
            .into_iter()
            .map(|r| crate::dto::RowOut {
                key: r.key,
                window_start: r.window_start,
                window_end: r.window_end,
                row: r.row,
            })
            .collect(),
        next_cursor: page.next_cursor.as_deref().map(cursor_text),
        as_of: AsOfOut {
            offsets: offsets
                .into_iter()
                .enumerate()
                .map(|(p, offset)| PartitionOffset {
                    partition: p as u32,
                    offset,
                })
                .collect(),
            watermark,
        },
        catching_up,
    }
}
