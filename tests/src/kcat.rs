//! kcat, the command-line Kafka client of the protocol tests:
//! `$KAPPA_TEST_KCAT`, else the one on the PATH (`.ci/run` installs
//! Debian's).

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs kcat with `args`, feeding `input` on stdin (from a thread, so a
/// large input cannot block against kcat's output); answers its output.
/// Panics, saying how to install it, when kcat does not run.
pub fn kcat_output(args: &[&str], input: &[u8]) -> Output {
    let path = std::env::var("KAPPA_TEST_KCAT").unwrap_or_else(|_| "kcat".into());
    let mut child = Command::new(&path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("kcat ({path}) does not run: {e}; `.ci/run` installs it"));
    let mut stdin = child.stdin.take().expect("kcat's stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("kcat ran");
    writer.join().expect("kcat's input written");
    out
}

/// Runs kcat like [`kcat_output`]: whether it succeeded, and its stdout
/// followed by its stderr.
pub fn kcat(args: &[&str], input: &str) -> (bool, String) {
    let out = kcat_output(args, input.as_bytes());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// kcat's options for a SASL/PLAIN login as `someone` with `password` to
/// `broker` over `protocol` (`SASL_PLAINTEXT` or `SASL_SSL`), with a
/// bounded wait for brokers so a refused login fails fast.
pub fn sasl_args(broker: &str, protocol: &str, password: &str) -> Vec<String> {
    [
        "-b",
        broker,
        "-X",
        &format!("security.protocol={protocol}"),
        "-X",
        "sasl.mechanisms=PLAIN",
        "-X",
        "sasl.username=someone",
        "-X",
        &format!("sasl.password={password}"),
        "-m",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}
