//! TLS for every listener (the HTTPS API and the Kafka port): the
//! certificate, its reload, the handshake, and what a plaintext client gets.
//!
//! Design:
//! - [`Tls::load`] reads a PEM certificate chain and its private key
//!   (PKCS#8, PKCS#1 or SEC1) and checks that they belong together; every
//!   failure names the file. The *ring* provider is passed explicitly, so the
//!   process-wide default provider (none, or one an embedding program
//!   installed) never matters.
//! - What is served lives behind one lock: a rustls config whose resolver
//!   holds the current `CertifiedKey`. A reload ([`Tls::reload`], on SIGHUP
//!   via [`Tls::reload_on_sighup`]) loads both files completely and only then
//!   swaps in a new config, so a broken file leaves the previous certificate
//!   serving. The whole config is replaced, not only the key: its session
//!   cache goes with it, so no client resumes a session of the old
//!   certificate and every next handshake shows the new one. Handshakes in
//!   progress finish with the config they started with.
//! - [`Tls::accept`] runs in the connection's own task, never in the accept
//!   loop, so a client that connects and never handshakes holds only its own
//!   task; the caller bounds it by the first-request deadline and the
//!   newcomer eviction like any connection that has not sent a request yet.
//! - The first byte decides: a TLS handshake record (0x16) is handed to
//!   rustls; anything else is a plaintext client. On the HTTPS port
//!   ([`Plaintext::AnswerHttp`]) it gets a `400` with the JSON error
//!   `tls_required` naming the `https://` URL, then the connection closes;
//!   on the Kafka port ([`Plaintext::Close`]) the connection closes (Kafka
//!   has no way to say "use TLS"). Refused handshakes are counted in
//!   [`HANDSHAKE_FAILURES`].
//! - The same certificate serves the HTTPS API and the Kafka listener.
//!
//! Invariants: key material is never logged or formatted (the resolver's
//! `Debug` shows the chain's length only); only HTTP/1.1 is offered over ALPN.

use std::fmt;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::{anyhow, bail, Context};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{self, InconsistentKeys};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Connections on the HTTPS or Kafka port that did not become TLS
/// sessions, by `reason`: `plain_http` (answered `400 tls_required`),
/// `plain_kafka` (a plaintext Kafka client, closed), `error` (the
/// handshake failed, e.g. the client does not trust the certificate) or
/// `timeout` (no handshake within `first_request_timeout_ms`).
pub const HANDSHAKE_FAILURES: &str = "kappa_tls_handshake_failures_total";

/// The content type of a TLS handshake record: the first byte a TLS client sends.
const HANDSHAKE_RECORD: u8 = 0x16;

/// Largest certificate or key file read (a chain is a few KiB).
const PEM_FILE_BYTES_MAX: u64 = 1 << 20;

/// Most bytes of a plain-HTTP request head read to find its `Host`.
const PLAIN_HEAD_BYTES_MAX: usize = 8 << 10;

/// Most bytes of a plain-HTTP request discarded after the answer, so that
/// closing does not reset the connection before the client read it.
const PLAIN_DRAIN_BYTES_MAX: usize = 64 << 10;

/// Longest `Host` echoed in the `tls_required` answer.
const HOST_BYTES_MAX: usize = 255;

/// What a connection that does not start with a TLS handshake gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plaintext {
    /// `400 tls_required` naming the `https://` URL (the API port).
    AnswerHttp,
    /// Closed, counted and logged (the Kafka port).
    Close,
}

/// The TLS side of the server: the files, and the config served now.
pub struct Tls {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    serving: RwLock<Serving>,
}

/// A loaded certificate and the rustls config that serves it.
struct Serving {
    config: Arc<rustls::ServerConfig>,
    end_entity: CertificateDer<'static>,
}

