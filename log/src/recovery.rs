//! Opening a partition directory after a clean stop or a crash.
//!
//! Sealed segments were fsynced when they were sealed, so they are trusted
//! as they are (their indexes are checked, and rebuilt if missing or
//! damaged, when first opened; their batches are CRC-checked on every read).
//! The active (last) segment is scanned batch by batch. A bad stretch with
//! valid batches after it is corruption inside written data: it stays in
//! place, unreadable (readers get a `Damaged` error naming the offsets),
//! the batches after it stay readable, and appends continue after the last
//! valid batch, so no offset is ever handed out twice. A bad stretch at the
//! very end is a torn tail (the write the crash interrupted; under
//! `fsync = always` never acknowledged) and is truncated away. Both are
//! logged and counted. Stray temporary files and index files without a
//! log are removed.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::batch::DecodeError;
use crate::error::{LogError, Result};
use crate::idempotency::StoredKey;
use crate::segment::{self, ActiveFiles, IndexBuilder, Segment, SegmentPaths};
use crate::stats;
use crate::tiered::{RemoteManifest, RemotePlace, REMOTE_MANIFEST};

/// The writer's view of the active segment.
#[derive(Debug)]
pub struct ActiveState {
    /// The segment, shared with readers.
    pub segment: Arc<Segment>,
    /// Its reading side (indexes are appended through it).
    pub files: Arc<ActiveFiles>,
    /// The append handle, positioned at `size`.
    pub file: File,
    /// Bytes written.
    pub size: u64,
    /// Offset the next record gets.
    pub next_offset: u64,
    /// Index builder positioned after the last batch.
    pub builder: IndexBuilder,
    /// Append time of the first batch, for rolling by age.
    pub first_append_time: Option<i64>,
}

/// A recovered partition.
#[derive(Debug)]
pub struct Recovered {
    /// All segments by base offset, the active one last.
    pub segments: BTreeMap<u64, Arc<Segment>>,
    /// The active segment's writer state.
    pub active: ActiveState,
    /// Idempotency keys found in the active segment (key, base offset,
    /// record count, append time), in log order.
    pub keys: Vec<StoredKey>,
}

/// Parses `<20 digits>.log`: the base offset of a segment file's name.
pub(crate) fn base_offset_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok())?
}

/// Opens (creating if needed) the partition directory `dir`; `remote` is
/// where its tiered segments are, if the log has a tiered store.
pub fn recover(dir: &Path, interval_bytes: u64, remote: Option<&RemotePlace>) -> Result<Recovered> {
    std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
    crate::cleaner::finish_swaps(dir)?;
    let manifest = RemoteManifest::load(dir)?;
    let remote_end = manifest.segments.last().map(|e| e.end_offset);
    if let (Some(_), None) = (remote_end, remote) {
        return Err(LogError::Metadata {
            path: dir.join(REMOTE_MANIFEST),
            problem: format!(
                "the partition has {} segments in tiered storage, but the log has no tiered store",
                manifest.segments.len()
            ),
            recovery: "start with the tiered store its segments were moved to (the server's tiered_storage_url)".into(),
        });
    }
    finish_moves(dir, &manifest)?;
    let mut bases = Vec::new();
    let mut others = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        match base_offset_of(&name) {
            Some(base) => bases.push(base),
            None => others.push(name),
        }
    }
    bases.sort_unstable();
    for name in others {
        let path = dir.join(&name);
        let stem_has_log = name
            .rsplit_once('.')
            .is_some_and(|(stem, _)| bases.iter().any(|b| format!("{b:020}") == stem));
        if name.ends_with(".tmp")
            || ((name.ends_with(".index") || name.ends_with(".timeindex")) && !stem_has_log)
        {
            tracing::info!(file = %path.display(), "removing leftover file");
            std::fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
        }
    }
    if bases.is_empty() {
        let base = remote_end.unwrap_or(0);
        let paths = SegmentPaths::new(dir, base);
        File::create(&paths.log).map_err(|e| LogError::io(&paths.log, e))?;
        crate::io::sync_dir(dir)?;
        bases.push(base);
    }
    if let Some(end) = remote_end.filter(|end| *end != bases[0]) {
        return Err(LogError::Metadata {
            path: dir.join(REMOTE_MANIFEST),
            problem: format!(
                "its last tiered segment ends at offset {end}, but the first local segment starts at {}",
                bases[0]
            ),
            recovery: "restore the partition directory and its remote.json from a backup".into(),
        });
    }

    let mut segments = BTreeMap::new();
    if let Some(place) = remote {
        for entry in &manifest.segments {
            let segment = Segment::new_remote(place.clone(), entry, interval_bytes);
            segments.insert(entry.base_offset, Arc::new(segment));
        }
    }
    for pair in bases.windows(2) {
        let paths = SegmentPaths::new(dir, pair[0]);
        let bytes = std::fs::metadata(&paths.log)
            .map_err(|e| LogError::io(&paths.log, e))?
            .len();
        let sealed = Segment::new_sealed(paths, pair[0], pair[1], bytes, interval_bytes);
        segments.insert(pair[0], Arc::new(sealed));
    }
    let active_base = *bases.last().expect("at least one segment");
    let (active, keys) = recover_active(dir, active_base, interval_bytes)?;
    segments.insert(active_base, active.segment.clone());
    Ok(Recovered {
        segments,
        active,
        keys,
    })
}

