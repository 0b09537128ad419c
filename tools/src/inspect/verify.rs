//! `verify`: walks every segment of every partition (of one topic or all)
//! and checks every batch (length, CRC, magic, version, structure), that
//! offsets are contiguous within and across segments, and that every index
//! entry points to the right batch, offset and timestamp.
//!
//! Each partition is an independent log, so verification stops at the
//! *first* problem of a partition (everything after it is untrusted) and
//! goes on with the next partition. Order within a segment: its `.log`
//! first (the truth), then `.index`, then `.timeindex`.

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use super::{indexes, layout, walk, Problem};

/// The verification of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionCheck {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// Segments walked.
    pub segments: usize,
    /// Valid batches checked.
    pub batches: u64,
    /// Records in them.
    pub records: u64,
    /// The first problem, if any.
    pub problem: Option<Problem>,
    /// Observations that are not problems (e.g. a sealed segment without
    /// index files, which the log rebuilds at open).
    pub notes: Vec<String>,
}

/// The result of `verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// True when no partition has a problem.
    pub clean: bool,
    /// One entry per partition checked.
    pub partitions: Vec<PartitionCheck>,
}

impl VerifyReport {
    /// The first problem found, in topic, partition and file order.
    pub fn first_problem(&self) -> Option<&Problem> {
        self.partitions.iter().find_map(|p| p.problem.as_ref())
    }
}

/// Verifies the partitions of `topic` (or of every topic) in `data_dir`.
pub fn verify(data_dir: &Path, topic: Option<&str>) -> anyhow::Result<VerifyReport> {
    let mut partitions = Vec::new();
    for t in layout::topics(data_dir, topic)? {
        for p in layout::partitions(&t, None)? {
            let mut check = PartitionCheck {
                topic: t.name.clone(),
                partition: p,
                segments: 0,
                batches: 0,
                records: 0,
                problem: None,
                notes: Vec::new(),
            };
            check_partition(&t.partition_dir(p), &mut check)?;
            partitions.push(check);
        }
    }
    Ok(VerifyReport {
        clean: partitions.iter().all(|p| p.problem.is_none()),
        partitions,
    })
}

fn check_partition(dir: &Path, check: &mut PartitionCheck) -> anyhow::Result<()> {
    if !dir.is_dir() {
        check.problem = Some(Problem {
            path: dir.to_owned(),
            position: 0,
            batch_base_offset: None,
            entry: None,
            what: "partition directory missing".into(),
            expected: "a directory".into(),
            found: "nothing".into(),
        });
        return Ok(());
    }
    let files = layout::segments(dir)?;
    if files.is_empty() {
        check
            .notes
            .push("no segment yet (created at the next open)".into());
    }
    let mut expected_next: Option<(u64, bool)> = None;
    for (i, f) in files.iter().enumerate() {
        let active = i + 1 == files.len();
        if let Some((next, after_compacted)) = expected_next {
            // After a compacted batch the offsets up to the next segment
            // may be gone (log/FORMAT.md §2.9).
            if f.base_offset != next && !(after_compacted && f.base_offset > next) {
                check.problem = Some(Problem {
                    path: f.paths.log.clone(),
                    position: 0,
                    batch_base_offset: Some(f.base_offset),
                    entry: None,
                    what: "offsets not contiguous across segments".into(),
                    expected: format!(
                        "the segment after the previous one to start at offset {next}"
                    ),
                    found: format!("a segment starting at offset {}", f.base_offset),
                });
                return Ok(());
            }
        }
        let w = walk::walk(&f.paths.log, f.base_offset, active)?;
        check.segments += 1;
        check.batches += w.batches.len() as u64;
        check.records += w
            .batches
            .iter()
            .map(|b| u64::from(b.record_count))
            .sum::<u64>();
        if let Some(problem) = w.problem.clone() {
            check.problem = Some(problem);
            return Ok(());
        }
        if !active && w.batches.is_empty() {
            check.notes.push(format!(
                "{}: sealed segment without batches",
                f.paths.log.display()
            ));
        }
        let missing: Vec<&str> = [
            (&f.paths.index, ".index"),
            (&f.paths.time_index, ".timeindex"),
        ]
        .into_iter()
        .filter(|(path, _)| !path.exists())
        .map(|(_, ext)| ext)
        .collect();
        if active && missing.len() < 2 {
            check.notes.push(format!(
                "{}: index files of the active segment are deleted and rebuilt at open",
                f.paths.log.display()
            ));
        } else if !active && !missing.is_empty() {
            check.notes.push(format!(
                "{}: {} missing (rebuilt at open)",
                f.paths.log.display(),
                missing.join(" and ")
            ));
        }
        let index_problem = match indexes::check_offset_index(&f.paths.index, &w)? {
            Some(p) => Some(p),
            None => indexes::check_time_index(&f.paths.time_index, &w)?,
        };
        if index_problem.is_some() {
            check.problem = index_problem;
            return Ok(());
        }
        expected_next = Some((w.next_offset, w.batches.last().is_some_and(|b| b.compacted)));
    }
    Ok(())
}

/// The text form: one line per partition, then the first problem precisely.
pub fn render(report: &VerifyReport) -> String {
    let mut out = String::new();
    for p in &report.partitions {
        let status = if p.problem.is_some() { "PROBLEM" } else { "ok" };
        let _ = writeln!(
            out,
            "{status:7} topic {} partition {}: {} segment(s), {} batches, {} records checked",
            p.topic, p.partition, p.segments, p.batches, p.records
        );
        for note in &p.notes {
            let _ = writeln!(out, "        note: {note}");
        }
        if let Some(problem) = &p.problem {
            let _ = writeln!(out, "        {problem}");
        }
    }
    match report.first_problem() {
        None => out.push_str("clean\n"),
        Some(problem) => {
            let _ = writeln!(out, "first problem: {problem}");
        }
    }
    out
}
