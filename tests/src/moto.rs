//! [`Moto`]: an S3-compatible object store on 127.0.0.1 (moto's server,
//! from the Kafka clients' venv, which `tests/provision` installs), for
//! tests that keep a broker's topics or a node's checkpoints in object
//! storage. Stopped by its own PID when dropped.

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::*;

/// One running moto server.
pub struct Moto {
    child: Child,
    addr: SocketAddr,
}

impl Moto {
    /// Starts moto on a free loopback port and waits until it answers.
    pub fn start() -> Moto {
        let port = free_port();
        let server = python()
            .parent()
            .expect("the venv's bin directory")
            .join("moto_server");
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "starting {} failed ({e}): run tests/provision (moto[server])",
                    server.display()
                )
            });
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut moto = Moto { child, addr };
        eventually(
            "moto to accept connections",
            Duration::from_secs(30),
            || {
                if let Ok(Some(status)) = moto.child.try_wait() {
                    panic!("moto exited ({status})");
                }
                TcpStream::connect(addr).ok()
            },
        );
        moto
    }

    /// Its URL: `http://127.0.0.1:port`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The environment an S3 client needs to use it (the `AWS_*`
    /// variables, with dummy credentials).
    pub fn client_env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "test".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Creates `bucket` (boto3).
    pub fn create_bucket(&self, bucket: &str) {
        let script = format!(
            "import boto3\n\
             boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1').create_bucket(Bucket='{bucket}')\n",
            self.endpoint()
        );
        run_python(&script, &format!("creating bucket {bucket}"));
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
