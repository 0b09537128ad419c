//! Tiered storage (`log/FORMAT.md` §8.4): sealed segments moved to an
//! object store once a topic's local retention passes, and read back
//! through the segment cache.
//!
//! The log knows the store only as a [`SegmentStore`] (put, get and delete
//! a file by key); the server gives one backed by the `object_store` crate
//! (S3, or a local directory). Keys are `<topic>-<created_ms>/<partition>/
//! <base:020>.log` (and `.index`, `.timeindex`): a topic deleted and created
//! again under the same name never meets the old one's objects.
//!
//! Each partition lists its remote segments in `remote.json` (its
//! directory; [`RemoteManifest`]), written atomically. Moving a segment:
//! upload its three files, add it to the manifest (the commit point), put
//! a remote segment in its place (readers that met the local one read
//! again), delete the local files. A start that finds a listed segment
//! still on disk deletes the local copy (the upload finished before the
//! manifest named it). A remote segment is downloaded into
//! `<data_dir>/remote-cache/` when a read needs it and deleted from there
//! when the segment cache closes it, so the cache's limits bound the
//! disk it takes. A store that cannot be reached fails the reads of
//! remote segments with [`LogError::Unavailable`]; appends and reads of
//! local segments go on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{LogError, Result};
use crate::io;
use crate::segment::SegmentPaths;

/// Where tiered segments go: a blocking put / get / delete of one file by
/// key. Implementations must be safe to call from any thread, an async
/// runtime's included (the log calls them from reads).
pub trait SegmentStore: Send + Sync + std::fmt::Debug {
    /// Stores the file at `from` under `key` (replacing any object there).
    fn put(&self, key: &str, from: &Path) -> std::result::Result<(), String>;
    /// Writes the object `key` to the file `to` (created or truncated).
    fn get(&self, key: &str, to: &Path) -> std::result::Result<(), String>;
    /// Deletes the object `key`; deleting a missing object is not an error.
    fn delete(&self, key: &str) -> std::result::Result<(), String>;
    /// Where the store is, for messages (a URL).
    fn describe(&self) -> String;
}

/// The manifest file of a partition's remote segments.
pub const REMOTE_MANIFEST: &str = "remote.json";

/// The file extensions a segment's objects have, in upload order (the
/// `.log` first: a segment whose indexes are missing rebuilds them).
const EXTENSIONS: [&str; 3] = ["log", "index", "timeindex"];

/// One remote segment, as `remote.json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSegment {
    /// Its base offset (its files' names).
    pub base_offset: u64,
    /// The base offset of the segment after it.
    pub end_offset: u64,
    /// Bytes of its `.log`.
    pub bytes: u64,
    /// Its largest record timestamp (`i64::MIN` if unknown).
    pub max_timestamp: i64,
    /// Its newest append time (`i64::MIN` if unknown).
    pub max_append_time: i64,
}

/// `remote.json`: a partition's remote segments, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteManifest {
    /// Format of this file (1).
    pub format: u32,
    /// The segments, by base offset.
    pub segments: Vec<RemoteSegment>,
}

impl RemoteManifest {
    /// The manifest in partition directory `dir` (empty when it has none).
    pub fn load(dir: &Path) -> Result<RemoteManifest> {
        let path = dir.join(REMOTE_MANIFEST);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| LogError::Metadata {
                path: path.clone(),
                problem: format!("not a valid remote segment list: {e}"),
                recovery: "restore it from a backup; the segments it listed are in the tiered store under the partition's prefix".into(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RemoteManifest::default()),
            Err(e) => Err(LogError::io(&path, e)),
        }
    }

    /// Writes it to `dir` atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let manifest = RemoteManifest {
            format: 1,
            segments: self.segments.clone(),
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
        io::write_atomic(&dir.join(REMOTE_MANIFEST), &json)
    }
}

/// Where one partition's segments go in the store, and where they come
/// back to on disk.
#[derive(Debug, Clone)]
pub struct RemotePlace {
    /// The store.
    pub store: Arc<dyn SegmentStore>,
    /// The partition's key prefix: `<topic>-<created_ms>/<partition>`.
    pub prefix: String,
    /// The partition's download directory under `remote-cache/`.
    pub cache_dir: PathBuf,
}

impl RemotePlace {
    /// The place of `partition` of the topic `topic` created at
    /// `created_ms`, in a log at `data_dir`.
    pub fn new(
        store: Arc<dyn SegmentStore>,
        data_dir: &Path,
        topic: &str,
        created_ms: i64,
        partition: u32,
    ) -> RemotePlace {
        let topic_part = format!("{topic}-{created_ms}");
        RemotePlace {
            store,
            prefix: format!("{topic_part}/{partition}"),
            cache_dir: data_dir
                .join(REMOTE_CACHE_DIR)
                .join(topic_part)
                .join(partition.to_string()),
        }
    }

