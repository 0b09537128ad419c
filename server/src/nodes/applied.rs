//! `<data>/cluster.json`: the Kappa cluster this data directory belongs to
//! and how far its node has run the control topic's statements.
//!
//! ```json
//! {"format": 1, "cluster_id": "prod", "applied": 42}
//! ```
//!
//! `applied` is the offset after the last statement record run here: a
//! restart runs the statements from there on (the other records are read
//! from the start every time). The file is replaced atomically after each
//! statement; a crash between running a statement and recording it runs
//! that one statement again, which then fails harmlessly (`already
//! exists`) or changes nothing. A data directory of another cluster id is
//! refused; a damaged file is moved aside (`cluster.json.damaged-<ms>`)
//! and the statements are run again from the start, each again failing
//! harmlessly or changing nothing.

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// The file's name in the data directory.
pub const FILE: &str = "cluster.json";

/// Version of the file's format.
pub const FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    format: u32,
    cluster_id: String,
    applied: u64,
}

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The file, `None` when missing; a damaged one is moved aside first.
fn read(data_dir: &Path) -> anyhow::Result<Option<Stored>> {
    let file = path(data_dir);
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("reading {}: {e}", file.display()),
    };
    match serde_json::from_slice::<Stored>(&bytes) {
        Ok(stored) if stored.format == FORMAT => Ok(Some(stored)),
        Ok(stored) => bail!(
            "{} has format {}; this server reads format {FORMAT}",
            file.display(),
            stored.format
        ),
        Err(e) => {
            let aside = data_dir.join(format!("{FILE}.damaged-{}", kappa_log::now_ms()));
            std::fs::rename(&file, &aside)?;
            tracing::warn!(file = %file.display(), kept = %aside.display(), error = %e, "damaged; the control topic's statements run again from the start");
            Ok(None)
        }
    }
}

/// Refuses a data directory that belongs to another cluster id.
pub fn check_cluster_id(data_dir: &Path, cluster_id: &str) -> anyhow::Result<()> {
    match read(data_dir)? {
        Some(stored) if stored.cluster_id != cluster_id => bail!(
            "{} says this data directory belongs to Kappa cluster {:?}, not {cluster_id:?}",
            path(data_dir).display(),
            stored.cluster_id
        ),
        _ => Ok(()),
    }
}

/// The offset after the last statement run here (0: none).
pub fn load(data_dir: &Path) -> anyhow::Result<u64> {
    Ok(read(data_dir)?.map_or(0, |s| s.applied))
}

/// Records that the statements before `applied` ran here.
pub fn save(data_dir: &Path, cluster_id: &str, applied: u64) -> anyhow::Result<()> {
    let stored = Stored {
        format: FORMAT,
        cluster_id: cluster_id.to_string(),
        applied,
    };
    let bytes = serde_json::to_vec(&stored)?;
    kappa_log::io::write_atomic(&path(data_dir), &bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_offset_and_refuses_another_cluster() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), 0);
        save(dir.path(), "prod", 42).unwrap();
        assert_eq!(load(dir.path()).unwrap(), 42);
        check_cluster_id(dir.path(), "prod").unwrap();
        let e = check_cluster_id(dir.path(), "staging").unwrap_err();
        assert!(e.to_string().contains("\"prod\""), "{e}");
    }

    #[test]
    fn a_damaged_file_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert_eq!(load(dir.path()).unwrap(), 0);
        let kept: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            kept.iter().any(|n| n.starts_with("cluster.json.damaged-")),
            "{kept:?}"
        );
    }
}
