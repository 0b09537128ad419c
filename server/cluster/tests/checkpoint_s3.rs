//! [`CheckpointStore`] against an S3-compatible server: moto, from the
//! Kafka clients' venv that `tests/provision` installs, started here on a
//! free loopback port and stopped by its PID.

#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kappa_cluster::{CheckpointStore, SavedCheckpoint};

/// One running moto server, killed when dropped.
struct Moto {
    child: Child,
    addr: SocketAddr,
}

impl Moto {
    /// Starts moto on a free port and polls until it accepts connections.
    fn start() -> Moto {
        let home = std::env::var("HOME").unwrap();
        let python = PathBuf::from(home).join(".cache/kappa-kafka-venv/bin/python");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let child = Command::new(&python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "starting {} -m moto.server failed ({e}): run tests/provision (moto[server])",
                    python.display()
                )
            });
        let mut moto = Moto {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = moto.child.try_wait().unwrap() {
                panic!("moto exited before accepting connections ({status})");
            }
            if TcpStream::connect_timeout(&moto.addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "moto did not accept connections in 60 s"
            );
            std::thread::sleep(Duration::from_millis(20)); // polling interval
        }
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The settings a store needs to reach it (dummy credentials).
    fn options(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", "test".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// One plain HTTP/1.1 request (moto takes unsigned ones); the status
    /// code and the body.
    fn request(&self, method: &str, target: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        write!(
            stream,
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status in {response:?}"));
        let body = response
            .split_once("\r\n\r\n")
            .map_or(String::new(), |(_, body)| body.to_string());
        (status, body)
    }

    fn create_bucket(&self, bucket: &str) {
        let (status, body) = self.request("PUT", &format!("/{bucket}"));
        assert_eq!(status, 200, "creating bucket {bucket}: {body}");
    }

    /// Keys of the bucket's objects under `prefix` (one listing page).
    fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let (status, body) = self.request("GET", &format!("/{bucket}?list-type=2&prefix={prefix}"));
        assert_eq!(status, 200, "listing {bucket}: {body}");
        let mut keys: Vec<String> = body
            .split("<Key>")
            .skip(1)
            .filter_map(|rest| rest.split_once("</Key>"))
            .map(|(key, _)| key.to_string())
            .collect();
        keys.sort();
        keys
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_dir(root: &Path, name: &str, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).unwrap();
    for (file, bytes) in files {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    dir
}

fn read_dir(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            (name, std::fs::read(entry.path()).unwrap())
        })
        .collect()
}

#[test]
fn checkpoints_round_trip_through_s3() {
    let moto = Moto::start();
    moto.create_bucket("checkpoints");
    let store = CheckpointStore::open_with("s3://checkpoints/node-1/state", &moto.options())
        .unwrap()
        // SSTs no checkpoint lists go at once (not after 10 minutes).
        .with_sst_grace_ms(0);
    let task = "purchase_stats#3@1";
    let task_prefix = "node-1/state/purchase_stats!233!401";
    let root = tempfile::tempdir().unwrap();
    assert_eq!(store.newest(task).unwrap(), None);

    // Bigger than one upload part (16 MiB): goes up as a multipart upload.
    let big: Vec<u8> = (0..17 << 20).map(|i: u32| (i % 253) as u8).collect();
    let first = write_dir(
        root.path(),
        "first",
        &[
            ("000010.sst", big.clone()),
            ("000011.sst", b"eleven".to_vec()),
            ("MANIFEST-000005", b"manifest one".to_vec()),
            ("CURRENT", b"MANIFEST-000005\n".to_vec()),
        ],
    );
    let saved = store
        .save(task, &first, serde_json::json!({"offset": 10}))
        .unwrap();
    assert_eq!(
        saved,
        SavedCheckpoint {
            seq: 0,
            bytes_uploaded: big.len() as u64 + 6 + 12 + 16,
            files_uploaded: 4,
            sst_reused: 0,
        }
    );

    let second = write_dir(
        root.path(),
        "second",
        &[
            ("000010.sst", big.clone()),
            ("000012.sst", b"twelve".to_vec()),
            ("MANIFEST-000005", b"manifest two".to_vec()),
            ("CURRENT", b"MANIFEST-000005\n".to_vec()),
        ],
    );
    let saved = store
        .save(task, &second, serde_json::json!({"offset": 20}))
        .unwrap();
    assert_eq!(
        saved,
        SavedCheckpoint {
            seq: 1,
            bytes_uploaded: 6 + 12 + 16,
            files_uploaded: 3,
            sst_reused: 1,
        }
    );
    let newest = store.newest(task).unwrap().unwrap();
    assert_eq!(
        (newest.seq, &newest.meta),
        (1, &serde_json::json!({"offset": 20}))
    );
    let restored = root.path().join("restored");
    assert_eq!(store.restore(task, &restored).unwrap(), Some(newest));
    assert_eq!(read_dir(&restored), read_dir(&second));

    // A third save drops checkpoint 0 and the SST only it listed.
    let third = write_dir(
        root.path(),
        "third",
        &[
            ("000012.sst", b"twelve".to_vec()),
            ("CURRENT", b"MANIFEST-000009\n".to_vec()),
            ("MANIFEST-000009", b"manifest three".to_vec()),
        ],
    );
    let saved = store.save(task, &third, serde_json::Value::Null).unwrap();
    assert_eq!(
        (saved.seq, saved.files_uploaded, saved.sst_reused),
        (2, 2, 1)
    );
    let c = |seq: u64, name: &str| format!("{task_prefix}/checkpoints/{seq:020}{name}");
    let mut expected = vec![
        c(1, ".json"),
        c(1, "/CURRENT"),
        c(1, "/MANIFEST-000005"),
        c(2, ".json"),
        c(2, "/CURRENT"),
        c(2, "/MANIFEST-000009"),
        format!("{task_prefix}/sst/000010.sst"),
        format!("{task_prefix}/sst/000012.sst"),
    ];
    expected.sort();
    // Each save's files are in `<seq>-<writer>/`: the writer part is drawn.
    let mut keys: Vec<String> = moto
        .keys("checkpoints", "node-1/")
        .into_iter()
        .map(|k| match k.split_once("/checkpoints/") {
            Some((task, rest)) => match rest.split_once('/') {
                Some((dir, file)) => {
                    let seq = dir.split_once('-').map_or(dir, |(seq, _)| seq);
                    format!("{task}/checkpoints/{seq}/{file}")
                }
                None => k,
            },
            None => k,
        })
        .collect();
    keys.sort();
    assert_eq!(keys, expected);

    let restored = root.path().join("restored-3");
    let info = store.restore(task, &restored).unwrap().unwrap();
    assert_eq!(info.seq, 2);
    assert_eq!(read_dir(&restored), read_dir(&third));
}