    /// The object key of the segment at `base`'s file with `extension`.
    fn key(&self, base: u64, extension: &str) -> String {
        format!("{}/{base:020}.{extension}", self.prefix)
    }

    /// Uploads a sealed segment's three files.
    pub fn upload(&self, paths: &SegmentPaths, base: u64) -> Result<()> {
        for (extension, path) in EXTENSIONS.iter().zip(paths_of(paths)) {
            self.store
                .put(&self.key(base, extension), path)
                .map_err(|reason| self.unavailable(base, "upload", &reason))?;
        }
        Ok(())
    }

    /// Deletes a segment's objects (a failure is logged: the objects are
    /// then left over, named by the log line).
    pub fn delete(&self, base: u64) {
        for extension in EXTENSIONS {
            let key = self.key(base, extension);
            if let Err(reason) = self.store.delete(&key) {
                tracing::error!(store = %self.store.describe(), key, %reason, "could not delete a tiered segment's object; it is left over");
            }
        }
    }

    /// The paths a remote segment at `base` is downloaded to.
    pub fn cache_paths(&self, base: u64) -> SegmentPaths {
        SegmentPaths::new(&self.cache_dir, base)
    }

    /// The error of a store call that failed.
    fn unavailable(&self, base: u64, what: &str, reason: &str) -> LogError {
        LogError::Unavailable(format!(
            "tiered storage {}: {what} of segment {}/{base:020} failed: {reason}",
            self.store.describe(),
            self.prefix
        ))
    }
}

/// The directory under the data directory that remote segments are
/// downloaded to (emptied at open).
pub const REMOTE_CACHE_DIR: &str = "remote-cache";

fn paths_of(paths: &SegmentPaths) -> [&Path; 3] {
    [&paths.log, &paths.index, &paths.time_index]
}

/// A remote segment's way back to disk: its place and a lock that makes
/// one reader download it while the others wait.
#[derive(Debug)]
pub struct RemoteSource {
    place: RemotePlace,
    base: u64,
    download: Mutex<()>,
    /// Set while a prefetch of it runs.
    prefetching: AtomicBool,
}

impl RemoteSource {
    /// The segment at `base` of `place`.
    pub fn new(place: RemotePlace, base: u64) -> RemoteSource {
        RemoteSource {
            place,
            base,
            download: Mutex::new(()),
            prefetching: AtomicBool::new(false),
        }
    }

    /// Downloads the segment on a thread of its own unless it is
    /// downloaded or being downloaded: a read of the segment before it
    /// calls this, so a reader going through tiered segments in order
    /// finds the next one on disk (or waits for its download to end). At
    /// most one prefetch per segment runs; a failure is left to the read
    /// that needs the segment to report.
    pub fn prefetch(self: &Arc<Self>) {
        if self.place.cache_paths(self.base).log.exists()
            || self.prefetching.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let source = self.clone();
        let spawned = std::thread::Builder::new()
            .name("kappa-tiered-prefetch".into())
            .spawn(move || {
                if let Err(e) = source.with_files(|| Ok(())) {
                    tracing::debug!(error = %e, "prefetching a tiered segment failed");
                }
                source.prefetching.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.prefetching.store(false, Ordering::Release);
        }
    }

    /// Makes sure the segment's files are in the download directory:
    /// fetched (each to a `.tmp`, then renamed) unless there already.
    /// Runs `then` while no other reader downloads or removes them.
    pub fn with_files<T>(&self, then: impl FnOnce() -> Result<T>) -> Result<T> {
        let _one = self.download.lock().unwrap_or_else(|e| e.into_inner());
        let paths = self.place.cache_paths(self.base);
        if !paths.log.exists() {
            std::fs::create_dir_all(&self.place.cache_dir)
                .map_err(|e| LogError::io(&self.place.cache_dir, e))?;
            // The indexes first, the `.log` last: a `.log` in the cache
            // means all three are there.
            for extension in ["index", "timeindex", "log"] {
                let to = self
                    .place
                    .cache_dir
                    .join(format!("{:020}.{extension}", self.base));
                let tmp = to.with_extension(format!("{extension}.tmp"));
                self.place
                    .store
                    .get(&self.place.key(self.base, extension), &tmp)
                    .map_err(|reason| self.place.unavailable(self.base, "download", &reason))?;
                std::fs::rename(&tmp, &to).map_err(|e| LogError::io(&to, e))?;
            }
            tracing::debug!(segment = %paths.log.display(), "downloaded a tiered segment");
        }
        then()
    }

    /// Deletes the downloaded files (the segment cache closed the
    /// segment; open mappings stay valid).
    pub fn evict(&self) {
        let _one = self.download.lock().unwrap_or_else(|e| e.into_inner());
        let paths = self.place.cache_paths(self.base);
        for path in paths_of(&paths) {
            if let Err(e) = std::fs::remove_file(path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(file = %path.display(), error = %e, "could not remove a downloaded tiered segment file");
                }
            }
        }
    }

