//! The catalog: what the server hosts, persisted as `<data>/catalog.json`.
//!
//! It holds the declared sources (streams and tables over topics) and, per
//! view or derived stream, every live version: the served one, the one
//! being built (with where it started) and the ones still readable after a
//! swap (with the time they stop being readable), plus the last failure.
//! Each version carries its own plan and SQL text, so a replaced definition
//! and its predecessor can run side by side.
//!
//! The file's format (`format` 1) is the serde JSON of the stored types in
//! [`super::stored`], never of the processor's planner types: decoding
//! reads a [`StoredCatalog`] and converts it, encoding converts and writes
//! one, so a change to a planner type cannot change the file (the
//! conversion stops compiling instead). docs/data-directory.md specifies
//! every field.
//!
//! Invariants: a version number is used once per view (`next_version` only
//! grows); the file is replaced atomically (temporary file, fsync, rename,
//! fsync of the directory), so after a crash it is the old or the new
//! catalog, never a mix. State stores not named here are garbage
//! and are dropped at startup — which is why a start never proceeds
//! without the catalog it should have:
//!
//! - Every save first checks that what it writes loads back, then writes
//!   the same bytes to `catalog.json.bak` and only then replaces
//!   `catalog.json` (both atomically), so the backup is always a good copy
//!   of the latest catalog (or, after a crash between the two, one save
//!   ahead).
//! - [`Catalog::open`] refuses to start when `catalog.json` is damaged, of
//!   another format, or missing while its backup or view state exists,
//!   with a message naming the file and the recovery; it never writes,
//!   renames or deletes. The format number is read first, so a catalog of
//!   a newer format is refused as such even when the rest would not decode.
//!   Unknown fields are ignored (format 1 always was read so), unknown
//!   variants refused.
//! - Decoding depth is bounded: a stored plan's expressions are at most
//!   [`MAX_EXPR_DEPTH`] deep (checked when it is accepted), the file's JSON
//!   nesting is checked against [`MAX_CATALOG_JSON_DEPTH`] before decoding,
//!   and the decoder runs on a thread with a [`DECODE_STACK_BYTES`] stack
//!   (serde_json's own limit of 128 levels is lifted: it would refuse
//!   plans the server accepted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::views::stored::StoredCatalog;
use crate::views::ViewError;
use kappa_processor::host::StartFrom;
use kappa_processor::limits::MAX_EXPR_DEPTH;
use kappa_processor::plan::{Plan, Sink};
use kappa_processor::sql::SourceDecl;
use serde::{Deserialize, Serialize};

/// File name of the catalog inside the data directory.
pub const CATALOG_FILE: &str = "catalog.json";
/// File name of the backup: a copy of the latest good catalog.
pub const CATALOG_BACKUP_FILE: &str = "catalog.json.bak";
/// Version of the catalog's format.
pub const CATALOG_FORMAT: u32 = 1;
/// Deepest JSON nesting of a catalog file: an expression level is two
/// (`{"Binary": [op, left, right]}`), the rest of the catalog a few dozen.
pub const MAX_CATALOG_JSON_DEPTH: usize = 2 * MAX_EXPR_DEPTH + 100;
/// Stack of the thread that decodes a catalog; decoding
/// [`MAX_CATALOG_JSON_DEPTH`] levels needs a few MiB in a debug build.
pub const DECODE_STACK_BYTES: usize = 64 << 20;

/// Why the catalog could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A catalog file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A catalog file could not be written (nothing changed: the old file
    /// is still whole).
    #[error("writing {what} {}: {source}", path.display())]
    Write {
        /// `"the catalog"` or `"the catalog backup"`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why: the log's file seam error (a full disk, a failed fsync).
        source: Box<kappa_log::LogError>,
    },
    /// The catalog is not one this server reads, or is missing while view
    /// state says it should exist: the message says how to recover.
    #[error("{0}")]
    Refused(String),
}

impl CatalogError {
    /// True when the filesystem is full (`ENOSPC`): the caller can free
    /// space and retry; answered `507 disk_full`.
    pub fn is_disk_full(&self) -> bool {
        let full = |e: &std::io::Error| e.kind() == std::io::ErrorKind::StorageFull;
        match self {
            CatalogError::Read { source, .. } => full(source),
            CatalogError::Write { source, .. } => match source.as_ref() {
                kappa_log::LogError::Io { source, .. } => full(source),
                _ => false,
            },
            CatalogError::Refused(_) => false,
        }
    }
}

