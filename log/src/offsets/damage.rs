//! What a start does with an offsets file it finds missing, empty,
//! unreadable or damaged (the module invariants of [`super`]): the
//! refusals, each naming the file and the recovery (which depends on what
//! `offsets.log.bak` can still restore), and the copy of the file kept
//! aside as `offsets.log.damaged-<ms>` before a start changes it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::state::{replay, Replayed};
use super::store::{write_new_file, FILE_NAME};
use crate::error::{LogError, Result};
use crate::io::{sync_dir, FaultInjector};

/// The refusal to start empty when `offsets.log` is gone but its backup is not.
pub(super) fn missing_beside_backup(path: PathBuf, backup: &Path) -> LogError {
    LogError::Metadata {
        problem: "missing, but its last good copy offsets.log.bak is here: \
                  starting would forget every consumer group's committed offsets"
            .into(),
        recovery: format!(
            "stop the server and restore the copy (`cp {} {}`); or, to start \
             with no committed offsets, move {} elsewhere",
            backup.display(),
            path.display(),
            backup.display()
        ),
        path,
    }
}

/// What `offsets.log.bak` can do for a refused start.
enum Backup {
    /// There is none.
    Missing,
    /// It cannot restore any commit: why ("is empty", "is damaged", …).
    Unusable(&'static str),
    /// A whole, valid copy holding the offsets of this many groups (≥ 1).
    Good(usize),
}

/// Classifies `offsets.log.bak` for a refusal's recovery.
fn backup_state(backup: &Path) -> Backup {
    let data = match fs::read(backup) {
        Ok(data) => data,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Backup::Missing,
        Err(_) => return Backup::Unusable("is unreadable"),
    };
    if data.is_empty() {
        return Backup::Unusable("is empty");
    }
    match replay(backup, &data) {
        Ok(r) if r.skipped_frames > 0 || r.bad_tail.is_some() => Backup::Unusable("is damaged"),
        Ok(r) if r.state.groups.is_empty() => Backup::Unusable("holds no committed offset"),
        Ok(r) => Backup::Good(r.state.groups.len()),
        Err(_) => Backup::Unusable("is damaged"),
    }
}

/// The recovery named when `path` cannot be replayed at all: restore the
/// backup if it is good (after `keep`, a command keeping the damaged file
/// aside, if any), or start with no committed offsets.
fn whole_file_recovery(path: &Path, backup: &Path, keep: Option<String>) -> String {
    let (p, b) = (path.display(), backup.display());
    let keep_then = keep.as_ref().map_or(String::new(), |k| format!("{k} && "));
    let state = backup_state(backup);
    let no_offsets = match (&keep, &state) {
        (_, Backup::Missing) => format!("move {p} elsewhere"),
        (None, _) => format!("move {p} and {b} elsewhere"),
        (Some(k), _) => format!("keep the damaged file aside (`{k}`) and move {b} elsewhere"),
    };
    match state {
        Backup::Good(groups) => format!(
            "stop the server and restore the last good copy, which holds the offsets of \
             {groups} consumer group{} as of the last start (`{keep_then}cp {b} {p}`); or, to \
             start with no committed offsets, {no_offsets}",
            if groups == 1 { "" } else { "s" }
        ),
        Backup::Unusable(why) => format!(
            "restore {p} from a backup of the data directory (its last good copy {b} \
             {why}); or, to start with no committed offsets, {no_offsets}"
        ),
        Backup::Missing => format!(
            "restore {p} from a backup of the data directory; or, to start with no committed \
             offsets, {no_offsets}"
        ),
    }
}

/// The refusal to start when `offsets.log` is empty: every file this
/// version writes opens with its start frame, so it was cut or replaced.
pub(super) fn empty_file(path: PathBuf, backup: &Path) -> LogError {
    LogError::Metadata {
        problem: "empty (0 bytes), but every offsets file opens with a start frame: the file \
                  was cut or replaced, and starting would forget every consumer group's \
                  committed offsets"
            .into(),
        recovery: whole_file_recovery(&path, backup, None),
        path,
    }
}

/// The refusal to start when `offsets.log` holds bytes but no valid frame.
pub(super) fn no_valid_frame(
    path: PathBuf,
    backup: &Path,
    data: &[u8],
    replayed: &Replayed,
) -> LogError {
    let why = replayed
        .bad_tail
        .as_ref()
        .map_or(String::new(), |(_, why)| format!(" (at byte 0: {why})"));
    let keep = format!(
        "mv {} {}.damaged-{}",
        path.display(),
        path.display(),
        crate::now_ms()
    );
    LogError::Metadata {
        problem: format!(
            "holds {} bytes but not one valid frame{why}: it is no longer an offsets file, and \
             starting would forget every consumer group's committed offsets",
            data.len()
        ),
        recovery: whole_file_recovery(&path, backup, Some(keep)),
        path,
    }
}

/// `offsets.log.damaged-<ms>` in `dir`, or, if that name is taken,
/// `offsets.log.damaged-<ms>.<n>` with the first free `n`: a copy kept
/// aside never replaces another.
pub(super) fn aside_path(dir: &Path, ms: i64) -> PathBuf {
    let mut aside = dir.join(format!("{FILE_NAME}.damaged-{ms}"));
    let mut n = 0;
    while aside.exists() {
        n += 1;
        aside = dir.join(format!("{FILE_NAME}.damaged-{ms}.{n}"));
    }
    aside
}

/// Keeps `data`, the file as it was, beside it ([`aside_path`]) before
/// the start changes the file: a new file, fdatasynced, and the directory
/// fsynced, so the copy is durable before the change is. Returns its path.
pub(super) fn keep_aside(
    dir: &Path,
    data: &[u8],
    faults: Option<&FaultInjector>,
) -> Result<PathBuf> {
    let aside = aside_path(dir, crate::now_ms());
    write_new_file(&aside, data, faults)?;
    sync_dir(dir)?;
    Ok(aside)
}

/// Logs what the start does with a damaged file it kept aside in `aside`.
pub(super) fn report_kept(path: &Path, aside: &Path, replayed: &Replayed, len: u64) {
    if replayed.skipped_frames > 0 {
        tracing::error!(
            path = %path.display(),
            kept_in = %aside.display(),
            skipped_frames = replayed.skipped_frames,
            "the offsets file had damaged frames in the middle: skipped them (their commits are lost; the groups re-read from their earlier offsets), kept the damaged file aside and rewrote it"
        );
        crate::stats::global()
            .corruptions_detected
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some((position, problem)) = &replayed.bad_tail {
        // The write a crash interrupted (never acknowledged), or a damaged
        // last frame: the two look alike.
        tracing::warn!(
            path = %path.display(),
            kept_in = %aside.display(),
            position,
            cut_bytes = len - position,
            problem = %problem,
            "cut a torn or damaged final frame off the offsets file (the write a crash interrupted, never acknowledged); kept the file as it was aside"
        );
    }
}
