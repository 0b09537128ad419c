//! A small blocking HTTP client for the kappa API.
//!
//! It sends requests with `ureq`, decodes the API's JSON error bodies
//! (`{"error": {"code", "message"}}`) into [`ApiError`], retries answers
//! `503` that carry `Retry-After` (the server's `overloaded`) a bounded number
//! of times, and turns connection failures into a message naming the URL.
//! `https://` URLs are verified against the webpki roots ureq ships, or only
//! against the CA given with `--ca-cert` (ring provider either way).

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use serde::de::DeserializeOwned;
use tokio_rustls::rustls;

/// How many times one request is retried after `503` with `Retry-After`.
pub const MAX_RETRIES: u32 = 10;

/// The longest `Retry-After` delay honoured; longer ones are shortened to it.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Longest wait for a single read of an answer; long-polls wait up to 30 s.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// ureq's message for a TLS handshake that failed.
const TLS_HANDSHAKE_FAILED: &str = "tls connection init failed";

/// An error answer of the server, decoded from its JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// The stable snake_case error code, e.g. `unknown_topic`.
    pub code: String,
    /// The human-readable message naming the object and the problem.
    pub message: String,
    /// A SQL error's 1-based `(line, column)` in the text sent.
    pub position: Option<(u64, u64)>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// Decodes an error answer. Bodies that are not the API's error shape (e.g. from
/// a proxy) become the code `http_<status>` with the start of the body as message.
pub fn decode_error(status: u16, body: &str) -> ApiError {
    if let Ok(parsed) = serde_json::from_str::<kappa_wire::admin::ErrorBody>(body) {
        let detail = |name: &str| parsed.error.details.get(name).and_then(|v| v.as_u64());
        return ApiError {
            status,
            position: detail("line").zip(detail("column")),
            code: parsed.error.code,
            message: parsed.error.message,
        };
    }
    let text = body.trim();
    let message = if text.is_empty() {
        format!("HTTP status {status} with an empty body")
    } else {
        text.chars().take(200).collect()
    };
    ApiError {
        status,
        code: format!("http_{status}"),
        message,
        position: None,
    }
}

/// Parses a `Retry-After` header given in seconds (HTTP dates are not supported).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: u64 = value.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_DELAY))
}

/// Percent-encodes one path segment (a topic or group name).
pub fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// One request to send (and maybe resend).
struct Req<'a> {
    method: &'a str,
    path: &'a str,
    query: &'a [(&'a str, String)],
    headers: &'a [(&'a str, &'a str)],
    body: Option<(&'a str, &'a str)>,
}

/// The server the client subcommands talk to when none is named.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// How a client reaches its server: the URL and the credentials. Also the
/// client options of the command line (`--url`, `--token`, `--ca-cert`);
/// the doc comments of the fields are their help. No `Debug`: it holds
/// the token.
#[derive(Clone, Default, clap::Args)]
#[command(next_help_heading = "Client options")]
pub struct ClientOptions {
    /// URL of the server.
    #[arg(
        long,
        visible_alias = "server",
        env = "KAPPA_URL",
        default_value = DEFAULT_URL,
        global = true
    )]
    pub url: String,
    /// Bearer token for a server with `auth = "tokens"` (README,
    /// "Security"), sent as `Authorization: Bearer` on every request; never
    /// printed.
    #[arg(long, env = "KAPPA_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// PEM file of the CA that signed an https:// server's certificate
    /// (instead of the built-in public roots).
    #[arg(long, env = "KAPPA_CA_CERT", global = true)]
    pub ca_cert: Option<PathBuf>,
}

/// A client for one server; cheap to clone (clones share the connection pool).
#[derive(Clone)]
pub struct Client {
    base: String,
    agent: ureq::Agent,
    /// The `Authorization` header value, if a token was given.
    authorization: Option<String>,
}