/// Everything the server hosts besides the log. Stored as a
/// [`StoredCatalog`] ([`Catalog::decode`], [`Catalog::encode`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    /// Format version ([`CATALOG_FORMAT`]).
    pub format: u32,
    /// Declared streams and tables, by name.
    pub sources: BTreeMap<String, SourceDecl>,
    /// Views and derived streams, by name.
    pub views: BTreeMap<String, ViewEntry>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            format: CATALOG_FORMAT,
            sources: BTreeMap::new(),
            views: BTreeMap::new(),
        }
    }
}

/// One processor version's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionEntry {
    /// Version number.
    pub version: u64,
    /// What it runs.
    pub plan: Plan,
    /// The SQL it was defined with (None when defined by a plan).
    pub sql: Option<String>,
    /// Where it starts reading when it has no committed offsets yet.
    pub start: StartFrom,
    /// When it was first started (ms).
    pub started_ms: i64,
    /// The input offset it actually started reading at, per partition
    /// (absent in catalogs written before it was recorded): a replay from
    /// earliest sees all the input this version saw while the log still
    /// holds every offset from here.
    pub first_offsets: Option<Vec<u64>>,
    /// Workers of each kind it runs with (its view's `PARALLELISM` when it
    /// was created); the server's `processor_threads` if `None`.
    pub workers: Option<u32>,
}

/// A version being built in the background.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildEntry {
    /// The version.
    pub entry: VersionEntry,
    /// Where it actually started, per input partition (progress counts
    /// from here).
    pub start_offsets: Vec<u64>,
    /// The input's end offsets when it started: it is swapped in only
    /// after reaching them (so it never serves less history than the
    /// version it replaces had), and once its lag is small enough.
    pub target_offsets: Vec<u64>,
    /// Manual swap (`SWAP='MANUAL'`, `"swap": "manual"`): once caught up
    /// the build keeps following its input and waits for
    /// `POST /v1/views/{view}/promote` instead of being swapped in.
    pub manual: bool,
}

impl ViewEntry {
    /// Serves `entry` in place of the served version, which is kept in
    /// grace as `keeping` says (so it can be read and rolled back to);
    /// returns the versions to drop now: the old one if nothing is kept,
    /// else the oldest kept ones beyond the count.
    pub fn serve(
        &mut self,
        entry: VersionEntry,
        keeping: Keeping,
        now_ms: i64,
    ) -> Vec<VersionEntry> {
        let old = std::mem::replace(&mut self.served, entry);
        if keeping.versions == 0 || keeping.grace_ms == 0 {
            return vec![old];
        }
        self.grace.push(GraceEntry {
            entry: old,
            readable_until_ms: now_ms.saturating_add(keeping.grace_ms.min(i64::MAX as u64) as i64),
        });
        let beyond = self.grace.len().saturating_sub(keeping.versions as usize);
        self.grace.drain(..beyond).map(|g| g.entry).collect()
    }
}

/// How a view keeps the versions it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keeping {
    /// How many (the most recent).
    pub versions: u32,
    /// For how long each (ms).
    pub grace_ms: u64,
}

/// A replaced version still readable (`?version=`) for a while.
#[derive(Debug, Clone, PartialEq)]
pub struct GraceEntry {
    /// The version.
    pub entry: VersionEntry,
    /// When it stops being readable and its state is dropped (ms).
    pub readable_until_ms: i64,
}

/// Why a version stopped.
///
/// Serializable for answers that show it; the catalog stores it as a
/// [`crate::views::stored::StoredFailure`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The version that failed.
    pub version: u64,
    /// The processor's error.
    pub reason: String,
    /// When it was noticed (ms).
    pub at_ms: i64,
    /// True if it was a build (the served version kept serving).
    pub during_build: bool,
}

