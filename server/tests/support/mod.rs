//! A server running in the test's own process (`run_with_log_config` on a
//! thread of its own, port 0, a temp dir), for tests that need the log's
//! fault-injection seam or two servers in one process. Stopped on drop.

#![allow(dead_code)] // each test binary uses a part

use std::net::SocketAddr;
use std::time::Duration;

use kappa_server::ServerConfig;
use serde_json::Value;

/// A running in-process server.
pub struct InProcess {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl InProcess {
    /// Starts a server with `config` (its `data_dir` and `listen` are
    /// replaced by a temp dir and port 0) and the log settings `log`
    /// makes of `config.log_config()`.
    pub fn start(
        config: ServerConfig,
        log: impl FnOnce(&mut kappa_log::LogConfig) + Send + 'static,
    ) -> InProcess {
        let dir = tempfile::tempdir().unwrap();
        let config = ServerConfig {
            data_dir: dir.path().to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            ..config
        };
        let mut log_config = config.log_config().unwrap();
        log(&mut log_config);
        let (addr_rx, stop, thread) = spawn(config, log_config);
        let addr = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        InProcess {
            addr,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// `GET path`: status and body text.
    pub fn get_text(&self, path: &str) -> (u16, String) {
        match ureq::get(&format!("http://{}{path}", self.addr)).call() {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(status, r)) => (status, r.into_string().unwrap()),
            Err(e) => panic!("GET {path}: {e}"),
        }
    }

    /// `GET path` of a JSON answer: status and body.
    pub fn get(&self, path: &str) -> (u16, Value) {
        let (status, text) = self.get_text(path);
        (status, serde_json::from_str(&text).unwrap())
    }

    /// `POST path` with a body of `content_type`: status and JSON body.
    pub fn post_as(
        &self,
        path: &str,
        content_type: &str,
        body: &str,
        key: Option<&str>,
    ) -> (u16, Value) {
        let mut request =
            ureq::post(&format!("http://{}{path}", self.addr)).set("Content-Type", content_type);
        if let Some(key) = key {
            request = request.set("Idempotency-Key", key);
        }
        json_answer("POST", path, request.send_string(body))
    }

    /// `PATCH path` with a JSON body: status and JSON body.
    pub fn patch(&self, path: &str, body: &Value) -> (u16, Value) {
        let request = ureq::request("PATCH", &format!("http://{}{path}", self.addr))
            .set("Content-Type", "application/json");
        json_answer("PATCH", path, request.send_string(&body.to_string()))
    }

    /// `POST path` with a JSON body: status and JSON body.
    pub fn post(&self, path: &str, body: &Value, key: Option<&str>) -> (u16, Value) {
        self.post_as(path, "application/json", &body.to_string(), key)
    }

    /// Runs SQL statements: status and JSON body.
    pub fn sql(&self, sql: &str) -> (u16, Value) {
        self.post_as("/v1/statements", "application/sql", sql, None)
    }
}

/// The status and JSON body of `method path`'s answer, an error status's
/// included.
fn json_answer(
    method: &str,
    path: &str,
    answer: Result<ureq::Response, ureq::Error>,
) -> (u16, Value) {
    match answer {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(status, r)) => (status, r.into_json().unwrap()),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

/// Runs `kappa_server::run_with_log_config` on a thread of its own (a
/// two-worker runtime) on `config.listen`: the bound address arrives on
/// the receiver, the sender stops the server, and the thread ends with the
/// server's outcome (an error if it could not open its data directory).
pub fn spawn(
    config: ServerConfig,
    log_config: kappa_log::LogConfig,
) -> (
    std::sync::mpsc::Receiver<SocketAddr>,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<anyhow::Result<()>>,
) {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let shutdown = async move {
                let _ = stopped.await;
            };
            kappa_server::run_with_log_config(config, log_config, listener, shutdown).await
        })
    });
    (addr_rx, stop, thread)
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if let Ok(Err(e)) = thread.join() {
                eprintln!("the in-process server ended with an error: {e:#}");
            }
        }
    }
}