/// Deletes the local copies of segments `manifest` lists as tiered: a
/// move that stopped after its commit point (the manifest) is finished.
fn finish_moves(dir: &Path, manifest: &RemoteManifest) -> Result<()> {
    let mut removed = false;
    for entry in &manifest.segments {
        let paths = SegmentPaths::new(dir, entry.base_offset);
        if !paths.log.exists() {
            continue;
        }
        tracing::warn!(segment = %paths.log.display(), "finishing a move to tiered storage a stop interrupted: removing the local copy");
        for path in [&paths.log, &paths.index, &paths.time_index] {
            match std::fs::remove_file(path) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(path, e)),
            }
        }
    }
    if removed {
        crate::io::sync_dir(dir)?;
    }
    Ok(())
}

type Keys = Vec<StoredKey>;

/// Scans the active segment, truncates a bad tail, and opens it for append.
fn recover_active(dir: &Path, base: u64, interval_bytes: u64) -> Result<(ActiveState, Keys)> {
    let paths = SegmentPaths::new(dir, base);
    let mut scanned = {
        let bytes = segment::map_file(&paths.log)?;
        let scanned = segment::scan(&bytes, base, interval_bytes);
        for damage in &scanned.damaged {
            segment::report_damage(&paths.log, damage, "inside the active segment");
        }
        if let Some((position, problem)) = &scanned.problem {
            handle_bad_tail(&paths.log, &bytes, *position, problem)?;
        }
        scanned
        // The mapping is dropped here, before the file is truncated.
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&paths.log)
        .map_err(|e| LogError::io(&paths.log, e))?;
    if scanned.problem.is_some() {
        file.set_len(scanned.valid_bytes)
            .map_err(|e| LogError::io(&paths.log, e))?;
        file.sync_all().map_err(|e| LogError::io(&paths.log, e))?;
    }
    file.seek(SeekFrom::Start(scanned.valid_bytes))
        .map_err(|e| LogError::io(&paths.log, e))?;
    // The active segment's indexes are rebuilt by the scan; stale files of
    // a previous life are removed (they are written again when it seals).
    for stale in [&paths.index, &paths.time_index] {
        match std::fs::remove_file(stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(LogError::io(stale, e)),
        }
    }
    let read_handle = File::open(&paths.log).map_err(|e| LogError::io(&paths.log, e))?;
    let files = Arc::new(ActiveFiles::new(
        read_handle,
        std::mem::take(&mut scanned.indexes),
    ));
    let segment = Arc::new(Segment::new_active(
        paths,
        base,
        files.clone(),
        &scanned,
        interval_bytes,
    ));
    let keys = std::mem::take(&mut scanned.keys);
    let state = ActiveState {
        segment,
        files,
        file,
        size: scanned.valid_bytes,
        next_offset: scanned.next_offset,
        builder: scanned.builder.take().expect("scan returns its builder"),
        first_append_time: scanned.first_append_time,
    };
    Ok((state, keys))
}

/// Decides what to do with a bad stretch at the end of the active segment
/// (the scan found no valid batch after it), before it is truncated away.
///
/// * A complete batch of a newer format version: refuse to open (an older
///   build must not destroy a newer one's data).
/// * Otherwise a torn tail, the last write interrupted by the crash: it
///   was never acknowledged under `fsync = always`. Dropped, logged and
///   counted. (Damage with valid batches after it is not a tail: the scan
///   skips it and nothing is truncated.)
fn handle_bad_tail(
    path: &Path,
    bytes: &bytes::Bytes,
    position: u64,
    problem: &DecodeError,
) -> Result<()> {
    if let DecodeError::UnsupportedVersion(_) = problem {
        return Err(LogError::corrupt(
            path,
            position,
            format!("{problem}; refusing to truncate it"),
        ));
    }
    let dropped = bytes.len() as u64 - position;
    let s = stats::global();
    s.truncated_bytes.fetch_add(dropped, Ordering::Relaxed);
    tracing::warn!(
        segment = %path.display(),
        position,
        dropped_bytes = dropped,
        %problem,
        "recovery: truncating a torn tail of the active segment"
    );
    s.torn_tails_truncated.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Creates a new, empty active segment at `base` (a roll).
pub fn create_active(dir: &Path, base: u64, interval_bytes: u64) -> Result<ActiveState> {
    let paths = SegmentPaths::new(dir, base);
    crate::io::crash::step(&paths.log, "create segment")?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&paths.log)
        .map_err(|e| LogError::io(&paths.log, e))?;
    crate::io::sync_dir(dir)?;
    let read_handle = File::open(&paths.log).map_err(|e| LogError::io(&paths.log, e))?;
    let files = Arc::new(ActiveFiles::new(read_handle, Default::default()));
    let empty = segment::ScanResult {
        next_offset: base,
        max_timestamp: i64::MIN,
        max_append_time: i64::MIN,
        ..Default::default()
    };
    let segment = Arc::new(Segment::new_active(
        paths,
        base,
        files.clone(),
        &empty,
        interval_bytes,
    ));
    Ok(ActiveState {
        segment,
        files,
        file,
        size: 0,
        next_offset: base,
        builder: IndexBuilder::new(base, interval_bytes),
        first_append_time: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_file_names_parse_strictly() {
        assert_eq!(base_offset_of("00000000000000000042.log"), Some(42));
        assert_eq!(base_offset_of("0000000000000000042.log"), None);
        assert_eq!(base_offset_of("00000000000000000042.index"), None);
        assert_eq!(base_offset_of("0000000000000000004x.log"), None);
    }
}