/// A view (table) or derived stream and its versions.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewEntry {
    /// Name (also the processor's and, for tables, the view's).
    pub name: String,
    /// The version queries read.
    pub served: VersionEntry,
    /// The version being built, if any.
    pub building: Option<BuildEntry>,
    /// Replaced versions still readable.
    pub grace: Vec<GraceEntry>,
    /// The last failure, cleared when a new build starts.
    pub failure: Option<Failure>,
    /// The number the next version gets.
    pub next_version: u64,
    /// When the view was created (ms).
    pub created_ms: i64,
    /// Replaced versions kept (`KEEP_VERSIONS`); the server's if `None`.
    pub keep_versions: Option<u32>,
    /// How long a replaced version is kept (`VERSION_GRACE`, ms); the
    /// server's if `None`.
    pub version_grace_ms: Option<u64>,
    /// Workers of each kind its next versions run with (`PARALLELISM`);
    /// the server's `processor_threads` if `None`.
    pub parallelism: Option<u32>,
}

impl ViewEntry {
    /// True for a table (rows in a view); false for a derived stream.
    pub fn is_table(&self) -> bool {
        self.served.plan.sink == Sink::View
    }

    /// The newest definition: the build's if one runs, else the served one.
    pub fn latest(&self) -> &VersionEntry {
        self.building.as_ref().map_or(&self.served, |b| &b.entry)
    }

    /// Every live version: served, building, in grace.
    pub fn versions(&self) -> impl Iterator<Item = &VersionEntry> {
        std::iter::once(&self.served)
            .chain(self.building.iter().map(|b| &b.entry))
            .chain(self.grace.iter().map(|g| &g.entry))
    }

    /// The live version numbered `version`, if any.
    pub fn version(&self, version: u64) -> Option<&VersionEntry> {
        self.versions().find(|v| v.version == version)
    }

    /// Topics this view reads (source and join table).
    pub fn input_topics(&self) -> Vec<String> {
        let mut topics = Vec::new();
        for v in self.versions() {
            topics.push(v.plan.source.topic.clone());
            topics.extend(v.plan.joined_topics().into_iter().map(str::to_string));
        }
        topics.sort();
        topics.dedup();
        topics
    }

    /// The topic a derived stream writes, if it is one.
    pub fn output_topic(&self) -> Option<&str> {
        match &self.served.plan.sink {
            Sink::Topic(t) => Some(t),
            Sink::View => None,
        }
    }
}

