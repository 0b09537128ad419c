//! README.md's "Five-minute walkthrough", run as written against a fresh
//! server, so that the README cannot drift from what the server does.
//!
//! The fenced ```` ```sh ```` blocks between the "Five-minute walkthrough"
//! heading and the next `## ` heading become one script, run with
//! `bash -e` (and `pipefail`). Every other README line becomes an empty
//! line, so a line number of the script is the README's line number. The
//! README's `localhost:8080` is replaced by the test server's address,
//! `KAPPA_URL` points the `kappa` client there, and the directory of the
//! `kappa` under test comes first on `PATH`.
//!
//! `curl` on the script's `PATH` is a wrapper of `/usr/bin/curl` adding
//! `--fail-with-body` (an HTTP error status fails the command, the README
//! still shows the body to a reader) and a 60 s time limit. A command that
//! sets its own `--max-time` (following a stream for a while) may end by
//! that limit. The first failing command stops the script; the test names
//! it with its README line.
//!
//! Synchronization is the README's own: its view read uses `after=`
//! (read-your-writes). No sleeps; the script as a whole is bounded by
//! `timeout`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::Path;
use std::process::Command;

use kappa_tests::{kappa_bin, workspace_root, Server};

/// The heading of the section the test runs.
const SECTION: &str = "## Five-minute walkthrough";
/// How the README addresses the server.
const README_ADDR: &str = "localhost:8080";
/// Longest run of the whole script (its long-polls and stream reads
/// included), seconds.
const SCRIPT_TIMEOUT_S: u32 = 300;
/// What the ERR trap prints before the failing line number and command.
const FAILED_MARK: &str = "walkthrough command failed: README.md line ";

/// The `curl` the script runs: HTTP errors fail, every call is bounded.
const CURL_WRAPPER: &str = r#"#!/bin/bash
# curl for the README walkthrough test: an HTTP error status fails the
# command (the body is still printed); every call is bounded in time; a
# command that gives its own --max-time may end by it (exit 28).
limited=false
for arg in "$@"; do
  case $arg in --max-time|--max-time=*|-m) limited=true ;; esac
done
/usr/bin/curl -S --fail-with-body --max-time 60 "$@"
rc=$?
if [ "$rc" = 28 ] && $limited; then exit 0; fi
exit "$rc"
"#;

/// The walkthrough's shell blocks as a script whose line N is README line
/// N (other lines empty), with `localhost:8080` replaced by `addr`; line 1
/// (the README's title) holds the preamble. Also answers how many blocks
/// were found.
fn walkthrough_script(readme: &str, addr: &str) -> (String, usize) {
    let mut lines: Vec<String> = Vec::new();
    let (mut in_section, mut in_block, mut blocks) = (false, false, 0);
    for line in readme.lines() {
        let mut kept = String::new();
        if line.starts_with("## ") {
            in_section = line.trim_end() == SECTION;
        } else if in_section && !in_block && line.trim_end() == "```sh" {
            in_block = true;
            blocks += 1;
        } else if in_block && line.trim_end() == "```" {
            in_block = false;
        } else if in_block {
            kept = line.replace(README_ADDR, addr);
        }
        lines.push(kept);
    }
    assert!(!in_block, "README.md: a ```sh block is not closed");
    assert!(
        lines.first().is_some_and(String::is_empty),
        "README.md must open with a line outside any block (the preamble goes there)"
    );
    lines[0] =
        format!("set -o pipefail; trap 'echo \"{FAILED_MARK}$LINENO: $BASH_COMMAND\" >&2' ERR");
    (lines.join("\n") + "\n", blocks)
}

/// The README text of the command starting at `line` (1-based), with its
/// continuation lines.
fn readme_command(readme: &str, line: usize) -> String {
    let mut out = Vec::new();
    for text in readme.lines().skip(line.saturating_sub(1)) {
        out.push(text);
        let t = text.trim_end();
        if !(t.ends_with('\\') || t.ends_with('|')) || out.len() >= 20 {
            break;
        }
    }
    out.join("\n")
}

