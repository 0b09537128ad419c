//! Harness of the end-to-end tests: every test in `tests/tests/*.rs` starts
//! the real `kappa` binary and talks to it over HTTP.
//!
//! - [`kappa_bin`] finds `target/<profile>/kappa` next to the running test
//!   executable, and builds it (once per test process) when it is missing or
//!   older than the sources of `server/`, `log/` and `processor/`;
//!   [`workspace_bin`] does the same for any binary of the workspace.
//! - [`Server`] runs one `kappa serve` on a fresh (or given) data directory
//!   and a port chosen by the OS, learns the address from the one line the
//!   server prints on stdout, and stops it with SIGTERM, SIGINT or SIGKILL
//!   (always by the child's own PID). Dropping it kills a child that is
//!   still running; if the test is panicking, the server's stderr is printed.
//! - [`Client`] is a small blocking HTTP client (ureq) whose helpers answer
//!   `(status, json)` and never panic on 4xx/5xx, plus asserting helpers
//!   for topics, SQL statements and view reads ([`after_param`] builds a
//!   read-your-writes `after=`).
//! - [`RawConnection`] sends bytes exactly as given, for request targets a
//!   URL library would normalize (`/v1/topics/../records`, `%2e%2e`).
//!
//! Nothing here sleeps to synchronize: the server start waits for the
//! stdout line, process exits are awaited through a pidfd, and every wait
//! is bounded in time. [`eventually`] polls, for tests that wait on state
//! the server only shows when asked (bounded too).

pub mod brief;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use serde_json::{json, Value};

/// Longest wait for a started server to print its address.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for a signalled server to exit.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Read timeout of HTTP clients (above the longest long-poll, 30 s).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------

