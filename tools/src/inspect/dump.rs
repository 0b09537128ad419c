//! `dump`: the batches of one partition from an offset, and with
//! `--records` their records (key, value, headers, timestamp; bytes shown
//! as UTF-8 text when valid, else hex). `max` bounds the records covered.
//! A bad batch ends the dump with the problem, after what came before it.

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use super::walk::{self, BatchInfo};
use super::{layout, text, Problem};

/// One record as dumped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DumpRecord {
    /// Its offset.
    pub offset: u64,
    /// Its timestamp, ms.
    pub timestamp: i64,
    /// Key as text or `0x…` hex; `None` for a null key.
    pub key: Option<String>,
    /// Value as text or `0x…` hex.
    pub value: String,
    /// Headers (name, value as text or hex).
    pub headers: Vec<(String, String)>,
}

/// One batch as dumped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DumpBatch {
    /// The `.log` file holding it.
    pub segment: String,
    /// Header facts.
    #[serde(flatten)]
    pub info: BatchInfo,
    /// Its records at or after `from` (only with `--records`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<DumpRecord>>,
}

/// The result of `dump`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dump {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// First offset asked for.
    pub from: u64,
    /// Batches holding records from `from` on, up to `max` records.
    pub batches: Vec<DumpBatch>,
    /// The bad batch that ended the dump, if any.
    pub problem: Option<Problem>,
}

/// What to dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpRequest<'a> {
    /// Topic name.
    pub topic: &'a str,
    /// Partition number.
    pub partition: u32,
    /// First offset.
    pub from: u64,
    /// Most records to cover.
    pub max_records: u64,
    /// Include the records themselves.
    pub records: bool,
}

/// Dumps batches (and records) of one partition.
pub fn dump(data_dir: &Path, req: DumpRequest<'_>) -> anyhow::Result<Dump> {
    let topics = layout::topics(data_dir, Some(req.topic))?;
    let topic = &topics[0];
    layout::partitions(topic, Some(req.partition))?;
    let files = layout::segments(&topic.partition_dir(req.partition))?;
    let mut out = Dump {
        topic: req.topic.to_owned(),
        partition: req.partition,
        from: req.from,
        batches: Vec::new(),
        problem: None,
    };
    let mut covered = 0u64;
    for (i, f) in files.iter().enumerate() {
        // Skip segments that end before `from`.
        if files
            .get(i + 1)
            .is_some_and(|next| next.base_offset <= req.from)
        {
            continue;
        }
        let w = walk::walk(&f.paths.log, f.base_offset, i + 1 == files.len())?;
        for info in &w.batches {
            if covered >= req.max_records {
                return Ok(out);
            }
            if info.base_offset + u64::from(info.record_count) <= req.from {
                continue;
            }
            let first = info.base_offset.max(req.from);
            let in_batch = info.base_offset + u64::from(info.record_count) - first;
            let take = in_batch.min(req.max_records - covered);
            covered += take;
            let records = match (req.records, w.view(info)) {
                (false, _) => None,
                (true, Some(view)) => Some(
                    view.records()
                        .filter(|r| r.offset >= first)
                        .take(take as usize)
                        .map(|r| DumpRecord {
                            offset: r.offset,
                            timestamp: r.timestamp,
                            key: r.key.as_deref().map(text::bytes),
                            value: text::bytes(&r.value),
                            headers: r
                                .headers
                                .iter()
                                .map(|h| (h.name.clone(), text::bytes(&h.value)))
                                .collect(),
                        })
                        .collect(),
                ),
                (true, None) => Some(Vec::new()),
            };
            out.batches.push(DumpBatch {
                segment: f.paths.log.display().to_string(),
                info: info.clone(),
                records,
            });
        }
        if w.problem.is_some() {
            out.problem = w.problem;
            return Ok(out);
        }
    }
    Ok(out)
}

/// The text form: a line per batch, an indented line per record.
pub fn render(dump: &Dump) -> String {
    let mut out = String::new();
    let mut segment = "";
    for b in &dump.batches {
        if b.segment != segment {
            segment = &b.segment;
            let _ = writeln!(out, "segment {segment}");
        }
        let i = &b.info;
        let _ = write!(
            out,
            "batch offsets {}..={} ({} records) at byte {}, {} bytes, first_time {}, max_time {}, append_time {}",
            i.base_offset,
            i.last_offset(),
            i.record_count,
            i.position,
            i.len,
            text::time(i.first_timestamp),
            text::time(i.max_timestamp),
            text::time(i.append_time),
        );
        if let Some(key) = &i.idempotency_key {
            let _ = write!(out, ", idempotency_key {key:?}");
        }
        out.push('\n');
        for r in b.records.iter().flatten() {
            let _ = write!(
                out,
                "  offset {} time {} key {} value {}",
                r.offset,
                text::time(r.timestamp),
                r.key.as_deref().unwrap_or("(null)"),
                r.value
            );
            for (name, value) in &r.headers {
                let _ = write!(out, " header {name}={value}");
            }
            out.push('\n');
        }
    }
    if dump.batches.is_empty() && dump.problem.is_none() {
        let _ = writeln!(
            out,
            "no records at or after offset {} in topic {} partition {}",
            dump.from, dump.topic, dump.partition
        );
    }
    if let Some(p) = &dump.problem {
        let _ = writeln!(out, "problem: {p}");
    }
    out
}