impl Catalog {
    /// Path of the catalog in `data_dir`.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(CATALOG_FILE)
    }

    /// Path of the backup in `data_dir`.
    pub fn backup_path(data_dir: &Path) -> PathBuf {
        data_dir.join(CATALOG_BACKUP_FILE)
    }

    /// Reads the catalog of `data_dir` at startup. `state` names the
    /// versions that have a state store (`<name>@<version>`, under
    /// `stores_dir`): if `catalog.json` is missing while view
    /// state or the backup exists, the views were
    /// not removed but their catalog was lost, and starting would drop
    /// their state; so it refuses, naming the file and the recovery. A
    /// damaged catalog is refused the same way. Only a data directory with
    /// neither catalog, backup nor view state starts empty.
    pub fn open(
        data_dir: &Path,
        state: &[String],
        stores_dir: &Path,
    ) -> Result<Catalog, CatalogError> {
        let path = Catalog::path(data_dir);
        let backup = Catalog::backup_path(data_dir);
        let restore = || match std::fs::read(&backup).map(|b| Catalog::decode(&b)) {
            Ok(Ok(_)) => format!(
                "; {} holds a good copy of the latest catalog: restore it with \
                 `cp {} {}` and start again",
                backup.display(),
                backup.display(),
                path.display()
            ),
            _ => format!(
                "; there is no good backup ({}): restore catalog.json from a backup of the \
                 data directory, or, to start without these views, move the state directory \
                 {} aside (nothing is deleted)",
                backup.display(),
                stores_dir.display()
            ),
        };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let views = state.len();
                if views == 0 && !backup.exists() {
                    return Ok(Catalog::default());
                }
                return Err(CatalogError::Refused(format!(
                    "{} is missing, but the data directory has {} (and the state of {views} view \
                     versions): refusing to start, which would drop that state{}",
                    path.display(),
                    if backup.exists() {
                        CATALOG_BACKUP_FILE
                    } else {
                        "no catalog backup"
                    },
                    restore()
                )));
            }
            Err(source) => return Err(CatalogError::Read { path, source }),
        };
        decode(&bytes).map_err(|e| match e {
            DecodeError::Format(format) => CatalogError::Refused(format!(
                "catalog {} has format {format}, and this server reads format {CATALOG_FORMAT}: \
                 it was written by {} version of kappa. Start that version, or restore the data \
                 directory from a backup taken before it ran (nothing was changed)",
                path.display(),
                if format > CATALOG_FORMAT {
                    "a newer"
                } else {
                    "another"
                },
            )),
            DecodeError::Invalid(e) => CatalogError::Refused(format!(
                "catalog {} is not valid: {e}{}",
                path.display(),
                restore()
            )),
        })
    }

    /// Reads the catalog at `path`; an absent file is an empty catalog.
    pub fn load(path: &Path) -> Result<Catalog, CatalogError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Catalog::default()),
            Err(source) => {
                return Err(CatalogError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        Catalog::decode(&bytes).map_err(|e| {
            CatalogError::Refused(format!("catalog {} is not valid: {e}", path.display()))
        })
    }

    /// Decodes a catalog file's bytes: JSON nested at most
    /// [`MAX_CATALOG_JSON_DEPTH`] deep, of format [`CATALOG_FORMAT`].
    /// The format number is read first: another format is refused as such
    /// whatever the rest holds.
    pub fn decode(bytes: &[u8]) -> Result<Catalog, String> {
        decode(bytes).map_err(|e| match e {
            DecodeError::Format(format) => {
                format!("format {format}, this server reads format {CATALOG_FORMAT}")
            }
            DecodeError::Invalid(e) => e,
        })
    }

    /// The bytes [`Catalog::save`] writes: pretty-printed JSON, no
    /// trailing newline.
    pub fn encode(&self) -> Result<Vec<u8>, CatalogError> {
        serde_json::to_vec_pretty(&StoredCatalog::from(self))
            .map_err(|e| CatalogError::Refused(format!("encoding the catalog: {e}")))
    }

    /// Replaces the file at `path` atomically with this catalog, after
    /// checking that it loads back, and writes the same bytes to the
    /// backup beside it.
    ///
    /// Order: the backup first, then the catalog — except for the very
    /// first save, which writes the catalog first. A crash between the two
    /// then leaves the old catalog (with a newer backup), or a catalog
    /// without a backup; never a backup without a catalog, which
    /// [`Catalog::open`] must refuse as a lost catalog.
    pub fn save(&self, path: &Path) -> Result<(), CatalogError> {
        let json = self.encode()?;
        Catalog::decode(&json).map_err(|e| {
            CatalogError::Refused(format!("the catalog would not load back, not saved: {e}"))
        })?;
        let backup = path.with_file_name(CATALOG_BACKUP_FILE);
        let write = |what: &'static str, to: &Path| {
            kappa_log::io::write_atomic(to, &json).map_err(|source| CatalogError::Write {
                what,
                path: to.to_path_buf(),
                source: Box::new(source),
            })
        };
        let write_backup = || write("the catalog backup", &backup);
        let write_catalog = || write("the catalog", path);
        if path.exists() {
            write_backup()?;
            write_catalog()
        } else {
            write_catalog()?;
            write_backup()
        }
    }

    /// Refuses to drop `name` while a view other than `except` reads `topic`.
    pub fn check_unread(&self, topic: &str, name: &str, except: &str) -> Result<(), ViewError> {
        let dependents = self.readers_of(topic, except);
        if dependents.is_empty() {
            return Ok(());
        }
        Err(ViewError::HasDependents {
            name: name.to_string(),
            dependents,
        })
    }

    /// Names of the views whose input is `topic`, except `except`.
    pub fn readers_of(&self, topic: &str, except: &str) -> Vec<String> {
        self.views
            .values()
            .filter(|v| v.name != except && v.input_topics().iter().any(|t| t == topic))
            .map(|v| v.name.clone())
            .collect()
    }
}

/// Why a catalog file's bytes do not decode.
enum DecodeError {
    /// A JSON object whose `format` is not [`CATALOG_FORMAT`].
    Format(u32),
    /// Anything else, said in the message.
    Invalid(String),
}