/// Runs the `kappa` client against `server` with `args` (no `KAPPA_URL`
/// from the environment); asserts it succeeded.
pub fn run_cli(server: &Server, args: &[&str]) -> std::process::Output {
    let output = std::process::Command::new(kappa_bin())
        .arg("--url")
        .arg(server.url())
        .args(args)
        .env_remove("KAPPA_URL")
        .output()
        .unwrap();
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

/// What `kappa` is built from (workspace-relative directories and files).
const KAPPA_SOURCES: &[&str] = &[
    "server/src",
    "server/Cargo.toml",
    "log/src",
    "log/Cargo.toml",
    "processor/src",
    "processor/Cargo.toml",
    "server/openapi.json",
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

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// One running (or stopped) `kappa serve` process.
pub struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: PathBuf,
    owned_data: Option<tempfile::TempDir>,
    args: Vec<String>,
    logs: tempfile::TempDir,
    rest_of_stdout: mpsc::Receiver<String>,
    client: Client,
}

impl Server {
    /// Starts `kappa serve` with `args` on a fresh temporary data directory
    /// (deleted when the server, or the one it is restarted as, is dropped).
    pub fn start(args: &[&str]) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("kappa-e2e-data-")
            .tempdir()
            .expect("creating a data dir");
        let path = dir.path().to_path_buf();
        Server::spawn(
            path,
            Some(dir),
            args.iter().map(|s| s.to_string()).collect(),
        )
    }

    /// Starts `kappa serve` with `args` on `data_dir`, which the caller owns.
    pub fn start_on(data_dir: &Path, args: &[&str]) -> Server {
        Server::spawn(
            data_dir.to_path_buf(),
            None,
            args.iter().map(|s| s.to_string()).collect(),
        )
    }

    /// Starts a server on an existing data directory (after a stop).
    pub fn restart_on(data_dir: &Path, args: &[&str]) -> Server {
        Server::start_on(data_dir, args)
    }

    /// Starts a new server on this (stopped) server's data directory with
    /// the same arguments; the data directory moves to the new server.
    pub fn restart(self) -> Server {
        let args = self.args.clone();
        self.restart_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Like [`Server::restart`], with other arguments.
    pub fn restart_with(mut self, args: &[&str]) -> Server {
        assert!(self.child.is_none(), "restart: stop the server first");
        let owned = self.owned_data.take();
        Server::spawn(
            self.data_dir.clone(),
            owned,
            args.iter().map(|s| s.to_string()).collect(),
        )
    }

    fn spawn(
        data_dir: PathBuf,
        owned_data: Option<tempfile::TempDir>,
        args: Vec<String>,
    ) -> Server {
        let logs = tempfile::Builder::new()
            .prefix("kappa-e2e-logs-")
            .tempdir()
            .expect("creating a log dir");
        let stderr = File::create(logs.path().join("stderr.log")).expect("creating the stderr log");
        let mut cmd = Command::new(kappa_bin());
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(&data_dir)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        // The environment must not configure the server behind the test's
        // back; logs are plain text for the failure dumps.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("KAPPA_") {
                cmd.env_remove(key);
            }
        }
        cmd.env("NO_COLOR", "1");
        let mut child = cmd.spawn().expect("spawning kappa serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (first_tx, first_rx) = mpsc::channel();
        let (rest_tx, rest_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let first = reader.read_line(&mut line).map(|_| line);
            let _ = first_tx.send(first);
            // Keep the pipe drained until the process exits, then report
            // anything printed after the first line.
            let mut rest = String::new();
            let _ = reader.read_to_string(&mut rest);
            let _ = rest_tx.send(rest);
        });
        let line = first_rx.recv_timeout(STARTUP_TIMEOUT);
        let addr = match &line {
            Ok(Ok(line)) => line
                .strip_suffix('\n')
                .and_then(|l| l.strip_prefix("listening on "))
                .and_then(|a| a.parse::<SocketAddr>().ok()),
            _ => None,
        };
        let Some(addr) = addr else {
            let _ = child.kill();
            let status = child.wait();
            let log = std::fs::read_to_string(logs.path().join("stderr.log")).unwrap_or_default();
            panic!(
                "kappa serve {args:?} did not print `listening on ADDR` within {STARTUP_TIMEOUT:?}: \
                 got {line:?}, exit {status:?}\nstderr:\n{log}"
            );
        };
        let client = Client::new(format!("http://{addr}"));
        Server {
            child: Some(child),
            addr,
            data_dir,
            owned_data,
            args,
            logs,
            rest_of_stdout: rest_rx,
            client,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A client of this server (cheap; clones share a connection pool).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The child's PID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr_log(&self) -> String {
        std::fs::read_to_string(self.logs.path().join("stderr.log")).unwrap_or_default()
    }

    /// SIGKILL (through `Child::kill`, i.e. by this child's PID) and reap.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("kill9: the server is not running");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaping the killed server");
    }

    /// SIGTERM; waits (bounded) for the exit and returns its status.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal_and_wait(libc::SIGTERM)
    }

    /// SIGINT; waits (bounded) for the exit and returns its status.
    pub fn interrupt(&mut self) -> ExitStatus {
        self.signal_and_wait(libc::SIGINT)
    }

    /// SIGTERM, then asserts a graceful exit: status 0 and nothing on
    /// stdout after the `listening on` line.
    pub fn terminate_ok(&mut self) {
        let status = self.terminate();
        assert!(
            status.success(),
            "kappa exited with {status} after SIGTERM; stderr:\n{}",
            self.stderr_log()
        );
        self.assert_no_more_stdout();
    }

    /// Asserts that the (exited) server printed exactly one stdout line.
    pub fn assert_no_more_stdout(&self) {
        let rest = self
            .rest_of_stdout
            .recv_timeout(EXIT_TIMEOUT)
            .expect("stdout closes when the server exits");
        assert!(
            rest.is_empty(),
            "kappa printed more than one stdout line: {rest:?}"
        );
    }

    fn signal_and_wait(&mut self, signal: libc::c_int) -> ExitStatus {
        let child = self.child.as_mut().expect("the server is not running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) with the PID of our own unreaped child: the PID
        // cannot have been reused, since we have not waited for it yet.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(
            rc,
            0,
            "kill({pid}, {signal}): {}",
            std::io::Error::last_os_error()
        );
        match wait_for_exit(child, EXIT_TIMEOUT) {
            Some(status) => {
                self.child = None;
                status
            }
            None => {
                let _ = child.kill();
                let _ = child.wait();
                self.child = None;
                panic!(
                    "kappa did not exit within {EXIT_TIMEOUT:?} of signal {signal}; stderr:\n{}",
                    self.stderr_log()
                );
            }
        }
    }
}

impl Deref for Server {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let log = self.stderr_log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "---- kappa serve {:?} on {} (last {} stderr lines) ----\n{}",
                self.args,
                self.addr,
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

/// Waits up to `timeout` for `child` to exit, without polling on a timer
/// where a pidfd is available (Linux >= 5.3).
fn wait_for_exit(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    let pidfd = pidfd_open(child.id());
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break None;
        }
        match pidfd {
            Some(fd) => {
                let mut poll = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = libc::c_int::try_from(left.as_millis())
                    .unwrap_or(libc::c_int::MAX)
                    .max(1);
                // SAFETY: one valid pollfd; the fd stays open until after the loop.
                unsafe { libc::poll(&mut poll, 1, ms) };
            }
            None => std::thread::sleep(left.min(Duration::from_millis(5))),
        }
    };
    if let Some(fd) = pidfd {
        // SAFETY: closing the pidfd we opened.
        unsafe { libc::close(fd) };
    }
    status
}

