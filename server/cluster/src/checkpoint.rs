//! [`CheckpointStore`]: RocksDB checkpoints of tasks kept in object storage
//! (S3 or a local directory, through the `object_store` crate), so a task
//! can start on another node from its newest checkpoint.
//!
//! Layout under the store's prefix, per task (the task's name made
//! path-safe: bytes other than ASCII letters, digits, `_`, `-` and `.`
//! become `!` and two hex digits, so `purchase_stats#3@1` is
//! `purchase_stats!233!401`):
//!
//! ```text
//! <task>/sst/<name>.sst                         immutable SST files, uploaded once
//! <task>/checkpoints/<seq:020>-<writer>/<name>  the other files of checkpoint seq
//! <task>/checkpoints/<seq:020>.json             its manifest, written last
//! ```
//!
//! The manifest is the commit point: a checkpoint without one does not
//! exist. It names the directory of its other files (`<writer>`: 16 hex
//! digits drawn for each save; a manifest without `files_dir`, from
//! before, has them in `<seq:020>/`).
//!
//! Object storage gives no cheap lock, and while a partition moves two
//! nodes may save one task at once (the old owner's last checkpoint, the
//! new owner's first) and pick the same sequence number. Each save then
//! still writes whole: its files go to a directory of its own, and its
//! manifest names them (of two manifests of one number, the last written
//! stands, complete). After a save, checkpoints older than the
//! [`KEEP_CHECKPOINTS`] newest are deleted — never a newer one's files,
//! which another writer may be uploading — and SST objects none of the
//! kept checkpoints lists once they are older than [`SST_GRACE_MS`] (an
//! SST just uploaded by another writer is listed by no manifest yet).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path as FsPath;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore, PutPayload};
use serde::{Deserialize, Serialize};

/// The manifest format this code writes and reads.
pub const CHECKPOINT_FORMAT: u64 = 1;

/// How many checkpoints of a task are kept after a save.
pub const KEEP_CHECKPOINTS: usize = 2;

/// How old an SST object no kept checkpoint lists must be to be deleted
/// (ms): a save in progress elsewhere lists its SSTs only at its end.
pub const SST_GRACE_MS: i64 = 10 * 60 * 1000;

/// Files up to this size are uploaded in one request (read whole into
/// memory); bigger ones in parts of this size, one part in memory at a
/// time. S3 wants parts of at least 5 MiB.
const PART_BYTES: usize = 16 << 20;

/// Longest task name accepted (before it is made path-safe).
const MAX_TASK_NAME_LEN: usize = 255;

/// Where checkpoints go: an object store and a prefix in it, parsed from a
/// URL. Blocking: calls run on the store's own small current-thread tokio
/// runtime, so they must not be made from inside an async task.
pub struct CheckpointStore {
    url: String,
    store: Box<dyn ObjectStore>,
    prefix: Path,
    runtime: tokio::runtime::Runtime,
    /// [`SST_GRACE_MS`], or what [`CheckpointStore::with_sst_grace_ms`] set.
    sst_grace_ms: i64,
}

/// What [`CheckpointStore::save`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedCheckpoint {
    /// The new checkpoint's sequence number.
    pub seq: u64,
    /// Bytes of checkpoint files uploaded (not counting the manifest).
    pub bytes_uploaded: u64,
    /// Checkpoint files uploaded (SST and others; not the manifest).
    pub files_uploaded: usize,
    /// SST files already in the store with the same size, not uploaded.
    pub sst_reused: usize,
}

/// A checkpoint's manifest, in short.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointInfo {
    /// Its sequence number (0 for a task's first checkpoint).
    pub seq: u64,
    /// When it was saved, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// What the caller gave to [`CheckpointStore::save`].
    pub meta: serde_json::Value,
}

/// A checkpoint's manifest as stored (`<seq:020>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    format: u64,
    task: String,
    seq: u64,
    created_at_ms: u64,
    sst: Vec<FileEntry>,
    files: Vec<FileEntry>,
    meta: serde_json::Value,
    /// The directory under `checkpoints/` holding `files`
    /// (`<seq:020>-<writer>`); `None`: `<seq:020>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    files_dir: Option<String>,
}

/// One file of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileEntry {
    name: String,
    size: u64,
}

impl Manifest {
    fn info(&self) -> CheckpointInfo {
        CheckpointInfo {
            seq: self.seq,
            created_at_ms: self.created_at_ms,
            meta: self.meta.clone(),
        }
    }
}

/// What a listing of `<task>/checkpoints/` holds, by sequence number.
#[derive(Debug, Default)]
struct Listing {
    /// Sequence numbers with a manifest.
    manifests: BTreeSet<u64>,
    /// Every object under `<task>/checkpoints/` with the seq it belongs to.
    objects: Vec<(u64, Path)>,
}

impl CheckpointStore {
    /// Opens `s3://bucket/prefix` (credentials, region and endpoint from
    /// the usual `AWS_*` environment variables, `AWS_ENDPOINT_URL` and
    /// `AWS_ALLOW_HTTP=true` included) or `file:///abs/dir` (a local
    /// directory, created if missing). Anything else is refused.
    pub fn open(url: &str) -> Result<CheckpointStore, String> {
        CheckpointStore::open_with(url, &[])
    }

