//! `kappa demo`: started on port 0 with a temporary data directory, it
//! prints `listening on ADDR` first (as `kappa serve` does), defines the
//! brief's stream, table and derived stream, and produces events, so that
//! `purchase_stats` has rows within a bounded time; SIGTERM stops it with
//! exit status 0 and the data directory given is kept.
//!
//! Synchronization: the test long-polls the input topic for new records and
//! reads the view with `after=` (read-your-writes) — no sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kappa_tests::{kappa_bin, Client, STARTUP_TIMEOUT};

const DEADLINE: Duration = Duration::from_secs(90);
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The demo process; killed if the test fails before stopping it.
struct Demo {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Demo {
    fn start(data_dir: &std::path::Path) -> (Demo, SocketAddr) {
        let mut child = Command::new(kappa_bin())
            .args([
                "demo",
                "--addr",
                "127.0.0.1:0",
                "--rate",
                "200",
                "--data-dir",
            ])
            .arg(data_dir)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning kappa demo");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let demo = Demo {
            child: Some(child),
            lines,
        };
        let first = demo.lines.recv_timeout(STARTUP_TIMEOUT);
        let addr = first
            .as_deref()
            .ok()
            .and_then(|l| l.strip_prefix("listening on "))
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| {
                panic!("kappa demo did not print `listening on ADDR` first: {first:?}")
            });
        (demo, addr)
    }

    /// SIGTERM by the child's own PID; waits (bounded) for the exit.
    fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the demo is running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) on our own unreaped child: its PID cannot be reused.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let status = child.wait();
            let _ = tx.send(());
            status
        });
        if rx.recv_timeout(EXIT_TIMEOUT).is_err() {
            // SAFETY: as above; the waiter has not reaped it (no answer yet).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("kappa demo did not exit within {EXIT_TIMEOUT:?} of SIGTERM");
        }
        waiter
            .join()
            .expect("waiter thread")
            .expect("waiting for the demo")
    }
}

#[test]
fn the_demo_fills_purchase_stats_and_stops_on_sigterm() {
    let data = tempfile::Builder::new()
        .prefix("kappa-e2e-demo-")
        .tempdir()
        .unwrap();
    let (mut demo, addr) = Demo::start(data.path());
    let client = Client::new(format!("http://{addr}"));
    let started = Instant::now();
    let mut next = 0;
    let rows = loop {
        assert!(
            started.elapsed() < DEADLINE,
            "purchase_stats had no rows within {DEADLINE:?}"
        );
        // Waits (server side) for records past `next` on partition 0.
        let (status, read) = client.get(&format!(
            "/v1/topics/user_events/partitions/0/records?offset={next}&max_wait_ms=5000"
        ));
        if status == 404 {
            // The demo has not declared user_events yet: wait for its guide,
            // printed once everything is defined.
            let line = demo.lines.recv_timeout(DEADLINE).expect("the demo's guide");
            assert!(!line.contains("error"), "{line}");
            continue;
        }
        assert_eq!(status, 200, "{read}");
        let last = read["records"]
            .as_array()
            .and_then(|r| r.last())
            .and_then(|r| r["offset"].as_u64());
        let Some(last) = last else { continue };
        next = last + 1;
        let (status, rows) = client.get(&format!(
            "/v1/views/purchase_stats/rows?after=0:{last}&max_wait_ms=10000"
        ));
        assert_eq!(status, 200, "{rows}");
        if rows["rows"].as_array().is_some_and(|r| !r.is_empty()) {
            break rows;
        }
    };
    let row = &rows["rows"][0];
    assert!(row["key"].as_str().unwrap().starts_with("user-"), "{rows}");
    assert!(
        row["row"]["purchase_count"].as_u64().unwrap() >= 1,
        "{rows}"
    );
    assert!(row["window_end"].as_i64().unwrap() - row["window_start"].as_i64().unwrap() == 300_000);

    let (status, alerts) = client.get("/v1/views/high_value_alerts");
    assert_eq!(status, 200, "{alerts}");
    assert_eq!(alerts["output_topic"], "high_value_alerts");

    let status = demo.terminate();
    assert!(status.success(), "kappa demo exited with {status}");
    assert!(
        data.path().join("catalog.json").is_file(),
        "the data directory given is kept"
    );
}
