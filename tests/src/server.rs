//! [`Server`]: one `kappa serve` child process on a fresh (or given) data
//! directory and a port chosen by the OS. It learns the address from the
//! one line the server prints on stdout and stops it with SIGTERM, SIGINT
//! or SIGKILL, always by the child's own PID; process exits are awaited
//! through a pidfd, bounded in time.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::*;

/// One running (or stopped) `kappa serve` process.
pub struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    /// The Kafka listener's address, when started with `--kafka-listen`.
    kafka_addr: Option<SocketAddr>,
    pg_addr: Option<SocketAddr>,
    data_dir: PathBuf,
    owned_data: Option<tempfile::TempDir>,
    args: Vec<String>,
    /// `KAPPA_*` variables the server is started with (kept on restarts).
    env: Vec<(String, String)>,
    logs: tempfile::TempDir,
    rest_of_stdout: mpsc::Receiver<String>,
    client: Client,
}

impl Server {
    /// Starts `kappa serve` with `args` on a fresh temporary data directory
    /// (deleted when the server, or the one it is restarted as, is dropped).
    pub fn start(args: &[&str]) -> Server {
        Server::start_env(args, &[])
    }

    /// Like [`Server::start`], with environment variables (e.g.
    /// `KAPPA_BOOTSTRAP_TOKEN`) set for the server; restarts keep them.
    pub fn start_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("kappa-e2e-data-")
            .tempdir()
            .expect("creating a data dir");
        let path = dir.path().to_path_buf();
        Server::spawn(
            path,
            Some(dir),
            args.iter().map(|s| s.to_string()).collect(),
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Starts `kappa serve` with `args` on `data_dir`, which the caller owns.
    pub fn start_on(data_dir: &Path, args: &[&str]) -> Server {
        Server::spawn(
            data_dir.to_path_buf(),
            None,
            args.iter().map(|s| s.to_string()).collect(),
            Vec::new(),
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
            std::mem::take(&mut self.env),
        )
    }

    fn spawn(
        data_dir: PathBuf,
        owned_data: Option<tempfile::TempDir>,
        args: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Server {
        let logs = tempfile::Builder::new()
            .prefix("kappa-e2e-logs-")
            .tempdir()
            .expect("creating a log dir");
        let stderr = File::create(logs.path().join("stderr.log")).expect("creating the stderr log");
        let mut cmd = Command::new(kappa_bin());
        cmd.arg("serve").arg("--data-dir").arg(&data_dir);
        // A free port unless the test chose one (a node of a Kappa
        // cluster advertises its address).
        if !args.iter().any(|a| a == "--listen") {
            cmd.arg("--listen").arg("127.0.0.1:0");
        }
        cmd.args(&args)
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
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd.spawn().expect("spawning kappa serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (first_tx, first_rx) = mpsc::channel();
        let (rest_tx, rest_rx) = mpsc::channel();
        // With a Kafka listener, its address is the next line; then the
        // PostgreSQL listener's.
        let kafka_on = args.iter().any(|a| a.starts_with("--kafka-listen"));
        let pg_on = args.iter().any(|a| a.starts_with("--pg-listen"));
        let lines = 1 + usize::from(kafka_on) + usize::from(pg_on);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            for _ in 0..lines {
                let mut line = String::new();
                let read = reader.read_line(&mut line).map(|_| line);
                let _ = first_tx.send(read);
            }
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
        let listener_line = |prefix: &str| {
            let line = first_rx.recv_timeout(STARTUP_TIMEOUT);
            match &line {
                Ok(Ok(l)) => l
                    .trim_end()
                    .strip_prefix(prefix)
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                    .unwrap_or_else(|| panic!("expected `{prefix}ADDR`, got {l:?}")),
                other => panic!("no `{prefix}ADDR` line: {other:?}"),
            }
        };
        let kafka_addr = kafka_on.then(|| listener_line("kafka listening on "));
        let pg_addr = pg_on.then(|| listener_line("pg listening on "));
        let client = Client::new(format!("http://{addr}"));
        Server {
            child: Some(child),
            addr,
            kafka_addr,
            pg_addr,
            data_dir,
            owned_data,
            args,
            env,
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

    /// The PostgreSQL listener's address; panics unless the server was
    /// started with `--pg-listen`.
    pub fn pg_addr(&self) -> SocketAddr {
        self.pg_addr
            .expect("the server was started without --pg-listen")
    }

    /// The Kafka listener's address (`host:port` for `bootstrap.servers`);
    /// panics unless the server was started with `--kafka-listen`.
    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka_addr
            .expect("the server was started without --kafka-listen")
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
            let tail_from = lines.len().saturating_sub(60);
            // What went wrong may have been logged long before the end.
            let warnings: Vec<&str> = lines[..tail_from]
                .iter()
                .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
                .take(200)
                .copied()
                .collect();
            let tail = &lines[tail_from..];
            eprintln!(
                "---- kappa serve {:?} on {} (warnings and errors before the tail: {}; last {} stderr lines) ----\n{}\n----\n{}",
                self.args,
                self.addr,
                warnings.len(),
                tail.len(),
                warnings.join("\n"),
                tail.join("\n")
            );
        }
    }
}

/// Runs `kappa serve` on `data_dir` expecting it to refuse to start (it
/// binds its port and prints the address first, then opens the data
/// directory and exits); returns its stderr. Panics, after stopping it by
/// its PID, if it serves instead: `GET /health` waits on the bound port
/// until the server either answers (it opened the data directory) or exits
/// (the connection drops), so no timer decides.
pub fn refused_start(data_dir: &Path) -> String {
    let logs = tempfile::Builder::new()
        .prefix("kappa-e2e-logs-")
        .tempdir()
        .expect("creating a log dir");
    let stderr_path = logs.path().join("stderr.log");
    let stderr = File::create(&stderr_path).expect("creating the stderr log");
    let mut cmd = Command::new(kappa_bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("KAPPA_") {
            cmd.env_remove(key);
        }
    }
    let mut child = cmd
        .env("NO_COLOR", "1")
        .spawn()
        .expect("spawning kappa serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let (line_tx, line_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = line_tx.send(line);
        // Drained until the process exits.
        let _ = reader.read_to_string(&mut String::new());
    });
    let line = line_rx.recv_timeout(STARTUP_TIMEOUT).unwrap_or_default();
    let addr = line
        .trim_end()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse::<SocketAddr>().ok());
    if let Some(addr) = addr {
        let answer =
            Client::new(format!("http://{addr}")).try_send("GET", "/health", None, &[], None);
        if let Ok(reply) = answer {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "kappa serve started on {} (GET /health answered {}) instead of refusing; stderr:\n{}",
                data_dir.display(),
                reply.status,
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
    }
    let Some(status) = wait_for_exit(&mut child, EXIT_TIMEOUT) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "kappa serve on {} neither served nor exited",
            data_dir.display()
        );
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(!status.success(), "kappa serve exited 0; stderr:\n{stderr}");
    stderr
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