    /// Its place.
    pub fn place(&self) -> &RemotePlace {
        &self.place
    }
}

/// Refuses a local retention when the log has no tiered store.
pub(crate) fn check_tiering(
    config: &crate::config::TopicConfig,
    log_config: &crate::config::LogConfig,
) -> Result<()> {
    let asks = config.local_retention_ms.is_some() || config.local_retention_bytes.is_some();
    if asks && log_config.remote_store.is_none() {
        return Err(LogError::InvalidConfig(
            "local_retention_ms and local_retention_bytes need tiered storage (the server's tiered_storage_url)".into(),
        ));
    }
    Ok(())
}

/// Moves the partition's sealed local segments past its local retention
/// (by age of their newest append, or while its local bytes exceed the
/// limit, oldest first; the active segment never) to the tiered store, in
/// order; returns how many moved. A store that fails stops the pass with
/// the error: the segments stay local, nothing else changes.
pub(crate) fn tier_partition(
    shared: &crate::partition::PartitionShared,
    now_ms: i64,
) -> Result<usize> {
    let Some(place) = &shared.remote else {
        return Ok(0);
    };
    let settings = shared.settings();
    if settings.local_retention_ms.is_none() && settings.local_retention_bytes.is_none() {
        return Ok(0);
    }
    let segments = shared.snapshot();
    let Some((active, sealed)) = segments.split_last() else {
        return Ok(0);
    };
    let local: Vec<&Arc<crate::segment::Segment>> =
        sealed.iter().filter(|s| !s.is_remote()).collect();
    let mut facts = Vec::with_capacity(local.len());
    for s in &local {
        let newest = match s.known_max_append_time() {
            Some(t) => t,
            None => shared.learn_append_time(s)?,
        };
        facts.push(crate::retention::SegmentFacts {
            bytes: s.readable_bytes(),
            max_append_time: newest,
        });
    }
    let n = crate::retention::segments_to_delete(
        &facts,
        active.readable_bytes(),
        settings.local_retention_ms,
        settings.local_retention_bytes,
        now_ms,
    );
    let mut manifest = RemoteManifest::load(&shared.dir)?;
    for (s, facts) in local.iter().zip(&facts).take(n) {
        // Opening it makes sure its index files are on disk (rebuilt if
        // they were missing) before they are uploaded.
        if shared.source_unless_replaced(s)?.is_none() {
            break;
        }
        place.upload(&s.paths, s.base_offset)?;
        let entry = RemoteSegment {
            base_offset: s.base_offset,
            end_offset: s.end_offset(),
            bytes: s.readable_bytes(),
            max_timestamp: s.max_timestamp().unwrap_or(i64::MIN),
            max_append_time: facts.max_append_time,
        };
        manifest.segments.push(entry.clone());
        manifest.save(&shared.dir)?;
        // Committed: a start from here finds it listed and finishes.
        let remote = Arc::new(crate::segment::Segment::new_remote(
            place.clone(),
            &entry,
            shared.log_config.index_interval_bytes,
        ));
        let moved = shared.replace_segments(std::slice::from_ref(*s), remote, |_| {
            for path in paths_of(&s.paths) {
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(LogError::io(path, e)),
                }
            }
            io::sync_dir(&shared.dir)
        });
        if let Err(e) = moved {
            // Listed as tiered but its local files are partly there: the
            // next start finishes the move.
            shared.fail(&e);
            return Err(e);
        }
        tracing::info!(
            topic = %shared.topic,
            partition = shared.partition,
            segment = s.base_offset,
            bytes = entry.bytes,
            store = %place.store.describe(),
            "moved a segment to tiered storage"
        );
        crate::stats::global()
            .segments_tiered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(n)
}

/// Takes the remote segments among `doomed` (retention deletes them) out
/// of the partition's manifest — before they leave the segment map — and
/// returns their places, whose objects go once they left it.
pub(crate) fn forget_remote(
    shared: &crate::partition::PartitionShared,
    doomed: &[Arc<crate::segment::Segment>],
) -> Result<Vec<(RemotePlace, u64)>> {
    let remote: Vec<(RemotePlace, u64)> = doomed
        .iter()
        .filter_map(|s| s.remote().map(|r| (r.place().clone(), s.base_offset)))
        .collect();
    if remote.is_empty() {
        return Ok(remote);
    }
    let mut manifest = RemoteManifest::load(&shared.dir)?;
    manifest
        .segments
        .retain(|e| !remote.iter().any(|(_, base)| *base == e.base_offset));
    manifest.save(&shared.dir)?;
    Ok(remote)
}
