//! The catalog: what the server hosts, persisted as `<data>/catalog.json`.
//!
//! It holds the declared sources (streams and tables over topics) and, per
//! view or derived stream, every live version: the served one, the one
//! being built (with where it started) and the ones still readable after a
//! swap (with the time they stop being readable), plus the last failure.
//! Each version carries its own plan and SQL text, so a replaced definition
//! and its predecessor can run side by side.
//!
//! Invariants: a version number is used once per view (`next_version` only
//! grows); the file is replaced atomically (temporary file, fsync, rename,
//! fsync of the directory), so after a crash it is the old or the new
//! catalog, never a mix. State column families not named here are garbage
//! and are dropped at startup.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::views::ViewError;
use kappa_processor::plan::{Plan, Sink};
use kappa_processor::runner::StartFrom;
use kappa_processor::sql::SourceDecl;
use serde::{Deserialize, Serialize};

/// File name of the catalog inside the data directory.
pub const CATALOG_FILE: &str = "catalog.json";
/// Version of the catalog's format.
pub const CATALOG_FORMAT: u32 = 1;

/// Everything the server hosts besides the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// A version being built in the background.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildEntry {
    /// The version.
    #[serde(flatten)]
    pub entry: VersionEntry,
    /// Where it actually started, per input partition (progress counts
    /// from here).
    pub start_offsets: Vec<u64>,
    /// The input's end offsets when it started: it is swapped in only
    /// after reaching them (so it never serves less history than the
    /// version it replaces had), and once its lag is small enough.
    pub target_offsets: Vec<u64>,
}

/// A replaced version still readable (`?version=`) for a while.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraceEntry {
    /// The version.
    #[serde(flatten)]
    pub entry: VersionEntry,
    /// When it stops being readable and its state is dropped (ms).
    pub readable_until_ms: i64,
}

/// Why a version stopped.
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
            if let Some(j) = &v.plan.join {
                topics.push(j.table_topic.clone());
            }
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

    /// Reads the catalog at `path`; an absent file is an empty catalog.
    pub fn load(path: &Path) -> Result<Catalog, String> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Catalog::default()),
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        let catalog: Catalog = serde_json::from_slice(&bytes)
            .map_err(|e| format!("catalog {} is not valid: {e}", path.display()))?;
        if catalog.format != CATALOG_FORMAT {
            return Err(format!(
                "catalog {} has format {}, this server reads format {CATALOG_FORMAT}",
                path.display(),
                catalog.format
            ));
        }
        Ok(catalog)
    }

    /// Replaces the file at `path` atomically with this catalog.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let json = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        kappa_log::io::write_atomic(path, &json)
            .map_err(|e| format!("writing the catalog {}: {e}", path.display()))
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
            }),
            grace: Vec::new(),
            served,
            failure: None,
            next_version: 3,
            created_ms: 5,
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

    #[test]
    fn versions_lists_served_building_and_grace() {
        let e = entry();
        let numbers: Vec<u64> = e.versions().map(|v| v.version).collect();
        assert_eq!(numbers, vec![1, 2]);
        assert_eq!(e.latest().version, 2);
        assert_eq!(e.input_topics(), vec!["t".to_string()]);
    }
}