/// Only the format number of a catalog file (every other field ignored).
#[derive(Deserialize)]
struct FormatOnly {
    format: u32,
}

/// Reads one `T` from all of `bytes`, without serde_json's depth limit
/// (the caller checked the depth and runs on a large stack).
fn from_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// [`Catalog::decode`] with the format refusal apart: the depth, then the
/// format number, then the whole file as a [`StoredCatalog`], converted on
/// the decoding thread (the conversion recurses as deep as the plan).
fn decode(bytes: &[u8]) -> Result<Catalog, DecodeError> {
    let depth = json_depth(bytes);
    if depth > MAX_CATALOG_JSON_DEPTH {
        return Err(DecodeError::Invalid(format!(
            "JSON nested {depth} levels deep; at most {MAX_CATALOG_JSON_DEPTH} are read"
        )));
    }
    on_decode_thread(|| {
        let format = from_json::<FormatOnly>(bytes)
            .map_err(DecodeError::Invalid)?
            .format;
        if format != CATALOG_FORMAT {
            return Err(DecodeError::Format(format));
        }
        let stored = from_json::<StoredCatalog>(bytes).map_err(DecodeError::Invalid)?;
        Ok(Catalog::from(stored))
    })
    .map_err(DecodeError::Invalid)?
}

/// The deepest nesting of `[` and `{` outside strings: an upper bound of
/// how deep serde_json recurses on `bytes` (it stops at the first error,
/// and up to there the two agree).
fn json_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Runs `f` on a thread with a [`DECODE_STACK_BYTES`] stack; an error
/// if the thread cannot start or `f` panics.
fn on_decode_thread<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("kappa-catalog".into())
            .stack_size(DECODE_STACK_BYTES)
            .spawn_scoped(scope, f)
            .map_err(|e| format!("starting the decoder thread: {e}"))?
            .join()
            .map_err(|_| "the decoder panicked".to_string())
    })
}

