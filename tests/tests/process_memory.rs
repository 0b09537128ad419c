//! The server opts its process out of transparent huge pages (each new
//! page of the allocator faulted in as a zeroed 2 MiB page cost a new
//! statement 40–55% of its time; BENCHMARKS.md, Nexmark), unless
//! `MIMALLOC_ALLOW_THP` is set, which then decides.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::Server;

/// The `THP_enabled` line of the process's `/proc/<pid>/status` (Linux
/// 5.0 and later print it).
fn thp_enabled(server: &Server) -> String {
    let pid = server.pid().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("THP_enabled:"))
        .unwrap_or_else(|| panic!("no THP_enabled in /proc/{pid}/status:\n{status}"))
        .trim()
        .to_string()
}

#[test]
fn the_server_runs_without_transparent_huge_pages() {
    let server = Server::start(&[]);
    assert_eq!(thp_enabled(&server), "0");
}

#[test]
fn mimalloc_allow_thp_decides_when_set() {
    let server = Server::start_env(&[], &[("MIMALLOC_ALLOW_THP", "1")]);
    assert_eq!(thp_enabled(&server), "1");
}
