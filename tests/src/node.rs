//! Node.js and the KafkaJS client of the Kafka client test
//! (`tests/kafka/kafkajs_roundtrip.js`), installed by `.ci/run` with npm in
//! a directory outside the repo.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `node_modules` directory that holds `kafkajs`:
/// `$KAPPA_TEST_NODE_MODULES` if set, else
/// `$HOME/.cache/kappa-node/node_modules`. Panics, saying how to install
/// it, when `node` or the module is missing (checked once per process).
pub fn kafkajs_modules() -> &'static Path {
    static MODULES: OnceLock<PathBuf> = OnceLock::new();
    MODULES.get_or_init(find_kafkajs)
}

fn find_kafkajs() -> PathBuf {
    let modules = match std::env::var_os("KAPPA_TEST_NODE_MODULES") {
        Some(p) => PathBuf::from(p),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is set");
            PathBuf::from(home).join(".cache/kappa-node/node_modules")
        }
    };
    let probe = Command::new("node")
        .arg("-e")
        .arg("require(require('path').join(process.argv[1], 'kafkajs'))")
        .arg(&modules)
        .output();
    match probe {
        Ok(out) if out.status.success() => modules,
        other => panic!(
            "node cannot load kafkajs from {} ({}): `.ci/run` installs it \
             (npm install --prefix $HOME/.cache/kappa-node kafkajs@2.2.4), \
             or set KAPPA_TEST_NODE_MODULES to a node_modules that has it",
            modules.display(),
            match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                Err(e) => e.to_string(),
            }
        ),
    }
}