    /// [`CheckpointStore::open`] with S3 settings given as `AWS_*` names
    /// and values (e.g. `AWS_ENDPOINT_URL`), which override the
    /// environment's. Options are refused for a `file://` URL.
    pub fn open_with(url: &str, options: &[(String, String)]) -> Result<CheckpointStore, String> {
        let (store, prefix) = open_store(url, options, "checkpoint store", None)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("checkpoint store {url:?}: starting its runtime: {e}"))?;
        Ok(CheckpointStore {
            sst_grace_ms: SST_GRACE_MS,
            url: url.to_string(),
            store,
            prefix,
            runtime,
        })
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// This store, deleting unreferenced SST objects once they are `ms`
    /// old instead of [`SST_GRACE_MS`].
    pub fn with_sst_grace_ms(mut self, ms: i64) -> CheckpointStore {
        self.sst_grace_ms = ms;
        self
    }

    /// Uploads the RocksDB checkpoint directory `dir` (files only) as the
    /// newest checkpoint of `task`, with `meta` in its manifest. SST files
    /// already stored for the task with the same size are not uploaded
    /// again. Once the manifest is written, checkpoints but the
    /// [`KEEP_CHECKPOINTS`] newest and SST files none of those lists are
    /// deleted; a failure there is logged, not returned, as the checkpoint
    /// is saved by then.
    pub fn save(
        &self,
        task: &str,
        dir: &FsPath,
        meta: serde_json::Value,
    ) -> Result<SavedCheckpoint, String> {
        let task_dir = self.task_dir(task)?;
        let (ssts, others) = local_files(dir)?;
        let saved = self
            .runtime
            .block_on(async {
                let stored_ssts = self.list_ssts(&task_dir).await?;
                let listing = self.list_checkpoints(&task_dir).await?;
                let seq = listing.manifests.last().map_or(0, |newest| newest + 1);
                let mut saved = SavedCheckpoint {
                    seq,
                    bytes_uploaded: 0,
                    files_uploaded: 0,
                    sst_reused: 0,
                };
                let mut manifest = Manifest {
                    format: CHECKPOINT_FORMAT,
                    task: task.to_string(),
                    seq,
                    created_at_ms: now_ms(),
                    sst: Vec::with_capacity(ssts.len()),
                    files: Vec::with_capacity(others.len()),
                    meta,
                    files_dir: None,
                };
                for (name, size) in &ssts {
                    if stored_ssts.get(name).map(|(size, _)| size) == Some(size) {
                        saved.sst_reused += 1;
                        manifest.sst.push(FileEntry {
                            name: name.clone(),
                            size: *size,
                        });
                        continue;
                    }
                    let location = sst_path(&task_dir, name);
                    manifest
                        .sst
                        .push(self.upload(&location, dir, name, &mut saved).await?);
                }
                let files_dir_name = format!("{seq:020}-{:016x}", writer_nonce());
                let files_dir = task_dir.child("checkpoints").child(files_dir_name.as_str());
                manifest.files_dir = Some(files_dir_name);
                for (name, _) in &others {
                    let location = files_dir.child(name.as_str());
                    manifest
                        .files
                        .push(self.upload(&location, dir, name, &mut saved).await?);
                }
                let body = serde_json::to_vec(&manifest)
                    .map_err(|e| format!("encoding manifest {seq}: {e}"))?;
                let location = manifest_path(&task_dir, seq);
                self.store
                    .put(&location, PutPayload::from(body))
                    .await
                    .map_err(|e| self.error(&location, "writing", e))?;
                if let Err(e) = self.prune(&task_dir, listing, &manifest, stored_ssts).await {
                    tracing::warn!(task, seq, error = %e, "deleting old checkpoints failed");
                }
                Ok::<_, String>(saved)
            })
            .map_err(|e| format!("saving task {task:?} from {}: {e}", dir.display()))?;
        tracing::debug!(
            task,
            seq = saved.seq,
            bytes_uploaded = saved.bytes_uploaded,
            files_uploaded = saved.files_uploaded,
            sst_reused = saved.sst_reused,
            store = %self.url,
            "checkpoint saved"
        );
        Ok(saved)
    }

    /// Uploads file `name` of `dir` to `location` and counts it in `saved`.
    async fn upload(
        &self,
        location: &Path,
        dir: &FsPath,
        name: &str,
        saved: &mut SavedCheckpoint,
    ) -> Result<FileEntry, String> {
        let size = upload_file(&*self.store, location, &dir.join(name))
            .await
            .map_err(|e| format!("{e} (in {})", self.url))?;
        saved.bytes_uploaded += size;
        saved.files_uploaded += 1;
        Ok(FileEntry {
            name: name.to_string(),
            size,
        })
    }

    /// The newest checkpoint of `task`, or `None` if it has none.
    pub fn newest(&self, task: &str) -> Result<Option<CheckpointInfo>, String> {
        let task_dir = self.task_dir(task)?;
        self.runtime.block_on(async {
            Ok(self
                .newest_manifest(task, &task_dir)
                .await?
                .map(|manifest| manifest.info()))
        })
    }