#[cfg(target_os = "linux")]
fn pidfd_open(pid: u32) -> Option<libc::c_int> {
    // SAFETY: pidfd_open(2) takes a PID and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    (fd >= 0).then_some(fd as libc::c_int)
}

#[cfg(not(target_os = "linux"))]
fn pidfd_open(_pid: u32) -> Option<libc::c_int> {
    None
}

// ---------------------------------------------------------------------------
// HTTP client
// ---------------------------------------------------------------------------

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// The `Content-Type` header ("" if absent).
    pub content_type: String,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
    /// The body as text.
    pub text: String,
    /// The body parsed as JSON; `Null` if empty, `Value::String(text)` if
    /// it is not JSON (so error-shape assertions fail with the text shown).
    pub body: Value,
}

fn parse_body(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
    }
}

/// Where a produced record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Produced {
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
}

/// A blocking HTTP client of one server.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
}

impl Client {
    /// A client of `base` (`http://host:port`).
    pub fn new(base: impl Into<String>) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10))
            .timeout_read(HTTP_TIMEOUT)
            .timeout_write(HTTP_TIMEOUT)
            .build();
        Client {
            agent,
            base: base.into(),
        }
    }

    /// `base` + `path`.
    pub fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends one request. `Err` only for transport errors (connection
    /// refused or reset, timeouts); every HTTP status is an `Ok`.
    pub fn try_send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Reply, String> {
        let mut request = self.agent.request(method, &self.url_of(path));
        if let Some(ct) = content_type {
            request = request.set("Content-Type", ct);
        }
        for (name, value) in headers {
            request = request.set(name, value);
        }
        let result = match body {
            Some(bytes) => request.send_bytes(bytes),
            None => request.call(),
        };
        let response = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(ureq::Error::Transport(t)) => return Err(t.to_string()),
        };
        let status = response.status();
        let content_type = response.header("content-type").unwrap_or("").to_string();
        let retry_after = response.header("retry-after").map(str::to_string);
        let text = response
            .into_string()
            .map_err(|e| format!("reading the body: {e}"))?;
        let body = parse_body(&text);
        Ok(Reply {
            status,
            content_type,
            retry_after,
            text,
            body,
        })
    }

    /// Like [`Client::try_send`], panicking on transport errors.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Reply {
        self.try_send(method, path, content_type, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: transport error: {e}"))
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> (u16, Value) {
        let r = self.send("GET", path, None, &[], None);
        (r.status, r.body)
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> (u16, Value) {
        let r = self.send("DELETE", path, None, &[], None);
        (r.status, r.body)
    }

    /// `POST path` with a JSON body.
    pub fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_json_with(path, body, &[])
    }

    /// `POST path` with a JSON body and extra headers.
    pub fn post_json_with(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let bytes = serde_json::to_vec(body).expect("JSON serializes");
        let r = self.send(
            "POST",
            path,
            Some("application/json"),
            headers,
            Some(&bytes),
        );
        (r.status, r.body)
    }

    /// `POST path` with an `application/x-ndjson` body.
    pub fn post_ndjson(&self, path: &str, body: &str) -> (u16, Value) {
        self.post_ndjson_with(path, body, &[])
    }

    /// `POST path` with an `application/x-ndjson` body and extra headers.
    pub fn post_ndjson_with(
        &self,
        path: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let r = self.send(
            "POST",
            path,
            Some("application/x-ndjson"),
            headers,
            Some(body.as_bytes()),
        );
        (r.status, r.body)
    }

    // -- API helpers that assert success --------------------------------

    /// `POST /v1/topics`; asserts `201` and returns the description.
    pub fn create_topic(&self, spec: &Value) -> Value {
        let (status, body) = self.post_json("/v1/topics", spec);
        assert_eq!(status, 201, "creating topic {spec}: {body}");
        body
    }

    /// Produces `{"records": records}` as JSON; asserts `200` and
    /// `duplicate: false`; returns where each record landed.
    pub fn produce(&self, topic: &str, records: &Value) -> Vec<Produced> {
        let (status, body) = self.post_json(
            &format!("/v1/topics/{topic}/records"),
            &json!({ "records": records }),
        );
        assert_eq!(status, 200, "producing to {topic}: {body}");
        assert_eq!(body["duplicate"], json!(false), "{body}");
        produced_of(&body)
    }

    /// `GET /v1/topics/{topic}/partitions/{partition}/records?{query}`;
    /// asserts `200`.
    pub fn read(&self, topic: &str, partition: u32, query: &str) -> Value {
        let path = format!("/v1/topics/{topic}/partitions/{partition}/records?{query}");
        let (status, body) = self.get(&path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Every record of a partition from its start to its end when read
    /// (bounded number of pages).
    pub fn read_all(&self, topic: &str, partition: u32) -> Vec<Value> {
        let mut records = Vec::new();
        let first = self.read(topic, partition, "offset=earliest&max_records=10000");
        let mut page = first;
        for _ in 0..10_000 {
            let batch = page["records"].as_array().expect("records array").clone();
            let next = page["next_offset"].as_u64().expect("next_offset");
            let end = page["high_watermark"].as_u64().expect("high_watermark");
            let empty = batch.is_empty();
            records.extend(batch);
            if next >= end || empty {
                return records;
            }
            page = self.read(
                topic,
                partition,
                &format!("offset={next}&max_records=10000"),
            );
        }
        panic!("read_all {topic}/{partition}: more than 10000 pages");
    }

    /// `POST /v1/statements` with `text` as `application/sql`.
    pub fn sql(&self, text: &str) -> (u16, Value) {
        let r = self.send(
            "POST",
            "/v1/statements",
            Some("application/sql"),
            &[],
            Some(text.as_bytes()),
        );
        (r.status, r.body)
    }

    /// Runs SQL statements; asserts `200` and returns the `results` array.
    pub fn sql_ok(&self, text: &str) -> Vec<Value> {
        let (status, body) = self.sql(text);
        assert_eq!(status, 200, "{text}\n{body}");
        body["results"].as_array().expect("results").clone()
    }

    /// `GET /v1/views/{view}/rows?{query}`; asserts `200`.
    pub fn view_rows(&self, view: &str, query: &str) -> Value {
        let path = format!("/v1/views/{view}/rows?{query}");
        let (status, body) = self.get(&path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// `GET /v1/views/{view}`; asserts `200`.
    pub fn describe_view(&self, view: &str) -> Value {
        let (status, body) = self.get(&format!("/v1/views/{view}"));
        assert_eq!(status, 200, "{body}");
        body
    }

    /// `GET /v1/topics/{topic}`; asserts `200`.
    pub fn describe(&self, topic: &str) -> Value {
        let (status, body) = self.get(&format!("/v1/topics/{topic}"));
        assert_eq!(status, 200, "describing {topic}: {body}");
        body
    }

    /// End offset of every partition, from `GET /v1/topics/{topic}`.
    pub fn end_offsets(&self, topic: &str) -> Vec<u64> {
        self.describe(topic)["partitions"]
            .as_array()
            .expect("partitions array")
            .iter()
            .map(|p| p["end_offset"].as_u64().expect("end_offset"))
            .collect()
    }
}

/// The `records` of a produce answer.
pub fn produced_of(body: &Value) -> Vec<Produced> {
    body["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records in produce answer {body}"))
        .iter()
        .map(|r| Produced {
            partition: r["partition"].as_u64().expect("partition") as u32,
            offset: r["offset"].as_u64().expect("offset"),
        })
        .collect()
}

/// The `after=` value of a view read that waits for `produced`:
/// `partition:offset` of the highest offset per partition written, joined
/// with commas, partitions in order.
pub fn after_param(produced: &[Produced]) -> String {
    let mut last: BTreeMap<u32, u64> = BTreeMap::new();
    for p in produced {
        let o = last.entry(p.partition).or_insert(p.offset);
        *o = (*o).max(p.offset);
    }
    last.iter()
        .map(|(p, o)| format!("{p}:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A record of the `user_events` topic the view tests declare a stream
/// over: keyed by `user`, with timestamp and `event_time` both `at_ms`.
pub fn user_event(user: &str, kind: &str, amount: f64, at_ms: i64) -> Value {
    json!({"key": user, "timestamp": at_ms,
           "value": {"user_id": user, "event_type": kind, "amount": amount,
                     "event_time": at_ms}})
}

/// Polls `f` (every 20 ms) until it returns `Some`, for at most
/// `deadline`; for state the server exposes only by being asked.
pub fn eventually<T>(what: &str, deadline: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts the documented error shape: `status`, a JSON body that is
/// exactly `{"error": {"code": code, "message": <non-empty string>}}`.
pub fn assert_error(
    context: &str,
    status: u16,
    body: &Value,
    expected_status: u16,
    expected_code: &str,
) {
    assert_error_of(context, status, body, expected_status, &[expected_code]);
}

/// Like [`assert_error`], accepting any of `codes`.
pub fn assert_error_of(
    context: &str,
    status: u16,
    body: &Value,
    expected_status: u16,
    codes: &[&str],
) {
    assert_eq!(status, expected_status, "{context}: status (body {body})");
    let object = body
        .as_object()
        .unwrap_or_else(|| panic!("{context}: the body is not a JSON object: {body}"));
    assert_eq!(
        object.len(),
        1,
        "{context}: only `error` at the top: {body}"
    );
    let error = body["error"]
        .as_object()
        .unwrap_or_else(|| panic!("{context}: no `error` object: {body}"));
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{context}: no string `error.code`: {body}"));
    assert!(
        codes.contains(&code),
        "{context}: code {code:?}, expected one of {codes:?}: {body}"
    );
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{context}: no string `error.message`: {body}"));
    assert!(
        !message.trim().is_empty(),
        "{context}: empty message: {body}"
    );
}

// ---------------------------------------------------------------------------
// Raw HTTP, for request targets a URL library would rewrite
// ---------------------------------------------------------------------------

/// A parsed raw HTTP response.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The body as JSON (`Value::String` of the text if it is not JSON).
    pub fn json(&self) -> Value {
        parse_body(&String::from_utf8_lossy(&self.body))
    }
}

/// One TCP connection speaking HTTP/1.1 byte for byte.
pub struct RawConnection {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConnection {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> RawConnection {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
        stream
            .set_read_timeout(Some(HTTP_TIMEOUT))
            .expect("read timeout");
        stream
            .set_write_timeout(Some(HTTP_TIMEOUT))
            .expect("write timeout");
        RawConnection {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes `bytes` as they are.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("writing the request");
        self.stream.flush().expect("flush");
    }

    /// Writes one request (`Content-Length` added when there is a body).
    pub fn send(&mut self, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) {
        self.send_bytes(&request_bytes(method, target, headers, body));
    }

    /// Reads one response; panics if the connection ends before one.
    pub fn receive(&mut self) -> RawResponse {
        self.try_receive().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Reads one response; `Err` if the connection is closed or reset
    /// before the response headers.
    pub fn try_receive(&mut self) -> Result<RawResponse, String> {
        let header_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            assert!(
                self.buf.len() < 1 << 20,
                "response headers larger than 1 MiB"
            );
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("connection closed before the response headers".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("reading the response headers: {e}")),
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..header_end]).into_owned();
        self.buf.drain(..header_end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let headers: BTreeMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
        {
            self.read_chunked()
        } else if let Some(len) = headers.get("content-length") {
            let len: usize = len.parse().expect("content-length");
            self.read_exact_buffered(len)
        } else {
            while self.fill() > 0 {
                assert!(self.buf.len() < 64 << 20, "response larger than 64 MiB");
            }
            std::mem::take(&mut self.buf)
        };
        Ok(RawResponse {
            status,
            headers,
            body,
        })
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).expect("reading the response");
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    fn read_exact_buffered(&mut self, len: usize) -> Vec<u8> {
        while self.buf.len() < len {
            assert!(self.fill() > 0, "connection closed inside the body");
        }
        self.buf.drain(..len).collect()
    }

    fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        for _ in 0..1_000_000 {
            let line_end = loop {
                if let Some(i) = find(&self.buf, b"\r\n") {
                    break i;
                }
                assert!(self.fill() > 0, "connection closed inside a chunk header");
            };
            let size_text = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            self.buf.drain(..line_end + 2);
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
            let data = self.read_exact_buffered(size + 2);
            if size == 0 {
                return body;
            }
            body.extend_from_slice(&data[..size]);
        }
        panic!("more than a million chunks");
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// An HTTP/1.1 request with `Host: localhost` (unless `headers` has a
/// `Host`), `Connection: close` (unless `headers` has a `Connection`) and,
/// when there is a body, `Content-Length` (unless `headers` sets
/// `Transfer-Encoding`).
pub fn request_bytes(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        out.push_str("Host: localhost\r\n");
    }
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("connection"))
    {
        out.push_str("Connection: close\r\n");
    }
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    let chunked = headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"));
    if !chunked && (!body.is_empty() || method == "POST") {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends one request on a new connection and reads the response.
pub fn raw_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
    let mut conn = RawConnection::connect(addr);
    conn.send(method, target, headers, body);
    conn.receive()
}

/// `body` in HTTP/1.1 chunked encoding, in chunks of `chunk` bytes.
pub fn chunked(body: &[u8], chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for part in body.chunks(chunk.max(1)) {
        out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

// ---------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------

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
