//! [`RawConnection`]: HTTP/1.1 over a plain TCP stream, byte for byte, for
//! request targets a URL library would normalize (`/v1/topics/../records`,
//! `%2e%2e`), pipelining, chunked bodies and half-sent requests.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::client::parse_body;
use crate::*;

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
        self.try_send_bytes(bytes).expect("writing the request");
    }

    /// Writes `bytes` as they are; the error when the server closed the
    /// connection (a server that cut a request off may have answered and
    /// closed between a check for its answer and this write).
    pub fn try_send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Writes one request (`Content-Length` added when there is a body).
    pub fn send(&mut self, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) {
        self.send_bytes(&request_bytes(method, target, headers, body));
    }

    /// True if nothing has arrived from the server yet (no answer, and the
    /// connection is not closed); does not wait.
    pub fn nothing_received(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        self.stream.set_nonblocking(true).expect("nonblocking");
        let mut byte = [0u8; 1];
        let waiting = matches!(
            self.stream.peek(&mut byte),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        self.stream.set_nonblocking(false).expect("blocking");
        waiting
    }

    /// True if the server closes the connection within `wait` (nothing
    /// received is consumed); false if it is still open then, or sent
    /// something.
    pub fn closed_within(&mut self, wait: Duration) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        self.stream
            .set_read_timeout(Some(wait))
            .expect("read timeout");
        let mut byte = [0u8; 1];
        let closed = match self.stream.peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        self.stream
            .set_read_timeout(Some(HTTP_TIMEOUT))
            .expect("read timeout");
        closed
    }

    /// Reads (and drops) whatever else arrives until the server closes the
    /// connection; panics if it stays open past the read timeout.
    pub fn wait_closed(&mut self) {
        self.buf.clear();
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
                Err(e) => panic!("waiting for the server to close the connection: {e}"),
            }
        }
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