    /// Downloads the newest checkpoint of `task` into `dir`, which must not
    /// exist: the files go to a temporary sibling directory, renamed to
    /// `dir` once all are written and synced. `None` (and no `dir`) when
    /// the task has no checkpoint.
    pub fn restore(&self, task: &str, dir: &FsPath) -> Result<Option<CheckpointInfo>, String> {
        let task_dir = self.task_dir(task)?;
        match dir.try_exists() {
            Ok(false) => {}
            Ok(true) => {
                return Err(format!(
                    "restoring task {task:?}: {} exists already",
                    dir.display()
                ))
            }
            Err(e) => return Err(format!("restoring task {task:?}: {}: {e}", dir.display())),
        }
        let Some(manifest) = self
            .runtime
            .block_on(self.newest_manifest(task, &task_dir))?
        else {
            return Ok(None);
        };
        let temp = temp_sibling(dir)?;
        std::fs::create_dir(&temp).map_err(|e| format!("creating {}: {e}", temp.display()))?;
        let downloaded = self
            .runtime
            .block_on(self.download(&task_dir, &manifest, &temp))
            .and_then(|bytes| {
                sync_dir(&temp)?;
                std::fs::rename(&temp, dir).map_err(|e| {
                    format!("renaming {} to {}: {e}", temp.display(), dir.display())
                })?;
                sync_dir(&parent_of(dir))?;
                Ok(bytes)
            });
        let bytes = match downloaded {
            Ok(bytes) => bytes,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&temp);
                return Err(format!(
                    "restoring task {task:?} checkpoint {}: {e}",
                    manifest.seq
                ));
            }
        };
        tracing::debug!(
            task,
            seq = manifest.seq,
            bytes,
            files = manifest.sst.len() + manifest.files.len(),
            dir = %dir.display(),
            store = %self.url,
            "checkpoint restored"
        );
        Ok(Some(manifest.info()))
    }

    /// `<prefix>/<task key>`, or why `task` is not a task name.
    fn task_dir(&self, task: &str) -> Result<Path, String> {
        if task.is_empty() || task.len() > MAX_TASK_NAME_LEN {
            return Err(format!(
                "task name {task:?} must have 1 to {MAX_TASK_NAME_LEN} bytes"
            ));
        }
        Ok(self.prefix.child(task_key(task)))
    }

    /// Names of the task's stored SST files, with their sizes and when
    /// they were written (ms since the epoch).
    async fn list_ssts(&self, task_dir: &Path) -> Result<BTreeMap<String, (u64, i64)>, String> {
        let dir = task_dir.child("sst");
        let mut listed = self.store.list(Some(&dir));
        let mut ssts = BTreeMap::new();
        while let Some(object) = listed.next().await {
            let object = object.map_err(|e| self.error(&dir, "listing", e))?;
            let parts: Vec<_> = match object.location.prefix_match(&dir) {
                Some(parts) => parts.collect(),
                None => continue,
            };
            if let [name] = parts.as_slice() {
                ssts.insert(
                    name.as_ref().to_string(),
                    (object.size, object.last_modified.timestamp_millis()),
                );
            }
        }
        Ok(ssts)
    }

    /// The task's manifests and per-checkpoint files.
    async fn list_checkpoints(&self, task_dir: &Path) -> Result<Listing, String> {
        let dir = task_dir.child("checkpoints");
        let mut listed = self.store.list(Some(&dir));
        let mut listing = Listing::default();
        while let Some(object) = listed.next().await {
            let object = object.map_err(|e| self.error(&dir, "listing", e))?;
            let parts: Vec<_> = match object.location.prefix_match(&dir) {
                Some(parts) => parts.collect(),
                None => continue,
            };
            let seq = match parts.as_slice() {
                [file] => match file.as_ref().strip_suffix(".json").and_then(parse_seq) {
                    Some(seq) => {
                        listing.manifests.insert(seq);
                        seq
                    }
                    None => continue,
                },
                [seq_dir, _] => match parse_seq(files_dir_seq(seq_dir.as_ref())) {
                    Some(seq) => seq,
                    None => continue,
                },
                _ => continue,
            };
            listing.objects.push((seq, object.location));
        }
        Ok(listing)
    }

    /// The newest manifest of the task, read and checked.
    async fn newest_manifest(
        &self,
        task: &str,
        task_dir: &Path,
    ) -> Result<Option<Manifest>, String> {
        let listing = self.list_checkpoints(task_dir).await?;
        match listing.manifests.last() {
            Some(&seq) => Ok(Some(self.read_manifest(task, task_dir, seq).await?)),
            None => Ok(None),
        }
    }

    /// Reads manifest `seq` of `task`, refusing another format, another
    /// task's or seq's manifest, and file names that are not plain names.
    async fn read_manifest(
        &self,
        task: &str,
        task_dir: &Path,
        seq: u64,
    ) -> Result<Manifest, String> {
        let location = manifest_path(task_dir, seq);
        let body = self
            .store
            .get(&location)
            .await
            .map_err(|e| self.error(&location, "reading", e))?
            .bytes()
            .await
            .map_err(|e| self.error(&location, "reading", e))?;
        let corrupt = |reason: String| format!("manifest {location} in {}: {reason}", self.url);
        let value: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| corrupt(format!("not JSON: {e}")))?;
        match value.get("format").and_then(serde_json::Value::as_u64) {
            Some(CHECKPOINT_FORMAT) => {}
            Some(format) => {
                return Err(corrupt(format!(
                "format {format} is not supported (this version reads format {CHECKPOINT_FORMAT})"
            )))
            }
            None => return Err(corrupt("no numeric \"format\" field".to_string())),
        }
        let manifest: Manifest =
            serde_json::from_value(value).map_err(|e| corrupt(format!("malformed: {e}")))?;
        if manifest.task != task || manifest.seq != seq {
            return Err(corrupt(format!(
                "it is checkpoint {} of task {:?}, expected checkpoint {seq} of task {task:?}",
                manifest.seq, manifest.task
            )));
        }
        for file in manifest.sst.iter().chain(&manifest.files) {
            validate_file_name(&file.name).map_err(corrupt)?;
        }
        Ok(manifest)
    }

    /// Deletes checkpoints but the newest [`KEEP_CHECKPOINTS`] (`saved`
    /// being the newest) and SST files none of the kept ones lists.
    async fn prune(
        &self,
        task_dir: &Path,
        mut listing: Listing,
        saved: &Manifest,
        mut stored_ssts: BTreeMap<String, (u64, i64)>,
    ) -> Result<(), String> {
        listing.manifests.insert(saved.seq);
        let kept: BTreeSet<u64> = listing
            .manifests
            .iter()
            .rev()
            .take(KEEP_CHECKPOINTS)
            .copied()
            .collect();
        let mut referenced: BTreeSet<String> = saved.sst.iter().map(|f| f.name.clone()).collect();
        for &seq in kept.iter().filter(|&&seq| seq != saved.seq) {
            let manifest = self.read_manifest(&saved.task, task_dir, seq).await?;
            referenced.extend(manifest.sst.into_iter().map(|f| f.name));
        }
        // Manifests first, so no checkpoint is left that misses files.
        listing
            .objects
            .sort_by_key(|(seq, location)| (location.extension() != Some("json"), *seq));
        // Older ones only: a newer number's files may be another writer's
        // save in progress.
        for (_, location) in listing
            .objects
            .iter()
            .filter(|(seq, _)| !kept.contains(seq) && *seq < saved.seq)
        {
            self.delete(location).await?;
        }
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        stored_ssts.extend(saved.sst.iter().map(|f| (f.name.clone(), (f.size, now))));
        for (name, _) in stored_ssts.iter().filter(|(name, (_, written))| {
            !referenced.contains(*name) && now.saturating_sub(*written) >= self.sst_grace_ms
        }) {
            self.delete(&sst_path(task_dir, name)).await?;
        }
        Ok(())
    }

    /// Deletes one object; one already gone is fine.
    async fn delete(&self, location: &Path) -> Result<(), String> {
        match self.store.delete(location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(location, "deleting", e)),
        }
    }

    /// Downloads the files `manifest` lists into `dir`; the bytes written.
    async fn download(
        &self,
        task_dir: &Path,
        manifest: &Manifest,
        dir: &FsPath,
    ) -> Result<u64, String> {
        let files_dir = match &manifest.files_dir {
            Some(name) if files_dir_seq(name) == format!("{:020}", manifest.seq) => {
                task_dir.child("checkpoints").child(name.as_str())
            }
            Some(name) => {
                return Err(format!(
                    "manifest {} names files of another checkpoint ({name:?})",
                    manifest.seq
                ))
            }
            None => checkpoint_dir(task_dir, manifest.seq),
        };
        let ssts = manifest
            .sst
            .iter()
            .map(|f| (sst_path(task_dir, &f.name), f));
        let others = manifest
            .files
            .iter()
            .map(|f| (files_dir.child(f.name.as_str()), f));
        let mut bytes = 0;
        for (location, file) in ssts.chain(others) {
            let target = dir.join(&file.name);
            let written = self.download_file(&location, &target).await?;
            if written != file.size {
                return Err(format!(
                    "{location} in {} has {written} bytes, the manifest says {}",
                    self.url, file.size
                ));
            }
            bytes += written;
        }
        Ok(bytes)
    }

    /// Streams one object into a new file at `target` and syncs it.
    async fn download_file(&self, location: &Path, target: &FsPath) -> Result<u64, String> {
        let out =
            File::create_new(target).map_err(|e| format!("writing {}: {e}", target.display()))?;
        download_to(&*self.store, location, out, target)
            .await
            .map_err(|e| format!("{e} (in {})", self.url))
    }

    /// An object store error, naming the object and the store.
    fn error(&self, location: &Path, doing: &str, e: object_store::Error) -> String {
        format!("{doing} {location} in {}: {e}", self.url)
    }
}