/// The catalog loader on arbitrary bytes, for the `catalog_load` fuzz
/// target and its corpus test: never panics; what decodes encodes and
/// decodes again (what `save` relies on).
#[doc(hidden)]
pub fn fuzz_catalog_load(bytes: &[u8]) {
    if let Ok(catalog) = Catalog::decode(bytes) {
        let json = catalog.encode().expect("a decoded catalog encodes");
        if let Err(e) = Catalog::decode(&json) {
            panic!("a decoded catalog does not decode again: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kappa_processor::dsl::{self, Pipeline};
    use kappa_processor::expr::Expr;

    fn entry() -> ViewEntry {
        let plan = Pipeline::from_topic("t")
            .key_by([("k", Expr::field("k"))])
            .aggregate([dsl::count("n")])
            .to_view("v");
        let served = VersionEntry {
            version: 1,
            plan,
            sql: Some("CREATE TABLE v AS ...".into()),
            start: StartFrom::Earliest,
            started_ms: 5,
            first_offsets: Some(vec![0]),
            workers: Some(3),
        };
        ViewEntry {
            name: "v".into(),
            building: Some(BuildEntry {
                entry: VersionEntry {
                    version: 2,
                    start: StartFrom::Timestamp(7),
                    ..served.clone()
                },
                start_offsets: vec![3],
                target_offsets: vec![9],
                manual: false,
            }),
            grace: Vec::new(),
            served,
            failure: None,
            next_version: 3,
            created_ms: 5,
            keep_versions: Some(2),
            version_grace_ms: None,
            parallelism: Some(3),
        }
    }

    #[test]
    fn catalog_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = Catalog::path(dir.path());
        assert_eq!(Catalog::load(&path).unwrap(), Catalog::default());
        let mut catalog = Catalog::default();
        catalog.views.insert("v".into(), entry());
        catalog.save(&path).unwrap();
        assert_eq!(Catalog::load(&path).unwrap(), catalog);
        assert!(!path.with_extension("tmp").exists());
    }

    #[test]
    fn a_corrupt_catalog_is_an_error_not_an_empty_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let path = Catalog::path(dir.path());
        std::fs::write(&path, b"{not json").unwrap();
        assert!(Catalog::load(&path).is_err());
    }

    /// A catalog whose view filters on `amount > 1 OR ..` nested `depth`
    /// deep (the shape of issue 11's statement).
    fn deep_catalog(depth: usize) -> Catalog {
        let term = || Expr::field("amount").gt(Expr::lit(1));
        let mut filter = term();
        // n terms are n + 1 deep.
        for _ in 2..depth {
            filter = filter.or(term());
        }
        let mut e = entry();
        e.served.plan.filter = Some(filter);
        e.served.plan.validate().unwrap();
        let mut catalog = Catalog::default();
        catalog.views.insert("v".into(), e);
        catalog
    }

    #[test]
    fn a_plan_at_the_expression_depth_limit_survives_save_and_load() {
        // Issue 11: 61 OR-ed terms were accepted, then serde_json's depth
        // limit of 128 refused the catalog at the next start.
        for depth in [62, MAX_EXPR_DEPTH] {
            let dir = tempfile::tempdir().unwrap();
            let catalog = deep_catalog(depth);
            catalog.save(&Catalog::path(dir.path())).unwrap();
            let loaded = Catalog::open(dir.path(), &["v@1".into()], dir.path()).unwrap();
            assert_eq!(loaded, catalog, "depth {depth}");
        }
    }

    #[test]
    fn json_nested_past_the_limit_is_refused_before_decoding() {
        let deep = "[".repeat(1 << 20);
        let err = Catalog::decode(deep.as_bytes()).unwrap_err();
        assert!(err.contains("nested"), "{err}");
        let quoted = format!("\"{}\"", "[".repeat(5000));
        assert_eq!(json_depth(quoted.as_bytes()), 0);
        assert_eq!(json_depth(br#"{"a": ["\"[", {}]}"#), 3);
    }

    #[test]
    fn every_save_keeps_a_backup_of_the_latest_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let mut catalog = Catalog::default();
        catalog.views.insert("v".into(), entry());
        catalog.save(&Catalog::path(dir.path())).unwrap();
        let backup = Catalog::backup_path(dir.path());
        assert_eq!(Catalog::load(&backup).unwrap(), catalog);
        assert_eq!(
            std::fs::read(&backup).unwrap(),
            std::fs::read(Catalog::path(dir.path())).unwrap()
        );
    }

    #[test]
    fn a_missing_catalog_starts_empty_only_without_view_state_or_backup() {
        let dir = tempfile::tempdir().unwrap();
        let stores = dir.path().join("views");
        let other: Vec<String> = Vec::new();
        assert_eq!(
            Catalog::open(dir.path(), &other, &stores).unwrap(),
            Catalog::default()
        );

        let state = vec!["v@1".to_string()];
        let err = Catalog::open(dir.path(), &state, &stores)
            .unwrap_err()
            .to_string();
        assert!(err.contains("catalog.json is missing"), "{err}");
        assert!(err.contains("move the state directory"), "{err}");

        let mut catalog = Catalog::default();
        catalog.views.insert("v".into(), entry());
        catalog.save(&Catalog::path(dir.path())).unwrap();
        std::fs::remove_file(Catalog::path(dir.path())).unwrap();
        for cfs in [&other, &state] {
            let err = Catalog::open(dir.path(), cfs, &stores)
                .unwrap_err()
                .to_string();
            assert!(err.contains("catalog.json.bak holds a good copy"), "{err}");
        }
        assert!(!Catalog::path(dir.path()).exists(), "nothing was written");
    }

    #[test]
    fn a_damaged_catalog_refuses_naming_the_file_and_the_backup() {
        let dir = tempfile::tempdir().unwrap();
        let mut catalog = Catalog::default();
        catalog.views.insert("v".into(), entry());
        let path = Catalog::path(dir.path());
        catalog.save(&path).unwrap();
        std::fs::write(&path, b"{\"format\": 1, \"sour").unwrap();
        let err = Catalog::open(dir.path(), &[], dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("catalog.json is not valid"), "{err}");
        assert!(err.contains("cp "), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"format\": 1, \"sour");
    }

    #[test]
    fn versions_lists_served_building_and_grace() {
        let e = entry();
        let numbers: Vec<u64> = e.versions().map(|v| v.version).collect();
        assert_eq!(numbers, vec![1, 2]);
        assert_eq!(e.latest().version, 2);
        assert_eq!(e.input_topics(), vec!["t".to_string()]);
    }
}