impl Tls {
    /// Loads the certificate chain at `cert_path` and the key at `key_path`
    /// and builds the server config (ring provider, TLS 1.2 and 1.3, ALPN
    /// `http/1.1`). Errors name the file at fault.
    pub fn load(cert_path: &Path, key_path: &Path) -> anyhow::Result<Tls> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let serving = serving(cert_path, key_path, &provider)?;
        Ok(Tls {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            provider,
            serving: RwLock::new(serving),
        })
    }

    /// The certificate file this server serves.
    pub fn cert_path(&self) -> &Path {
        &self.cert_path
    }

    /// The end-entity certificate served now (DER).
    pub fn certificate(&self) -> CertificateDer<'static> {
        self.serving
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .end_entity
            .clone()
    }

    /// An acceptor of the certificate served now for PostgreSQL clients:
    /// the same config, its ALPN protocol `postgresql` (libpq 17 offers
    /// it; an older client offers none).
    pub fn pg_acceptor(&self) -> TlsAcceptor {
        let serving = self.serving.read().unwrap_or_else(PoisonError::into_inner);
        let mut config = (*serving.config).clone();
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        TlsAcceptor::from(Arc::new(config))
    }

    /// Reads both files again and, if they load, serves them from the next
    /// handshake on (with a new session cache); on error the previous
    /// certificate stays. Blocking (file I/O).
    pub fn reload(&self) -> anyhow::Result<()> {
        let loaded = serving(&self.cert_path, &self.key_path, &self.provider)?;
        *self.serving.write().unwrap_or_else(PoisonError::into_inner) = loaded;
        Ok(())
    }

    /// Listens for SIGHUP and reloads the certificate on each, logging the
    /// outcome. From the call on, SIGHUP no longer terminates the process.
    /// Abort the returned task to stop listening.
    pub fn reload_on_sighup(self: Arc<Self>) -> std::io::Result<tokio::task::JoinHandle<()>> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangups = signal(SignalKind::hangup())?;
        Ok(tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let tls = self.clone();
                let (cert, key) = (self.cert_path.display(), self.key_path.display());
                match tokio::task::spawn_blocking(move || tls.reload()).await {
                    Ok(Ok(())) => {
                        tracing::info!(%cert, %key, "SIGHUP: TLS certificate reloaded");
                    }
                    Ok(Err(e)) => tracing::error!(
                        error = %format!("{e:#}"),
                        "SIGHUP: TLS certificate not reloaded; still serving the previous one"
                    ),
                    Err(e) => tracing::error!(error = %e, "SIGHUP: TLS reload task failed"),
                }
            }
        }))
    }

    /// Makes [`HANDSHAKE_FAILURES`] show 0 for each reason before the first
    /// failure (needs the recorder installed).
    pub fn register_metrics() {
        for reason in ["plain_http", "plain_kafka", "error", "timeout"] {
            count_failure_by(reason, 0);
        }
    }

    /// Turns a new connection into a TLS session. `None` when it is not one:
    /// it closed before sending anything, it spoke plaintext (answered as
    /// `plaintext` says), or the handshake failed. Unbounded in time: the
    /// caller applies the first-request deadline.
    pub async fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        plaintext: Plaintext,
    ) -> Option<TlsStream<TcpStream>> {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "connection failed before the TLS handshake");
                return None;
            }
        }
        if first[0] != HANDSHAKE_RECORD && plaintext == Plaintext::Close {
            count_failure_by("plain_kafka", 1);
            tracing::warn!(%peer, "closing a plaintext Kafka connection: the listener serves TLS only");
            return None;
        }
        if first[0] != HANDSHAKE_RECORD {
            count_failure_by("plain_http", 1);
            tracing::debug!(%peer, "plain HTTP on the HTTPS port: answering tls_required");
            if let Err(e) = answer_plain_http(stream).await {
                tracing::debug!(%peer, error = %e, "answering plain HTTP failed");
            }
            return None;
        }
        let config = self
            .serving
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .config
            .clone();
        match TlsAcceptor::from(config).accept(stream).await {
            Ok(session) => Some(session),
            Err(e) => {
                count_failure_by("error", 1);
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
        }
    }
}

/// Loads the certificate if `config` names one, and starts reloading it on
/// SIGHUP (the task runs until aborted).
pub fn start(
    config: &crate::config::ServerConfig,
) -> anyhow::Result<Option<(Arc<Tls>, tokio::task::JoinHandle<()>)>> {
    let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) else {
        return Ok(None);
    };
    let tls = Arc::new(Tls::load(cert, key)?);
    Tls::register_metrics();
    let reloads = tls.clone().reload_on_sighup()?;
    tracing::info!(
        cert = %cert.display(),
        key = %key.display(),
        "serving TLS only; SIGHUP reloads the certificate"
    );
    Ok(Some((tls, reloads)))
}

/// Counts one connection that did not become a TLS session because no
/// handshake finished within the first-request deadline.
pub fn count_handshake_timeout() {
    count_failure_by("timeout", 1);
}

fn count_failure_by(reason: &'static str, n: u64) {
    metrics::counter!(HANDSHAKE_FAILURES, "reason" => reason).increment(n);
}