/// The URL forms [`CheckpointStore::open`] accepts.
/// The object store and prefix a URL names: `s3://bucket/prefix`
/// (credentials, region and endpoint from the usual `AWS_*` environment
/// variables, overridden by `options`) or `file:///abs/dir` (created if
/// missing; no options). `what` names the setting in messages; `retry`
/// replaces the S3 client's retries (default: 10 over up to 3 minutes).
pub(crate) fn open_store(
    url: &str,
    options: &[(String, String)],
    what: &str,
    retry: Option<object_store::RetryConfig>,
) -> Result<(Box<dyn ObjectStore>, Path), String> {
    let (store, prefix): (Box<dyn ObjectStore>, Path) =
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!(
                    "{what} URL {url:?} names no bucket: {ACCEPTED_FORMS}"
                ));
            }
            let prefix = Path::parse(prefix).map_err(|e| {
                format!("{what} URL {url:?}: prefix {prefix:?} is not a valid object path: {e}")
            })?;
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            for (name, value) in options {
                let key: AmazonS3ConfigKey = name
                    .to_ascii_lowercase()
                    .parse()
                    .map_err(|e| format!("{what} URL {url:?}: unknown S3 option {name:?}: {e}"))?;
                builder = builder.with_config(key, value);
            }
            if let Some(retry) = retry {
                builder = builder.with_retry(retry);
            }
            let s3 = builder
                .build()
                .map_err(|e| format!("{what} URL {url:?}: {e}"))?;
            (Box::new(s3), prefix)
        } else if let Some(dir) = url.strip_prefix("file://") {
            if !dir.starts_with('/') {
                return Err(format!(
                    "{what} URL {url:?} is not an absolute file URL: {ACCEPTED_FORMS}"
                ));
            }
            if let Some((name, _)) = options.first() {
                return Err(format!(
                    "{what} URL {url:?}: option {name:?} applies only to s3:// URLs"
                ));
            }
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("{what} URL {url:?}: creating {dir}: {e}"))?;
            let local = LocalFileSystem::new_with_prefix(dir)
                .map_err(|e| format!("{what} URL {url:?}: {e}"))?;
            (Box::new(local), Path::default())
        } else {
            return Err(format!(
                "{what} URL {url:?} is not supported: {ACCEPTED_FORMS}"
            ));
        };
    Ok((store, prefix))
}