impl Client {
    /// Creates a client for the server at `url`, e.g. `http://127.0.0.1:8080`
    /// (`http://` is assumed when the URL has no scheme).
    pub fn new(url: &str) -> Self {
        Client::connect(&ClientOptions {
            url: url.to_string(),
            ..ClientOptions::default()
        })
        .expect("a client without a CA file cannot fail")
    }

    /// Creates a client with `options` (URL, token, CA); fails only on an
    /// unusable CA file.
    pub fn connect(options: &ClientOptions) -> anyhow::Result<Self> {
        let url = options.url.as_str();
        let url = url.trim().trim_end_matches('/');
        let base = if url.contains("://") {
            url.to_string()
        } else {
            format!("http://{url}")
        };
        let mut agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10))
            .timeout_read(READ_TIMEOUT)
            .timeout_write(READ_TIMEOUT);
        if let Some(ca_cert) = &options.ca_cert {
            agent = agent.tls_config(tls_trusting(ca_cert)?);
        }
        let agent = agent.build();
        let authorization = options
            .token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| format!("Bearer {t}"));
        Ok(Client {
            base,
            agent,
            authorization,
        })
    }

    /// The server's base URL, e.g. `http://127.0.0.1:8080`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `GET path?query`; returns the body of a successful answer.
    pub fn get(&self, path: &str, query: &[(&str, String)]) -> anyhow::Result<String> {
        self.send(&Req {
            method: "GET",
            path,
            query,
            headers: &[],
            body: None,
        })
    }

    /// `GET path?query` and decodes the JSON answer.
    pub fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> anyhow::Result<T> {
        parse(path, &self.get(path, query)?)
    }

    /// `POST path` with a JSON body; returns the body of a successful answer.
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> anyhow::Result<String> {
        let body = body.to_string();
        self.post(path, "application/json", &body, &[])
    }

    /// `POST path` with a body of the given content type and extra headers.
    pub fn post(
        &self,
        path: &str,
        content_type: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<String> {
        self.send(&Req {
            method: "POST",
            path,
            query: &[],
            headers,
            body: Some((content_type, body)),
        })
    }

    /// `PATCH path` with a JSON body; returns the body of a successful answer.
    pub fn patch_json(&self, path: &str, body: &serde_json::Value) -> anyhow::Result<String> {
        let body = body.to_string();
        self.send(&Req {
            method: "PATCH",
            path,
            query: &[],
            headers: &[],
            body: Some(("application/json", &body)),
        })
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> anyhow::Result<()> {
        self.send(&Req {
            method: "DELETE",
            path,
            query: &[],
            headers: &[],
            body: None,
        })
        .map(drop)
    }

    /// Sends `req`, retrying `503` answers with `Retry-After` up to [`MAX_RETRIES`] times.
    fn send(&self, req: &Req) -> anyhow::Result<String> {
        let mut retries = 0;
        loop {
            match self.send_once(req).map_err(|e| *e) {
                Ok(response) => return read_body(response),
                Err(ureq::Error::Status(status, response)) => {
                    let delay = response.header("Retry-After").and_then(parse_retry_after);
                    let mut error = decode_error(status, &read_body(response).unwrap_or_default());
                    match delay {
                        Some(delay) if status == 503 && retries < MAX_RETRIES => {
                            retries += 1;
                            thread::sleep(delay);
                        }
                        _ => {
                            if retries > 0 {
                                error
                                    .message
                                    .push_str(&format!(" (after {retries} retries)"));
                            }
                            return Err(error.into());
                        }
                    }
                }
                Err(ureq::Error::Transport(transport)) => {
                    return Err(self.transport_error(req, &transport))
                }
            }
        }
    }

    fn send_once(&self, req: &Req) -> Result<ureq::Response, Box<ureq::Error>> {
        let url = format!("{}{}", self.base, req.path);
        let mut request = self.agent.request(req.method, &url);
        for (name, value) in req.query {
            request = request.query(name, value);
        }
        for (name, value) in req.headers {
            request = request.set(name, value);
        }
        if let Some(authorization) = &self.authorization {
            request = request.set("Authorization", authorization);
        }
        match req.body {
            Some((content_type, body)) => {
                request.set("Content-Type", content_type).send_string(body)
            }
            None => request.call(),
        }
        .map_err(Box::new)
    }

    fn transport_error(&self, req: &Req, transport: &ureq::Transport) -> anyhow::Error {
        let detail = transport_detail(transport);
        // ureq reports a failed TLS handshake as a failed connection.
        if transport.message() == Some(TLS_HANDSHAKE_FAILED) {
            return anyhow!(
                "TLS handshake with {} failed ({detail}): if its certificate comes from \
                 a private CA, pass that CA with --ca-cert (KAPPA_CA_CERT); if it serves \
                 plain HTTP, use an http:// URL",
                self.base
            );
        }
        match transport.kind() {
            ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::Dns => anyhow!(
                "cannot connect to {} ({detail}): is `kappa serve` running?",
                self.base
            ),
            _ => anyhow!("{} {}{} failed: {detail}", req.method, self.base, req.path),
        }
    }
}

/// A TLS client config (ring provider) trusting only the CA certificates
/// in the PEM file `ca_cert`.
fn tls_trusting(ca_cert: &Path) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let pem = std::fs::read(ca_cert)
        .with_context(|| format!("reading the CA certificate {}", ca_cert.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| anyhow!("CA certificate {}: {e}", ca_cert.display()))?;
        roots
            .add(cert)
            .map_err(|e| anyhow!("CA certificate {}: {e}", ca_cert.display()))?;
    }
    if roots.is_empty() {
        bail!(
            "CA certificate {}: no PEM `CERTIFICATE` block",
            ca_cert.display()
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS: the ring provider supports no default protocol version")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The transport error's text without the URL prefix ureq puts in front.
fn transport_detail(transport: &ureq::Transport) -> String {
    let mut text = transport.kind().to_string();
    if let Some(message) = transport.message() {
        text.push_str(": ");
        text.push_str(message);
    }
    if let Some(source) = std::error::Error::source(transport) {
        text.push_str(": ");
        text.push_str(&source.to_string());
    }
    text
}

fn read_body(response: ureq::Response) -> anyhow::Result<String> {
    let mut body = String::new();
    response
        .into_reader()
        .read_to_string(&mut body)
        .context("reading the server's answer")?;
    Ok(body)
}

/// Decodes a JSON answer of `path`, naming the path when it does not fit.
pub fn parse<T: DeserializeOwned>(path: &str, body: &str) -> anyhow::Result<T> {
    serde_json::from_str(body).with_context(|| format!("unexpected answer from {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};

    #[test]
    fn decodes_api_error_bodies() {
        let body =
            r#"{"error": {"code": "unknown_topic", "message": "topic \"orders\" does not exist"}}"#;
        let error = decode_error(404, body);
        assert_eq!(error.code, "unknown_topic");
        assert_eq!(error.position, None);
        assert_eq!(
            error.to_string(),
            "error: unknown_topic: topic \"orders\" does not exist"
        );
    }

    #[test]
    fn decodes_sql_error_positions() {
        let body = r#"{"error": {"code": "sql_error", "message": "unknown stream 'x'", "line": 2, "column": 6, "statement": 0}}"#;
        let error = decode_error(400, body);
        assert_eq!(error.position, Some((2, 6)));
        assert_eq!(error.to_string(), "error: sql_error: unknown stream 'x'");
    }

    #[test]
    fn decodes_foreign_error_bodies() {
        assert_eq!(
            decode_error(502, "Bad gateway\n").to_string(),
            "error: http_502: Bad gateway"
        );
        assert_eq!(
            decode_error(500, "").to_string(),
            "error: http_500: HTTP status 500 with an empty body"
        );
    }

    #[test]
    fn parses_retry_after() {
        assert_eq!(parse_retry_after("1"), Some(Duration::from_secs(1)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("3600"), Some(MAX_RETRY_DELAY));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn encodes_path_segments() {
        assert_eq!(segment("orders.v1_a-b"), "orders.v1_a-b");
        assert_eq!(segment("my group/é"), "my%20group%2F%C3%A9");
    }

    #[test]
    fn base_url_gets_a_scheme_and_loses_trailing_slashes() {
        assert_eq!(Client::new("localhost:8080/").base, "http://localhost:8080");
        assert_eq!(Client::new("http://h:1").base, "http://h:1");
    }

    #[test]
    fn retries_overloaded_then_succeeds() {
        let server = FakeServer::start(vec![
            Canned::json(
                503,
                r#"{"error":{"code":"overloaded","message":"append queue full"}}"#,
            )
            .header("Retry-After", "0"),
            Canned::json(200, r#"{"ok":true}"#),
        ]);
        let client = Client::new(&server.url);
        let body = client.post("/v1/x", "application/json", "{}", &[]).unwrap();
        assert_eq!(body, r#"{"ok":true}"#);
        assert_eq!(server.requests().len(), 2);
    }

    #[test]
    fn gives_up_after_max_retries() {
        let overloaded = Canned::json(
            503,
            r#"{"error":{"code":"overloaded","message":"queue full"}}"#,
        )
        .header("Retry-After", "0");
        let server = FakeServer::start(vec![overloaded; MAX_RETRIES as usize + 1]);
        let error = Client::new(&server.url).get("/v1/topics", &[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "error: overloaded: queue full (after 10 retries)"
        );
        assert_eq!(server.requests().len(), MAX_RETRIES as usize + 1);
    }

    #[test]
    fn does_not_retry_503_without_retry_after() {
        let server = FakeServer::start(vec![Canned::json(
            503,
            r#"{"error":{"code":"shutting_down","message":"server is shutting down"}}"#,
        )]);
        let error = Client::new(&server.url).get("/v1/topics", &[]).unwrap_err();
        let api = error.downcast_ref::<ApiError>().unwrap();
        assert_eq!((api.status, api.code.as_str()), (503, "shutting_down"));
    }

    #[test]
    fn connection_refused_names_the_url() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let error = Client::new(&url)
            .get("/v1/topics", &[])
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!("cannot connect to {url} (")),
            "{error}"
        );
        assert!(error.ends_with("is `kappa serve` running?"), "{error}");
    }

    fn testdata(name: &str) -> PathBuf {
        std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("src/http/testdata")
        .join(name)
    }

    fn with_ca(url: &str, ca_cert: PathBuf) -> anyhow::Result<Client> {
        Client::connect(&ClientOptions {
            url: url.to_string(),
            ca_cert: Some(ca_cert),
            ..ClientOptions::default()
        })
    }

    #[test]
    fn an_unusable_ca_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        for path in [dir.path().join("missing.pem"), empty] {
            let error = format!("{:#}", with_ca("https://h:1", path.clone()).err().unwrap());
            assert!(error.contains(&path.display().to_string()), "{error}");
        }
        with_ca("https://h:1", testdata("a_cert.pem")).unwrap();
    }

    #[test]
    fn a_failed_tls_handshake_suggests_ca_cert_and_http() {
        // A plain-HTTP server: the handshake fails on its first bytes.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            use std::io::Write;
            let (mut stream, _) = listener.accept().unwrap();
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        });
        let client = with_ca(&url, testdata("a_cert.pem")).unwrap();
        let error = client.get("/health", &[]).unwrap_err().to_string();
        server.join().unwrap();
        assert!(
            error.starts_with(&format!("TLS handshake with {url} failed")),
            "{error}"
        );
        assert!(
            error.contains("--ca-cert") && error.contains("http://"),
            "{error}"
        );
    }

    #[test]
    fn sends_query_headers_and_body() {
        let server = FakeServer::start(vec![Canned::json(200, "{}")]);
        let client = Client::new(&server.url);
        let query = [("max_wait_ms", "10".to_string())];
        client.get("/v1/a%20b", &query).unwrap();
        let request = &server.requests()[0];
        assert_eq!(request.method, "GET");
        assert_eq!(request.target, "/v1/a%20b?max_wait_ms=10");
    }
}
