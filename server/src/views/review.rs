//! Reviewing a new version before it serves and undoing it after:
//! `diff` compares two live versions row by row, `promote` swaps in a
//! build that waits for approval (`SWAP='MANUAL'`), `rollback` serves the
//! previous version again while it is kept in grace.
//!
//! Neither makes served rows step backwards: the version that takes over
//! must have processed at least every input offset the served one has
//! (both keep following the input, so a version that is behind catches up
//! within moments; the answer says which partitions are behind).

use std::collections::HashMap;

use kappa_processor::host::{RunningVersion, Scope};

use super::catalog::{Catalog, VersionEntry};
use super::manager::{lock, scope, ViewManager};
use super::{Result, ViewError};

/// What a promote or rollback did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// The version now served.
    pub served: u64,
    /// The version that was served (kept in grace, readable and available
    /// to roll back to, unless `view_grace_ms` is 0).
    pub previous: u64,
}

/// Most examples one diff answers with.
pub const MAX_DIFF_EXAMPLES: usize = 1_000;

impl ViewManager {
    /// Compares live versions `candidate` (default: the one being built)
    /// and `base` (default: the served one) of table `name`, as of their
    /// committed positions, with the first `examples` differences.
    pub fn diff(
        &self,
        name: &str,
        base: Option<u64>,
        candidate: Option<u64>,
        examples: usize,
    ) -> Result<(u64, u64, kappa_processor::diff::Diff)> {
        let catalog = self.catalog();
        let view = table(&catalog, name)?;
        let base = base.unwrap_or(view.served.version);
        let candidate = match candidate.or(view.building.as_ref().map(|b| b.entry.version)) {
            Some(c) => c,
            None => {
                return Err(ViewError::BadRequest(format!(
                    "view {name:?} has no version being built: name the candidate (?candidate=n)"
                )))
            }
        };
        let mut readers = Vec::new();
        for version in [base, candidate] {
            let entry = view.version(version).ok_or(ViewError::UnknownVersion {
                view: name.to_string(),
                version,
            })?;
            let s = scope(name, entry.version);
            let reader = self.host.reader(&s).ok_or(ViewError::Unavailable {
                view: name.to_string(),
                version,
            })?;
            readers.push(reader);
        }
        let partitions = self.partitions(&view.served.plan);
        let diff = readers[0].diff(&readers[1], partitions, examples.min(MAX_DIFF_EXAMPLES))?;
        Ok((base, candidate, diff))
    }

    /// Swaps in the version being built for `name` now (a manual build
    /// waiting in `ready`, or an automatic one that has caught up).
    pub fn promote(&self, name: &str) -> Result<Served> {
        let _ops = lock(&self.ops);
        let mut catalog = self.catalog();
        let view = table(&catalog, name)?;
        let build = view.building.clone().ok_or_else(|| ViewError::Refused {
            code: "nothing_to_promote",
            message: format!("view {name:?} has no version being built to promote"),
        })?;
        self.check_not_behind(name, &view.served, &build.entry)?;
        let view = catalog.views.get_mut(name).expect("checked");
        view.building = None;
        view.failure = None;
        self.serve_now(catalog, name, build.entry, "promoted")
    }

    /// Swaps in version `version` of `name` as a Kappa cluster decided
    /// (every node's partitions of it caught up): done when it is still
    /// the one being built, nothing otherwise (another node's request for
    /// the same swap, read after it).
    pub fn promote_as_decided(&self, name: &str, version: u64) -> Result<Option<Served>> {
        let _ops = lock(&self.ops);
        let mut catalog = self.catalog();
        let view = table(&catalog, name)?;
        if view.building.as_ref().map(|b| b.entry.version) != Some(version) {
            return Ok(None);
        }
        let view = catalog.views.get_mut(name).expect("checked");
        let build = view.building.take().expect("checked");
        view.failure = None;
        lock(&self.state).spread_ready.remove(&scope(name, version));
        self.serve_now(catalog, name, build.entry, "swapped in on every node")
            .map(Some)
    }

    /// Serves the most recently replaced version of `name` again; the
    /// served one is kept in grace like any replaced version.
    pub fn rollback(&self, name: &str) -> Result<Served> {
        self.roll_back(name, true)
    }

    /// [`ViewManager::rollback`] as a Kappa cluster decided: every node
    /// rolls back, whatever its partitions' positions.
    pub fn rollback_as_decided(&self, name: &str) -> Result<Served> {
        self.roll_back(name, false)
    }