const ACCEPTED_FORMS: &str = "expected s3://bucket/prefix or file:///absolute/directory";

/// A task's name as one path segment: ASCII letters, digits, `_`, `-` and
/// `.` (not leading) stay; every other byte becomes `!` and two hex digits
/// (`purchase_stats#3@1` -> `purchase_stats!233!401`). One-to-one, so two
/// tasks never share a directory.
fn task_key(task: &str) -> String {
    let mut key = String::with_capacity(task.len());
    for (i, byte) in task.bytes().enumerate() {
        let keep =
            byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' || (byte == b'.' && i > 0);
        if keep {
            key.push(char::from(byte));
        } else {
            key.push_str(&format!("!{byte:02X}"));
        }
    }
    key
}

fn sst_path(task_dir: &Path, name: &str) -> Path {
    task_dir.child("sst").child(name)
}

fn checkpoint_dir(task_dir: &Path, seq: u64) -> Path {
    task_dir.child("checkpoints").child(format!("{seq:020}"))
}

fn manifest_path(task_dir: &Path, seq: u64) -> Path {
    task_dir
        .child("checkpoints")
        .child(format!("{seq:020}.json"))
}

/// The sequence number part of a checkpoint's files directory
/// (`<seq:020>-<writer>`, or `<seq:020>` before writers were named).
fn files_dir_seq(name: &str) -> &str {
    name.split_once('-').map_or(name, |(seq, _)| seq)
}

/// A number telling this save's files from another writer's of the same
/// sequence number: the standard library's per-process random hash keys
/// over the time and a counter.
fn writer_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(SAVES.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// A sequence number written as 20 digits.
fn parse_seq(digits: &str) -> Option<u64> {
    if digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()
    } else {
        None
    }
}

/// A file name fit for both the object store and a local directory:
/// ASCII letters, digits, `_`, `-` and `.`, not starting with `.`.
fn validate_file_name(name: &str) -> Result<(), String> {
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if name.is_empty() || name.starts_with('.') || !plain {
        return Err(format!(
            "file name {name:?} is not a plain name (ASCII letters, digits, '_', '-', '.')"
        ));
    }
    Ok(())
}

/// Files by name, with their sizes in bytes.
type NamedSizes = Vec<(String, u64)>;

/// The files of checkpoint directory `dir`, by name with their sizes: the
/// `*.sst` ones and the others. Refuses subdirectories and odd names.
fn local_files(dir: &FsPath) -> Result<(NamedSizes, NamedSizes), String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("reading checkpoint directory {}: {e}", dir.display()))?;
    let (mut ssts, mut others) = (Vec::new(), Vec::new());
    for entry in entries {
        let entry =
            entry.map_err(|e| format!("reading checkpoint directory {}: {e}", dir.display()))?;
        let path = entry.path();
        let metadata = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if !metadata.is_file() {
            return Err(format!(
                "checkpoint directory {}: {} is not a file (subdirectories are not supported)",
                dir.display(),
                path.display()
            ));
        }
        let name = entry.file_name().into_string().map_err(|name| {
            format!(
                "checkpoint directory {}: file name {name:?} is not UTF-8",
                dir.display()
            )
        })?;
        validate_file_name(&name)
            .map_err(|e| format!("checkpoint directory {}: {e}", dir.display()))?;
        if name.ends_with(".sst") {
            ssts.push((name, metadata.len()));
        } else {
            others.push((name, metadata.len()));
        }
    }
    ssts.sort();
    others.sort();
    Ok((ssts, others))
}

/// Uploads the file at `source` to `location`: in one request when it is
/// small, in parts of [`PART_BYTES`] otherwise. Returns the bytes sent.
/// Streams the object at `location` into `out` (the file at `target`),
/// synced; returns its bytes.
async fn download_to(
    store: &dyn ObjectStore,
    location: &Path,
    mut out: File,
    target: &FsPath,
) -> Result<u64, String> {
    let mut stream = store
        .get(location)
        .await
        .map_err(|e| format!("reading {location}: {e}"))?
        .into_stream();
    let write_error = |e: std::io::Error| format!("writing {}: {e}", target.display());
    let mut written = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("reading {location}: {e}"))?;
        out.write_all(&chunk).map_err(write_error)?;
        written += chunk.len() as u64;
    }
    out.sync_all().map_err(write_error)?;
    Ok(written)
}

