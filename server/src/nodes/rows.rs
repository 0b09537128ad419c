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
//!
//! A pull query (`SELECT .. FROM view WHERE ..`) is read the same way: its
//! key and window bounds become the forwarded read's query string, and the
//! window-end bounds and scan cap the rows API has no parameter for travel
//! in the header [`ROW_FILTER`], which only a forwarded read honours.

use std::time::{Duration, Instant};

use kappa_processor::view::{merge_pages, Page, RowFilter, TimeRange, ViewQuery, ViewRow};

use super::Nodes;
use crate::dto::{cursor_bytes, cursor_text, AsOfOut, PartitionOffset, RowsOut};
use crate::views::{RowsOutExt, RowsRequest, SpreadRows, ViewManager};

/// Header of a read one node forwards to another: answer from your own
/// tasks only. Its value is [`TO_OWNER`] or [`GATHER`].
pub const FORWARDED: &str = "kappa-forwarded";

/// [`FORWARDED`] of a key's read sent to the owner of its partition.
pub const TO_OWNER: &str = "owner";

/// [`FORWARDED`] of a read gathering every node's rows.
pub const GATHER: &str = "gather";

/// [`FORWARDED`] of a key's read (with `max_staleness_ms`) sent to the
/// node keeping its partition's standby, when the owner did not answer.
pub const STANDBY: &str = "standby";

/// Header of a forwarded read's answer: the partitions it read.
pub const PARTITIONS: &str = "kappa-partitions";

/// Header of a forwarded read: the pull query's row filter
/// ([`filter_text`]), which the rows API's parameters cannot say.
pub const ROW_FILTER: &str = "kappa-row-filter";

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

impl Incoming {
    /// A read made here (a pull query) rather than received: its query
    /// string said again from `request`.
    pub fn of_request(view: &str, request: &RowsRequest, authorization: Option<String>) -> Self {
        Incoming {
            view: view.to_string(),
            query: query_string(request),
            authorization,
        }
    }
}

/// The rows API's query string asking what `request` asks (but its
/// [`RowFilter`], which goes in [`ROW_FILTER`]).
pub fn query_string(request: &RowsRequest) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    match &request.query {
        ViewQuery::Key(key) => {
            q.append_pair("key", key);
        }
        ViewQuery::KeyWindows { key, from, to } => {
            q.append_pair("key", key);
            q.append_pair("from", &from.to_string());
            q.append_pair("to", &to.to_string());
        }
        ViewQuery::Prefix(prefix) => {
            q.append_pair("prefix", prefix);
        }
        // Key lists and ranges are pull queries' reads, answered by the
        // node that runs them (`statements::pull` refuses them for a view
        // spread over nodes): they are never forwarded.
        ViewQuery::Keys(_) | ViewQuery::Range { .. } | ViewQuery::All => {}
    }
    q.append_pair("limit", &request.limit.to_string());
    if let Some(cursor) = &request.cursor {
        q.append_pair("cursor", &cursor_text(cursor));
    }
    if let Some(version) = request.version {
        q.append_pair("version", &version.to_string());
    }
    q.finish()
}

/// A row filter as [`ROW_FILTER`] says it: the window-start and
/// window-end bounds (`from..to`, either side empty when open) and the
/// scan cap (empty when none), separated by `;`.
pub fn filter_text(filter: &RowFilter) -> String {
    let bound = |t: Option<i64>| t.map(|t| t.to_string()).unwrap_or_default();
    let range = |r: &TimeRange| format!("{}..{}", bound(r.from_ms), bound(r.to_ms));
    format!(
        "{};{};{}",
        range(&filter.window_start),
        range(&filter.window_end),
        filter
            .max_scanned
            .map(|n| n.to_string())
            .unwrap_or_default()
    )
}

/// The row filter [`filter_text`] said, or `None` when `text` is not one.
pub fn parse_filter(text: &str) -> Option<RowFilter> {
    let bound = |t: &str| -> Option<Option<i64>> {
        if t.is_empty() {
            Some(None)
        } else {
            t.parse().ok().map(Some)
        }
    };
    let range = |r: &str| -> Option<TimeRange> {
        let (from, to) = r.split_once("..")?;
        Some(TimeRange {
            from_ms: bound(from)?,
            to_ms: bound(to)?,
        })
    };
    let mut parts = text.split(';');
    let window_start = range(parts.next()?)?;
    let window_end = range(parts.next()?)?;
    let scanned = parts.next()?;
    let max_scanned = if scanned.is_empty() {
        None
    } else {
        Some(scanned.parse().ok()?)
    };
    parts.next().is_none().then_some(RowFilter {
        window_start,
        window_end,
        max_scanned,
    })
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
        ViewQuery::Prefix(_) | ViewQuery::Keys(_) | ViewQuery::Range { .. } | ViewQuery::All => {
            None
        }
    }
}

