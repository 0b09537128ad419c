//! Small utilities: the wall clock, a seeded PRNG, temporary files.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// A tiny deterministic PRNG (SplitMix64), so runs are reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Writes `contents` to a new file `name` in a fresh temporary directory
/// (returned so it lives as long as the caller needs the file).
pub fn temp_file(name: &str, contents: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("kappa-e2e-conf-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join(name);
    std::fs::write(&path, contents).expect("writing a temp file");
    (dir, path)
}

/// Runs `command` (a client script) to its end and returns the one JSON
/// line it printed on stdout. Panics with its stderr if it fails, prints
/// no JSON, or has not ended within `timeout` (it is then killed by its
/// PID).
pub fn run_for_json(
    mut command: std::process::Command,
    timeout: std::time::Duration,
) -> serde_json::Value {
    use std::process::Stdio;
    let what = format!("{command:?}");
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} does not run: {e}"));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(timeout) {
        Ok(output) => output.expect("the client's output"),
        Err(_) => {
            // SAFETY: kill(2) on the PID of the child started here, which
            // has not been reaped (the waiting thread still holds it).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{what} did not end within {timeout:?}");
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{what} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        let start: String = stdout.chars().take(500).collect();
        panic!("{what} printed no JSON line ({e}): {start}…")
    })
}