pub(crate) async fn upload_file(
    store: &dyn ObjectStore,
    location: &Path,
    source: &FsPath,
) -> Result<u64, String> {
    let read_error = |e: std::io::Error| format!("reading {}: {e}", source.display());
    let store_error = |e: object_store::Error| format!("writing {location}: {e}");
    let mut file = File::open(source).map_err(read_error)?;
    let len = file.metadata().map_err(read_error)?.len();
    if len <= PART_BYTES as u64 {
        let mut body = Vec::with_capacity(usize::try_from(len).unwrap_or(PART_BYTES));
        file.read_to_end(&mut body).map_err(read_error)?;
        let sent = body.len() as u64;
        store
            .put(location, PutPayload::from(body))
            .await
            .map_err(store_error)?;
        return Ok(sent);
    }
    let mut upload = store.put_multipart(location).await.map_err(store_error)?;
    let mut sent = 0;
    let parts = async {
        loop {
            let mut part = vec![0; PART_BYTES];
            let filled = read_full(&mut file, &mut part).map_err(read_error)?;
            if filled == 0 {
                break;
            }
            part.truncate(filled);
            sent += filled as u64;
            upload
                .put_part(PutPayload::from(part))
                .await
                .map_err(store_error)?;
        }
        upload.complete().await.map_err(store_error)?;
        Ok::<_, String>(())
    }
    .await;
    if let Err(e) = parts {
        let _ = upload.abort().await;
        return Err(e);
    }
    Ok(sent)
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn parent_of(dir: &FsPath) -> std::path::PathBuf {
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// A fresh name beside `dir` for a restore in progress.
fn temp_sibling(dir: &FsPath) -> Result<std::path::PathBuf, String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = dir
        .file_name()
        .ok_or_else(|| format!("restore target {} has no file name", dir.display()))?;
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(
        ".restore-{}-{}-{}",
        std::process::id(),
        now_ms(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    Ok(parent_of(dir).join(temp))
}

/// Syncs a directory, so the names in it survive a crash.
fn sync_dir(dir: &FsPath) -> Result<(), String> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("syncing directory {}: {e}", dir.display()))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const TASK: &str = "purchase_stats#3@1";

    /// A `file://` store in a fresh temporary directory.
    fn local_store() -> (tempfile::TempDir, CheckpointStore) {
        let root = tempfile::tempdir().unwrap();
        let url = format!("file://{}", root.path().join("store").display());
        let store = CheckpointStore::open(&url).unwrap();
        (root, store)
    }

    /// Writes `files` into a new directory `name` under `root`.
    fn checkpoint_dir(root: &FsPath, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir(&dir).unwrap();
        for (file, bytes) in files {
            std::fs::write(dir.join(file), bytes).unwrap();
        }
        dir
    }

    /// The files of `dir` with their bytes.
    fn read_dir(dir: &FsPath) -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                (name, std::fs::read(entry.path()).unwrap())
            })
            .collect()
    }

    /// Names of the files in `dir` (empty if it does not exist).
    fn names(dir: &FsPath) -> BTreeSet<String> {
        match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .map(|e| e.unwrap())
                .filter(|e| e.file_type().unwrap().is_file())
                .map(|e| e.file_name().into_string().unwrap())
                .collect(),
            Err(_) => BTreeSet::new(),
        }
    }

    fn task_root(root: &tempfile::TempDir) -> PathBuf {
        root.path().join("store").join(task_key(TASK))
    }

    #[test]
    fn second_save_uploads_only_new_sst_and_restore_gives_its_files() {
        let (root, store) = local_store();
        let first = checkpoint_dir(
            root.path(),
            "first",
            &[
                ("000010.sst", b"ten"),
                ("000011.sst", b"eleven"),
                ("MANIFEST-000005", b"manifest one"),
                ("CURRENT", b"MANIFEST-000005\n"),
                ("OPTIONS-000007", b"options"),
            ],
        );
        let saved = store
            .save(TASK, &first, serde_json::json!({"offset": 10}))
            .unwrap();
        assert_eq!(
            saved,
            SavedCheckpoint {
                seq: 0,
                bytes_uploaded: 3 + 6 + 12 + 16 + 7,
                files_uploaded: 5,
                sst_reused: 0,
            }
        );

        let second = checkpoint_dir(
            root.path(),
            "second",
            &[
                ("000010.sst", b"ten"),
                ("000011.sst", b"eleven"),
                ("000012.sst", b"twelve!"),
                ("MANIFEST-000005", b"manifest two, longer"),
                ("CURRENT", b"MANIFEST-000005\n"),
                ("OPTIONS-000007", b"options"),
                ("000013.log", b""),
            ],
        );
        let saved = store
            .save(TASK, &second, serde_json::json!({"offset": 20}))
            .unwrap();
        assert_eq!(
            saved,
            SavedCheckpoint {
                seq: 1,
                bytes_uploaded: 7 + 20 + 16 + 7,
                files_uploaded: 5,
                sst_reused: 2,
            }
        );
        assert_eq!(
            names(&task_root(&root).join("sst")),
            ["000010.sst", "000011.sst", "000012.sst"]
                .map(String::from)
                .into()
        );

        let newest = store.newest(TASK).unwrap().unwrap();
        assert_eq!(newest.seq, 1);
        assert_eq!(newest.meta, serde_json::json!({"offset": 20}));

        let restored = root.path().join("restored");
        let info = store.restore(TASK, &restored).unwrap().unwrap();
        assert_eq!(info, newest);
        assert_eq!(read_dir(&restored), read_dir(&second));
        // Nothing but the restored directory was left beside it.
        let siblings = names(root.path());
        assert!(siblings.is_empty(), "{siblings:?}");
        assert_eq!(
            std::fs::read_dir(root.path()).unwrap().count(),
            4,
            "store, first, second, restored"
        );
    }

    /// The per-checkpoint file directories under `checkpoints` holding
    /// files, by sequence number.
    fn files_dirs(checkpoints: &FsPath) -> BTreeMap<u64, Vec<String>> {
        let mut dirs: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for entry in std::fs::read_dir(checkpoints).unwrap() {
            let entry = entry.unwrap();
            // Deleted objects leave empty directories on a local store.
            if entry.file_type().unwrap().is_dir() && !names(&entry.path()).is_empty() {
                let name = entry.file_name().into_string().unwrap();
                let seq = parse_seq(files_dir_seq(&name)).unwrap();
                dirs.entry(seq).or_default().push(name);
            }
        }
        dirs
    }

    #[test]
    fn three_saves_keep_two_checkpoints_and_drop_unreferenced_sst() {
        let (root, store) = local_store();
        let store = store.with_sst_grace_ms(0);
        let contents: [&[(&str, &[u8])]; 3] = [
            &[("000001.sst", b"one"), ("CURRENT", b"a")],
            &[("000002.sst", b"two"), ("CURRENT", b"b")],
            &[
                ("000002.sst", b"two"),
                ("000003.sst", b"three"),
                ("CURRENT", b"c"),
            ],
        ];
        for (i, files) in contents.iter().enumerate() {
            let dir = checkpoint_dir(root.path(), &format!("dir{i}"), files);
            let saved = store.save(TASK, &dir, serde_json::json!(i)).unwrap();
            assert_eq!(saved.seq, i as u64);
        }
        let checkpoints = task_root(&root).join("checkpoints");
        let manifests: BTreeSet<String> = names(&checkpoints);
        assert_eq!(
            manifests,
            [format!("{:020}.json", 1), format!("{:020}.json", 2)].into()
        );
        let dirs = files_dirs(&checkpoints);
        assert_eq!(dirs.keys().copied().collect::<Vec<_>>(), [1, 2], "{dirs:?}");
        assert_eq!(
            names(&checkpoints.join(&dirs[&1][0])),
            ["CURRENT".to_string()].into()
        );
        // 000001.sst was in checkpoint 0 only.
        assert_eq!(
            names(&task_root(&root).join("sst")),
            ["000002.sst", "000003.sst"].map(String::from).into()
        );
        let restored = root.path().join("restored");
        let info = store.restore(TASK, &restored).unwrap().unwrap();
        assert_eq!((info.seq, info.meta), (2, serde_json::json!(2)));
        assert_eq!(read_dir(&restored), read_dir(&root.path().join("dir2")));
    }

    #[test]
    fn a_save_leaves_another_writers_save_in_progress_whole() {
        let (root, store) = local_store();
        let first = checkpoint_dir(
            root.path(),
            "first",
            &[("000001.sst", b"one"), ("CURRENT", b"a")],
        );
        assert_eq!(
            store.save(TASK, &first, serde_json::json!(0)).unwrap().seq,
            0
        );
        // Another node is saving checkpoint 1: an SST and its files are
        // up, its manifest not yet.
        let task = task_root(&root);
        std::fs::write(task.join("sst").join("000009.sst"), b"nine").unwrap();
        let theirs = task
            .join("checkpoints")
            .join(format!("{:020}-{:016x}", 1, 7));
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(theirs.join("CURRENT"), b"z").unwrap();
        // This node saves two checkpoints meanwhile (numbers 1 and 2:
        // the other's has no manifest yet).
        let second = checkpoint_dir(
            root.path(),
            "second",
            &[("000002.sst", b"two"), ("CURRENT", b"b")],
        );
        let third = checkpoint_dir(
            root.path(),
            "third",
            &[("000003.sst", b"three"), ("CURRENT", b"c")],
        );
        assert_eq!(
            store.save(TASK, &second, serde_json::json!(1)).unwrap().seq,
            1
        );
        assert_eq!(
            store.save(TASK, &third, serde_json::json!(2)).unwrap().seq,
            2
        );
        // The other writer's files and fresh SST are still there, its
        // directory apart from this node's checkpoint 1.
        assert!(theirs.join("CURRENT").exists());
        assert!(task.join("sst").join("000009.sst").exists());
        assert_eq!(files_dirs(&task.join("checkpoints"))[&1].len(), 2);
        // Its manifest comes last and stands, with its own files.
        let manifest = Manifest {
            format: CHECKPOINT_FORMAT,
            task: TASK.to_string(),
            seq: 3,
            created_at_ms: 1,
            sst: vec![FileEntry {
                name: "000009.sst".into(),
                size: 4,
            }],
            files: vec![FileEntry {
                name: "CURRENT".into(),
                size: 1,
            }],
            meta: serde_json::json!("theirs"),
            files_dir: Some(format!("{:020}-{:016x}", 3, 7)),
        };
        let late = task
            .join("checkpoints")
            .join(format!("{:020}-{:016x}", 3, 7));
        std::fs::create_dir_all(&late).unwrap();
        std::fs::write(late.join("CURRENT"), b"z").unwrap();
        std::fs::write(
            task.join("checkpoints").join(format!("{:020}.json", 3)),
            serde_json::to_vec(&manifest).unwrap(),
        )
        .unwrap();
        let restored = root.path().join("restored");
        let info = store.restore(TASK, &restored).unwrap().unwrap();
        assert_eq!(info.meta, serde_json::json!("theirs"));
        assert_eq!(std::fs::read(restored.join("000009.sst")).unwrap(), b"nine");
        assert_eq!(std::fs::read(restored.join("CURRENT")).unwrap(), b"z");
    }

    #[test]
    fn unknown_task_has_no_checkpoint() {
        let (root, store) = local_store();
        assert_eq!(store.newest("nobody@1").unwrap(), None);
        let dir = root.path().join("restored");
        assert_eq!(store.restore("nobody@1", &dir).unwrap(), None);
        assert!(!dir.exists());
    }

    #[test]
    fn restore_refuses_an_existing_directory() {
        let (root, store) = local_store();
        let dir = checkpoint_dir(root.path(), "dir", &[("CURRENT", b"x")]);
        store.save(TASK, &dir, serde_json::Value::Null).unwrap();
        let error = store.restore(TASK, &dir).unwrap_err();
        assert!(error.contains("exists already"), "{error}");
    }

    #[test]
    fn bad_urls_are_refused() {
        for url in [
            "http://example.com/x",
            "/tmp/checkpoints",
            "file://relative/dir",
            "s3://",
            "s3:///prefix",
        ] {
            let error = CheckpointStore::open(url).err().unwrap();
            assert!(error.contains(url), "{error}");
            assert!(error.contains("s3://bucket/prefix"), "{error}");
        }
        let root = tempfile::tempdir().unwrap();
        let url = format!("file://{}", root.path().display());
        let options = [("AWS_REGION".to_string(), "x".to_string())];
        let error = CheckpointStore::open_with(&url, &options).err().unwrap();
        assert!(error.contains("only to s3://"), "{error}");
    }

    #[test]
    fn manifest_of_another_format_is_refused() {
        let (root, store) = local_store();
        let dir = checkpoint_dir(root.path(), "dir", &[("CURRENT", b"x")]);
        store.save(TASK, &dir, serde_json::Value::Null).unwrap();
        let manifest = task_root(&root)
            .join("checkpoints")
            .join(format!("{:020}.json", 0));
        let mut value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
        value["format"] = serde_json::json!(2);
        std::fs::write(&manifest, serde_json::to_vec(&value).unwrap()).unwrap();
        let error = store.newest(TASK).unwrap_err();
        assert!(error.contains("format 2 is not supported"), "{error}");
        let restored = root.path().join("restored");
        assert!(store.restore(TASK, &restored).is_err());
        assert!(!restored.exists());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 2);
    }

    #[test]
    fn subdirectories_and_odd_names_are_refused() {
        let (root, store) = local_store();
        let dir = checkpoint_dir(root.path(), "dir", &[("CURRENT", b"x")]);
        std::fs::create_dir(dir.join("sub")).unwrap();
        let error = store.save(TASK, &dir, serde_json::Value::Null).unwrap_err();
        assert!(error.contains("not a file"), "{error}");
        let dir = checkpoint_dir(root.path(), "dir2", &[("a b", b"x")]);
        let error = store.save(TASK, &dir, serde_json::Value::Null).unwrap_err();
        assert!(error.contains("\"a b\""), "{error}");
        assert_eq!(store.newest(TASK).unwrap(), None);
    }

    #[test]
    fn task_names_become_distinct_plain_segments() {
        assert_eq!(task_key("purchase_stats#3@1"), "purchase_stats!233!401");
        assert_eq!(task_key(".."), "!2E.");
        assert_eq!(task_key("a!23"), "a!2123");
        assert_ne!(task_key("a#"), task_key("a!23"));
        assert!(task_key("x/../y é")
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.!".contains(&b)));
    }

    #[test]
    fn large_files_go_up_in_parts() {
        let (root, store) = local_store();
        let big: Vec<u8> = (0..PART_BYTES * 2 + 12345)
            .map(|i| (i % 251) as u8)
            .collect();
        let dir = checkpoint_dir(
            root.path(),
            "dir",
            &[("000009.sst", &big), ("CURRENT", b"x")],
        );
        let saved = store.save(TASK, &dir, serde_json::Value::Null).unwrap();
        assert_eq!(saved.bytes_uploaded, big.len() as u64 + 1);
        let restored = root.path().join("restored");
        store.restore(TASK, &restored).unwrap().unwrap();
        assert_eq!(read_dir(&restored), read_dir(&dir));
    }
    #[test]
    fn a_rocksdb_checkpoint_restores_into_a_database_with_its_keys() {
        let (root, store) = local_store();
        let db = rocksdb::DB::open_default(root.path().join("db")).unwrap();
        for round in 0..3 {
            for i in 0..100 {
                db.put(format!("key-{round}-{i}"), format!("value {i}"))
                    .unwrap();
            }
            db.flush().unwrap();
            let dir = root.path().join(format!("checkpoint-{round}"));
            rocksdb::checkpoint::Checkpoint::new(&db)
                .unwrap()
                .create_checkpoint(&dir)
                .unwrap();
            let saved = store
                .save(TASK, &dir, serde_json::json!({ "round": round }))
                .unwrap();
            // Each flush adds one SST; the earlier ones are reused.
            assert_eq!(saved.sst_reused, round);
        }
        drop(db);
        let restored = root.path().join("restored");
        let info = store.restore(TASK, &restored).unwrap().unwrap();
        assert_eq!(info.meta, serde_json::json!({ "round": 2 }));
        let db = rocksdb::DB::open_default(&restored).unwrap();
        for round in 0..3 {
            assert_eq!(
                db.get(format!("key-{round}-99")).unwrap().as_deref(),
                Some(&b"value 99"[..])
            );
        }
    }
}