/// Whether a forwarded read may be answered here: a key's read only by
/// its partition's owner, or (`max_staleness`) a standby fresh enough.
pub fn answers_read(
    spread: &SpreadRows,
    query: &ViewQuery,
    max_staleness: Option<Duration>,
) -> bool {
    key_of(query)
        .is_none_or(|k| spread.answers(partition_of_key(k, spread.partitions), max_staleness))
}

/// The rows `request` asks of `incoming.view`, whose served (or asked)
/// version is `spread`, from the nodes holding them.
pub fn rows(
    views: &ViewManager,
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
                let at = (partition, spread.partitions as u32);
                match read_key(views, nodes, incoming, &request, &version, at) {
                    // Not where Kafka's Java partitioner puts the key (a
                    // producer with another partitioner): ask every node.
                    Ok(out) if out.rows.is_empty() => {
                        let owners_only = RowsRequest {
                            max_staleness: None,
                            ..request.clone()
                        };
                        gather(views, nodes, incoming, &owners_only, spread.partitions)
                    }
                    other => other,
                }
            }
            None => {
                // Each partition from its owner: a standby's rows would
                // double it.
                let owners_only = RowsRequest {
                    max_staleness: None,
                    ..request.clone()
                };
                gather(views, nodes, incoming, &owners_only, spread.partitions)
            }
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
    views: &ViewManager,
    view: &str,
    request: &RowsRequest,
) -> Result<(RowsOut, Vec<u32>), Retry> {
    let answer = views
        .rows(view, request)
        .map_err(|e| Retry(format!("this node: {e}")))?;
    let held = answer.partitions_read.clone().unwrap_or_default();
    Ok((RowsOut::from_answer(view.to_string(), answer), held))
}

fn read_key(
    views: &ViewManager,
    nodes: &Nodes,
    incoming: &Incoming,
    request: &RowsRequest,
    version: &str,
    (partition, partitions): (u32, u32),
) -> Result<RowsOut, Retry> {
    let here = views
        .spread_of(&incoming.view, request.version)
        .map_err(|e| Retry(e.to_string()))?
        .is_some_and(|s| s.answers(partition, request.max_staleness));
    if here {
        let (out, held) = local(views, &incoming.view, request)?;
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
    match forward(&owner, incoming, request, TO_OWNER) {
        Ok((out, _)) => Ok(out),
        // The owner did not answer (it died, and the group has not moved
        // its partitions yet): a read accepting staleness asks the node
        // keeping the partition's standby.
        Err(Retry(why)) if request.max_staleness.is_some() => {
            let standby = nodes
                .standby_of(version, partitions, partition)
                .filter(|s| *s != nodes.node())
                .ok_or(Retry(why))?;
            let (out, _) = forward(&standby, incoming, request, STANDBY)?;
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

fn gather(
    views: &ViewManager,
    nodes: &Nodes,
    incoming: &Incoming,
    request: &RowsRequest,
    partitions: usize,
) -> Result<RowsOut, Retry> {
    let mut answers = vec![local(views, &incoming.view, request)?];
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
    if request.filter != RowFilter::default() {
        call = call.set(ROW_FILTER, &filter_text(&request.filter));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_filter_reads_back_as_written() {
        let filters = [
            RowFilter::default(),
            RowFilter {
                window_start: TimeRange {
                    from_ms: Some(-5),
                    to_ms: None,
                },
                window_end: TimeRange {
                    from_ms: None,
                    to_ms: Some(1_767_225_600_000),
                },
                max_scanned: Some(1_000_000),
            },
        ];
        for filter in filters {
            assert_eq!(parse_filter(&filter_text(&filter)), Some(filter));
        }
        for bad in ["", "..;..", "..;..;;", "x..;..;", "1..2;..;x", "1-2;..;"] {
            assert_eq!(parse_filter(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_query_string_says_the_request_again() {
        let request = RowsRequest {
            max_staleness: None,
            test: None,
            query: ViewQuery::KeyWindows {
                key: "a b&c".into(),
                from: 10,
                to: 20,
            },
            filter: RowFilter::default(),
            cursor: None,
            limit: 7,
            version: Some(3),
            after: Vec::new(),
            max_wait: Duration::ZERO,
        };
        assert_eq!(
            query_string(&request),
            "key=a+b%26c&from=10&to=20&limit=7&version=3"
        );
    }
}