/// Writes `text` to `dir/name`, executable when `exec`.
fn write_file(dir: &Path, name: &str, text: &str, exec: bool) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    if exec {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn readme_walkthrough_runs_as_written() {
    let readme_path = workspace_root().join("README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("reading README.md");
    let server = Server::start(&[]);
    let (script, blocks) = walkthrough_script(&readme, &server.addr().to_string());
    assert!(
        blocks > 0,
        "README.md has no ```sh block under {SECTION:?} (renamed?)"
    );

    let work = tempfile::Builder::new()
        .prefix("kappa-readme-")
        .tempdir()
        .unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    write_file(&bin, "curl", CURL_WRAPPER, true);
    write_file(work.path(), "walkthrough.sh", &script, false);
    let kappa_dir = kappa_bin().parent().expect("kappa is in a directory");
    let path = std::env::join_paths(
        [bin.as_path(), kappa_dir]
            .into_iter()
            .map(Path::to_path_buf)
            .chain(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            )),
    )
    .unwrap();

    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=10", &SCRIPT_TIMEOUT_S.to_string()])
        .args(["bash", "-e", "walkthrough.sh"])
        .current_dir(work.path())
        .env("PATH", path)
        .env("KAPPA_URL", server.url())
        .env("NO_COLOR", "1")
        .env_remove("KAPPA_TOKEN");
    let output = cmd.output().expect("running bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let failed = stderr.lines().find_map(|l| {
            let rest = l.strip_prefix(FAILED_MARK)?;
            let (line, command) = rest.split_once(": ")?;
            Some((line.parse::<usize>().ok()?, command.to_string()))
        });
        // The last 4,000 characters (JSON answers have no newlines).
        let tail = |s: &str| {
            let start = s.len().saturating_sub(4_000);
            let start = (start..s.len()).find(|&i| s.is_char_boundary(i));
            s[start.unwrap_or(s.len())..].to_string()
        };
        match failed {
            Some((line, command)) => panic!(
                "README.md line {line}: this walkthrough command failed ({}):\n{}\n\
                 (as run: {command})\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
                output.status,
                readme_command(&readme, line),
                tail(&stdout),
                tail(&stderr)
            ),
            None => panic!(
                "the walkthrough script failed ({}) without naming a command \
                 (timed out after {SCRIPT_TIMEOUT_S} s?)\n--- stdout (tail) ---\n{}\n\
                 --- stderr (tail) ---\n{}",
                output.status,
                tail(&stdout),
                tail(&stderr)
            ),
        }
    }

    // The walkthrough cleans up after itself: nothing it created is left.
    let (status, topics) = server.get("/v1/topics");
    assert_eq!(status, 200, "{topics}");
    assert_eq!(
        topics["topics"].as_array().map(Vec::len),
        Some(0),
        "the walkthrough leaves topics behind: {topics}"
    );
    let (status, views) = server.get("/v1/views");
    assert_eq!(status, 200, "{views}");
    assert_eq!(
        views["views"].as_array().map(Vec::len),
        Some(0),
        "the walkthrough leaves views behind: {views}"
    );
}

#[test]
fn walkthrough_script_keeps_readme_line_numbers() {
    let readme = "# T\n\n## Five-minute walkthrough\n\ntext\n```sh\ncurl -s localhost:8080/a \\\n  -d x\n```\n```\nnot sh\n```\n## Next\n```sh\nnot this\n```\n";
    let (script, blocks) = walkthrough_script(readme, "127.0.0.1:9");
    assert_eq!(blocks, 1);
    let lines: Vec<&str> = script.lines().collect();
    assert_eq!(lines.len(), readme.lines().count());
    assert!(lines[0].starts_with("set -o pipefail;"));
    assert_eq!(lines[6], "curl -s 127.0.0.1:9/a \\");
    assert_eq!(lines[7], "  -d x");
    assert!(lines[10].is_empty() && lines[14].is_empty());
    assert_eq!(
        readme_command(readme, 7),
        "curl -s localhost:8080/a \\\n  -d x"
    );
}