/// Loads both files into a new config serving them.
fn serving(
    cert_path: &Path,
    key_path: &Path,
    provider: &Arc<CryptoProvider>,
) -> anyhow::Result<Serving> {
    let key = Arc::new(load_certified_key(cert_path, key_path, provider)?);
    let end_entity = key.cert[0].clone();
    let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS: the ring provider supports no default protocol version")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(FixedCert(key)));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Serving {
        config: Arc::new(config),
        end_entity,
    })
}

/// The resolver of one config: every handshake gets its one certificate.
struct FixedCert(Arc<CertifiedKey>);

impl ResolvesServerCert for FixedCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

impl fmt::Debug for FixedCert {
    // No key: it must not end up in a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedCert")
            .field("chain_len", &self.0.cert.len())
            .finish_non_exhaustive()
    }
}

/// Loads a chain and its key and checks that the key is the first
/// certificate's.
fn load_certified_key(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> anyhow::Result<CertifiedKey> {
    let chain = read_chain(cert_path)?;
    let key = read_key(key_path)?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| anyhow!("TLS key {}: {e}", key_path.display()))?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        // Unknown: the key cannot tell its public half; rustls accepts that too.
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(certified),
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => bail!(
            "TLS key {} does not belong to the certificate {}",
            key_path.display(),
            cert_path.display()
        ),
        Err(e) => bail!("TLS certificate {}: {e}", cert_path.display()),
    }
}

/// The `CERTIFICATE` blocks of a PEM file, end-entity first.
fn read_chain(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem = read_pem_file(path, "certificate")?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("TLS certificate {}: {e}", path.display()))?;
    if chain.is_empty() {
        bail!(
            "TLS certificate {}: no PEM `CERTIFICATE` block",
            path.display()
        );
    }
    Ok(chain)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
fn read_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    let pem = read_pem_file(path, "key")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        pem::Error::NoItemsFound => anyhow!(
            "TLS key {}: no PEM private key (`PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`)",
            path.display()
        ),
        e => anyhow!("TLS key {}: {e}", path.display()),
    })
}

fn read_pem_file(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(PEM_FILE_BYTES_MAX + 1).read_to_end(&mut bytes))
        .with_context(|| format!("reading TLS {what} {}", path.display()))?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        bail!(
            "TLS {what} {}: larger than {PEM_FILE_BYTES_MAX} bytes",
            path.display()
        );
    }
    Ok(bytes)
}

/// Answers a plain-HTTP request on the HTTPS port with `400 tls_required`
/// and closes. Reads the request head first (bounded) to name the `Host` the
/// client used, and discards what follows the answer (bounded) so the close
/// is a FIN, not a reset that could destroy the answer in flight.
async fn answer_plain_http(mut stream: TcpStream) -> io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while head.len() < PLAIN_HEAD_BYTES_MAX && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match read_some(&stream, &mut buf).await? {
            0 => break,
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    let host = match host_of(&head) {
        Some(host) => host.to_string(),
        None => stream.local_addr()?.to_string(),
    };
    let body = serde_json::json!({"error": {
        "code": "tls_required",
        "message": format!("this port serves HTTPS: use https://{host}/"),
    }})
    .to_string();
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    write_all(&stream, answer.as_bytes()).await?;
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_shutdown(cx)).await?;
    let mut drained = 0;
    while drained < PLAIN_DRAIN_BYTES_MAX {
        match read_some(&stream, &mut buf).await? {
            0 => break,
            n => drained += n,
        }
    }
    Ok(())
}

// tokio's `io-util` (AsyncReadExt, AsyncWriteExt) is not among the
// server's features; the socket's readiness API does the same here.
async fn read_some(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            read => return read,
        }
    }
}

