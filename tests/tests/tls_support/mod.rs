//! Certificates for the HTTPS tests, made with rcgen (a CA and a server
//! certificate for `127.0.0.1` and `localhost`, in a temp dir), and HTTPS
//! clients trusting such a CA, and the handshake-failure metric. Shared by
//! `tls.rs`, `auth.rs` and `kafka_tls.rs`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kappa_tests::{Client, Server, HTTP_TIMEOUT};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::CertificateDer;

/// The value of `kappa_tls_handshake_failures_total{reason="…"}`.
pub fn handshake_failures(client: &Client, reason: &str) -> u64 {
    let text = client.send("GET", "/metrics", None, &[], None).text;
    let prefix = format!("kappa_tls_handshake_failures_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in /metrics:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// The value of the sample `series` (a metric name with its labels, as
/// `/metrics` prints it), or 0 when the server has not exported it yet.
pub fn metric_value(client: &Client, series: &str) -> u64 {
    let text = client.send("GET", "/metrics", None, &[], None).text;
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |value| value.trim().parse().unwrap())
}

/// A test CA.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A server certificate for 127.0.0.1 and localhost: (cert PEM, key PEM).
    pub fn issue(&self) -> (String, String) {
        let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "kappa test server");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Files in a temp dir: the CA's PEM, and the server's cert and key.
pub struct Files {
    /// The temp dir holding the files.
    pub dir: tempfile::TempDir,
    /// The CA that signed the installed certificate.
    pub ca: Ca,
}

impl Files {
    pub fn new() -> Files {
        let files = Files {
            dir: tempfile::tempdir().unwrap(),
            ca: Ca::new("kappa test CA 1"),
        };
        std::fs::write(files.path("ca.pem"), files.ca.cert.pem()).unwrap();
        files.install(&files.ca);
        files
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn arg(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }

    /// Writes a fresh server certificate of `ca` as cert.pem and key.pem.
    pub fn install(&self, ca: &Ca) {
        let (cert, key) = ca.issue();
        std::fs::write(self.path("cert.pem"), cert).unwrap();
        std::fs::write(self.path("key.pem"), key).unwrap();
    }

    /// Starts an HTTPS server with these files and `extra` arguments.
    pub fn start(&self, extra: &[&str]) -> Server {
        self.start_env(extra, &[])
    }

    /// Like [`Files::start`], with environment variables.
    pub fn start_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let (cert, key) = (self.arg("cert.pem"), self.arg("key.pem"));
        let mut args = vec!["--tls-cert", &cert, "--tls-key", &key];
        args.extend_from_slice(extra);
        Server::start_env(&args, env)
    }
}

/// A ureq client of `https://addr` trusting only `ca`; every request makes
/// a new connection (and handshake), so it sees the certificate served now.
pub fn https_client(addr: SocketAddr, ca: CertificateDer<'static>) -> Client {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let agent = ureq::AgentBuilder::new()
        .tls_config(Arc::new(config))
        .max_idle_connections(0)
        .timeout_connect(Duration::from_secs(10))
        .timeout_read(HTTP_TIMEOUT)
        .timeout_write(HTTP_TIMEOUT)
        .build();
    Client::with_agent(format!("https://{addr}"), agent)
}