    fn roll_back(&self, name: &str, check: bool) -> Result<Served> {
        let _ops = lock(&self.ops);
        let mut catalog = self.catalog();
        let view = table(&catalog, name)?;
        let Some(previous) = view.grace.last().map(|g| g.entry.clone()) else {
            let keeping = self.keeping(view);
            return Err(ViewError::Refused {
                code: "nothing_to_roll_back",
                message: format!(
                    "view {name:?} keeps no previous version (it keeps {} replaced version(s) for {} ms: KEEP_VERSIONS and VERSION_GRACE on the view, view_keep_versions and view_grace_ms on the server)",
                    keeping.versions, keeping.grace_ms
                ),
            });
        };
        if check {
            self.check_not_behind(name, &view.served, &previous)?;
        }
        let view = catalog.views.get_mut(name).expect("checked");
        view.grace.pop();
        view.failure = None;
        self.serve_now(catalog, name, previous, "rolled back")
    }

    /// Serves `entry` in place of the served version, persists, wakes the
    /// supervisor (and drops the old version at once without grace).
    fn serve_now(
        &self,
        mut catalog: Catalog,
        name: &str,
        entry: VersionEntry,
        what: &str,
    ) -> Result<Served> {
        let served = entry.version;
        let view = catalog.views.get_mut(name).expect("checked");
        let previous = view.served.version;
        let keeping = self.keeping(view);
        let dropped = view.serve(entry, keeping, kappa_log::now_ms());
        self.save(&catalog)?;
        self.install(catalog, Vec::new());
        let dropped: Vec<Scope> = dropped.iter().map(|old| scope(name, old.version)).collect();
        if !dropped.is_empty() {
            self.retire(dropped);
        }
        lock(&self.state).retries.remove(name);
        crate::metrics::count_view_swap(name);
        crate::metrics::set_view_build(name, 0, 0);
        tracing::info!(view = name, from = previous, to = served, "{what}");
        Ok(Served { served, previous })
    }

    /// Refuses when `next` has processed less input than `served` on any
    /// partition, or is not running.
    fn check_not_behind(
        &self,
        name: &str,
        served: &VersionEntry,
        next: &VersionEntry,
    ) -> Result<()> {
        let st = lock(&self.state);
        let (served_scope, next_scope) = (scope(name, served.version), scope(name, next.version));
        if committed(&st.running, &next_scope).is_none() {
            return Err(ViewError::Refused {
                code: "not_running",
                message: format!(
                    "version {} of {name:?} is not running: it cannot serve",
                    next.version
                ),
            });
        }
        let behind: Vec<String> = behind(&st.running, &served_scope, &next_scope)
            .into_iter()
            .map(|(p, n, s)| format!("partition {p}: {n} < {s}"))
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        Err(ViewError::Refused {
            code: "not_caught_up",
            message: format!(
                "version {} of {name:?} has processed less input than the served version {} ({}): serving it would step rows backwards; try again once it caught up",
                next.version,
                served.version,
                behind.join(", ")
            ),
        })
    }
}

/// The committed offsets of running version `s` (`None` if it is not running).
fn committed(running: &HashMap<Scope, RunningVersion>, s: &Scope) -> Option<Vec<u64>> {
    running
        .get(s)
        .filter(|p| !p.is_finished())
        .map(|p| p.progress().committed_offsets)
}

/// The partitions where version `next` has committed less input than the
/// served version: `(partition, next's offset, served's offset)`. None when
/// either is not running (a served version that is down has nothing newer
/// to protect).
pub(super) fn behind(
    running: &HashMap<Scope, RunningVersion>,
    served: &Scope,
    next: &Scope,
) -> Vec<(usize, u64, u64)> {
    let (Some(s), Some(n)) = (committed(running, served), committed(running, next)) else {
        return Vec::new();
    };
    // Versions spread over nodes: the partitions both run here.
    let owned = |scope: &Scope| {
        running
            .get(scope)
            .and_then(|p| p.as_spread())
            .map(|spread| spread.owned())
    };
    let compared = |p: usize| match (owned(served), owned(next)) {
        (Some(a), Some(b)) => a.contains(&(p as u32)) && b.contains(&(p as u32)),
        _ => true,
    };
    s.iter()
        .enumerate()
        .filter(|(p, _)| compared(*p))
        .filter_map(|(p, &s)| {
            let n = n.get(p).copied().unwrap_or(0);
            (n < s).then_some((p, n, s))
        })
        .collect()
}

/// The catalog entry of table `name` (streams have no versions to review:
/// a new version takes over at once).
fn table<'a>(catalog: &'a Catalog, name: &str) -> Result<&'a super::catalog::ViewEntry> {
    let view = catalog
        .views
        .get(name)
        .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
    if !view.is_table() {
        return Err(ViewError::NotATable(name.to_string()));
    }
    Ok(view)
}
