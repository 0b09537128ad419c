//! The Python interpreter of the Kafka client tests (`tests/kafka/*.py`
//! run with confluent-kafka and kafka-python from a venv outside the repo,
//! which `.ci/run` installs), and the paths of those scripts.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::*;

/// The venv's Python: `$KAPPA_TEST_PYTHON` if set, else
/// `$HOME/.cache/kappa-kafka-venv/bin/python`. Panics, saying how to
/// install it, when it is missing or lacks the Kafka client packages
/// (checked once per test process).
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(find_python)
}

fn find_python() -> PathBuf {
    let path = match std::env::var_os("KAPPA_TEST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is set");
            PathBuf::from(home).join(".cache/kappa-kafka-venv/bin/python")
        }
    };
    let probe = std::process::Command::new(&path)
        .args(["-c", "import confluent_kafka, kafka"])
        .output();
    match probe {
        Ok(out) if out.status.success() => path,
        other => panic!(
            "{} cannot run the Kafka client tests ({}): `.ci/run` installs the venv \
             (python3 -m venv $HOME/.cache/kappa-kafka-venv && \
             $HOME/.cache/kappa-kafka-venv/bin/pip install confluent-kafka kafka-python), \
             or set KAPPA_TEST_PYTHON to a Python that has both",
            path.display(),
            match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                Err(e) => e.to_string(),
            }
        ),
    }
}

/// Path of the client script `tests/kafka/{name}`.
pub fn kafka_script(name: &str) -> PathBuf {
    workspace_root().join("tests/kafka").join(name)
}

/// Runs `script` with the venv's Python and answers what it printed;
/// panics with `what` and its stderr when it fails.
pub fn run_python(script: &str, what: &str) -> Vec<u8> {
    let out = std::process::Command::new(python())
        .args(["-c", script])
        .output()
        .expect("running the venv's python");
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
