//! The binaries under test: finding `target/<profile>/kappa` (or any
//! workspace binary) next to the running test executable and building it,
//! once per test process, when it is missing or older than its sources;
//! running the `kappa` client against a server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::*;

/// Runs the `kappa` client against `server` with `args` (no `KAPPA_URL`
/// from the environment); asserts it succeeded.
pub fn run_cli(server: &Server, args: &[&str]) -> std::process::Output {
    let output = std::process::Command::new(kappa_bin())
        .arg("--url")
        .arg(server.url())
        .args(args)
        .env_remove("KAPPA_URL")
        .output()
        .expect("run the kappa client");
    assert!(
        output.status.success(),
        "kappa {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Path of the `kappa` binary under test (`$KAPPA_BIN` if set).
pub fn kappa_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("KAPPA_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => workspace_bin("kappa-server", "kappa", KAPPA_SOURCES),
    })
}

/// Path of the `kappa-inspect` binary (the offline inspector and repair
/// tool of `tools/`), built when missing or older than its sources.
pub fn inspect_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        workspace_bin(
            "kappa-tools",
            "kappa-inspect",
            &["tools/src", "tools/Cargo.toml", "log/src", "log/Cargo.toml"],
        )
    })
}

/// Path of the `kappa-datagen` binary (the event generators of `tools/`),
/// built when missing or older than its sources.
pub fn datagen_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| workspace_bin("kappa-tools", "kappa-datagen", TOOLS_SOURCES))
}

/// What the `kappa-tools` binaries that read SQL or events (`kappa-datagen`,
/// `kappa-bench`) are built from.
pub const TOOLS_SOURCES: &[&str] = &[
    "tools/src",
    "tools/Cargo.toml",
    "log/src",
    "log/Cargo.toml",
    "processor/src",
    "processor/Cargo.toml",
];

/// What `kappa` is built from (workspace-relative directories and files).
const KAPPA_SOURCES: &[&str] = &[
    "server/src",
    "server/Cargo.toml",
    "log/src",
    "log/Cargo.toml",
    "processor/src",
    "processor/Cargo.toml",
    "server/wire/src",
    "server/wire/Cargo.toml",
    "server/cluster/src",
    "server/cluster/Cargo.toml",
];

/// The workspace root, from `CARGO_MANIFEST_DIR` as set when the test runs
/// (`cargo test` sets it); the compile-time value can be stale when cargo
/// reuses a test binary built from an identical checkout at another path.
pub fn workspace_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// Path of binary `bin` of workspace package `package` in
/// `target/<profile>/` next to the running test executable, built first
/// when it is missing or older than any of `sources` (workspace-relative
/// directories and files). Callers cache the answer (a `OnceLock`) so it
/// builds once per process.
pub fn workspace_bin(package: &str, bin: &str, sources: &[&str]) -> PathBuf {
    // The test executable is …/target/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable is in target/<profile>/deps")
        .to_path_buf();
    let path = profile_dir.join(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    if needs_build(&path, sources) {
        build(&profile_dir, package, bin);
        // Cargo relinks a binary only when its inputs changed; a newer
        // test-only source would otherwise ask for a build in every process.
        mark_current(&path);
    }
    assert!(
        path.is_file(),
        "{} does not exist after building it",
        path.display()
    );
    path
}

/// True if `bin` is missing or older than a file under `sources`
/// (`cargo test -p kappa-tests` does not rebuild binaries by itself).
fn needs_build(bin: &Path, sources: &[&str]) -> bool {
    let Ok(built) = bin.metadata().and_then(|m| m.modified()) else {
        return true;
    };
    let root = workspace_root();
    let mut stack: Vec<PathBuf> = sources.iter().map(|s| root.join(s)).collect();
    // Bounded walk: these trees hold a few hundred files at most.
    let mut visited = 0;
    while let Some(path) = stack.pop() {
        visited += 1;
        if visited > 100_000 {
            break;
        }
        let Ok(meta) = path.metadata() else { continue };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        } else if meta.modified().is_ok_and(|m| m > built) {
            return true;
        }
    }
    false
}

/// Builds the workspace's binaries with the same package and feature
/// selection as `cargo test --workspace` (debug) or `cargo build
/// --workspace` (other profiles). A narrower selection (`-p package`)
/// resolves features differently and rebuilds RocksDB from source, which
/// takes over ten minutes on a small machine.
fn build(profile_dir: &Path, package: &str, bin: &str) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root());
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {
            cmd.args(["test", "--workspace", "--no-run"]);
        }
        Some("release") => {
            cmd.args(["build", "--workspace", "--bins", "--release"]);
        }
        Some(other) => {
            cmd.args(["build", "--workspace", "--bins", "--profile", other]);
        }
    }
    if let Some(target_dir) = profile_dir.parent() {
        cmd.arg("--target-dir").arg(target_dir);
    }
    let output = cmd.output().expect("running cargo build");
    assert!(
        output.status.success(),
        "building {package}'s {bin} ({cmd:?}) failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Sets `bin`'s modification time to now (it is current as cargo sees it).
fn mark_current(bin: &Path) {
    if let Ok(file) = std::fs::File::options().write(true).open(bin) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
}