async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The `Host` header of a request head, if it looks like `host[:port]`
/// (letters, digits, `.-:[]`; it is echoed back).
fn host_of(head: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(head).ok()?;
    let value = text
        .split("\r\n")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("host")
                .then(|| value.trim())
        })?;
    let plausible = !value.is_empty()
        && value.len() <= HOST_BYTES_MAX
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
    plausible.then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(name: &str) -> PathBuf {
        std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("src/http/testdata")
        .join(name)
    }

    fn load(cert: &str, key: &str) -> anyhow::Result<Tls> {
        Tls::load(&testdata(cert), &testdata(key))
    }

    #[test]
    fn loads_pkcs8_pkcs1_and_sec1_keys() {
        load("a_cert.pem", "a_key_pkcs8.pem").unwrap();
        load("a_cert.pem", "a_key_sec1.pem").unwrap();
        load("b_cert.pem", "b_key_pkcs8.pem").unwrap();
        load("b_cert.pem", "b_key_pkcs1.pem").unwrap();
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_naming_both_files() {
        let error = format!("{:#}", load("a_cert.pem", "b_key_pkcs8.pem").err().unwrap());
        assert!(error.contains("b_key_pkcs8.pem"), "{error}");
        assert!(error.contains("a_cert.pem"), "{error}");
        assert!(error.contains("does not belong"), "{error}");
    }

    #[test]
    fn missing_empty_and_swapped_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let missing = dir.path().join("missing.pem");
        let key = testdata("a_key_pkcs8.pem");
        let cert = testdata("a_cert.pem");
        let cases = [
            (&missing, &key, "missing.pem"),
            (&cert, &missing, "missing.pem"),
            (&empty, &key, "empty.pem"),
            (&cert, &empty, "empty.pem"),
            // A key where the certificate belongs, and the other way round.
            (&key, &key, "a_key_pkcs8.pem"),
            (&cert, &cert, "a_cert.pem"),
        ];
        for (cert, key, named) in cases {
            let error = format!("{:#}", Tls::load(cert, key).err().unwrap());
            assert!(error.contains(named), "{cert:?} {key:?}: {error}");
        }
    }

    #[test]
    fn garbage_in_a_pem_block_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("garbage.pem");
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let error = format!(
            "{:#}",
            Tls::load(&cert, &testdata("a_key_pkcs8.pem"))
                .err()
                .unwrap()
        );
        assert!(error.contains("garbage.pem"), "{error}");
    }

    #[test]
    fn a_failed_reload_keeps_the_previous_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::copy(testdata("a_cert.pem"), &cert).unwrap();
        std::fs::copy(testdata("a_key_pkcs8.pem"), &key).unwrap();
        let tls = Tls::load(&cert, &key).unwrap();
        let served = || tls.certificate();
        let a = served();

        std::fs::copy(testdata("b_cert.pem"), &cert).unwrap();
        let error = format!("{:#}", tls.reload().unwrap_err());
        assert!(error.contains("does not belong"), "{error}");
        assert_eq!(served(), a, "a half-replaced pair is not served");

        std::fs::copy(testdata("b_key_pkcs1.pem"), &key).unwrap();
        tls.reload().unwrap();
        assert_ne!(served(), a);
        let debug = format!("{:?}", tls.serving.read().unwrap().config);
        assert!(debug.contains("FixedCert { chain_len: 1"), "{debug}");
    }

    #[test]
    fn host_of_takes_a_plausible_host_header_only() {
        let head = b"GET / HTTP/1.1\r\nAccept: */*\r\nhOsT:  kappa.example:8443 \r\n\r\n";
        assert_eq!(host_of(head), Some("kappa.example:8443"));
        assert_eq!(
            host_of(b"GET / HTTP/1.1\r\nHost: [::1]:1\r\n\r\n"),
            Some("[::1]:1")
        );
        assert_eq!(host_of(b"GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n"), None);
        assert_eq!(host_of(b"GET / HTTP/1.1\r\nHost:\r\n\r\n"), None);
        assert_eq!(host_of(b"GET / HTTP/1.1\r\n\r\nHost: late\r\n"), None);
        assert_eq!(host_of(b"\x16\x03\x01"), None);
    }

    #[tokio::test]
    async fn plain_http_gets_tls_required_and_a_clean_close() {
        let tls = load("a_cert.pem", "a_key_pkcs8.pem").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (stream, peer) = listener.accept().await.unwrap();
            tls.accept(stream, peer, Plaintext::AnswerHttp)
                .await
                .is_none()
        });
        let client = tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut client = std::net::TcpStream::connect(addr).unwrap();
            client
                .write_all(b"GET /health HTTP/1.1\r\nHost: localhost:9\r\n\r\n")
                .unwrap();
            let mut answer = String::new();
            client.read_to_string(&mut answer).unwrap();
            answer
        });
        let answer = client.await.unwrap();
        assert!(server.await.unwrap());
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("Content-Type: application/json"), "{head}");
        assert!(head.contains("Connection: close"), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "tls_required");
        assert_eq!(
            body["error"]["message"],
            "this port serves HTTPS: use https://localhost:9/"
        );
    }
}
