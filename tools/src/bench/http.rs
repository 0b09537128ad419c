//! The HTTP side: one keep-alive HTTP/1.1 connection per task (hyper's
//! low-level client, no pool), whole answers read into memory, and the topic
//! admin calls the scenarios need (describe, create, delete).

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, RETRY_AFTER};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::TcpStream;

/// Where the server is: `host:port` to connect to and the `Host` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `host:port` for `TcpStream::connect`.
    pub addr: String,
    /// Value of the `Host` header.
    pub authority: String,
    /// `Authorization` header value (`Bearer <token>`) for a server with
    /// `auth = "tokens"`.
    pub authorization: Option<String>,
}

impl Target {
    /// Parses `http://host[:port]` (no path, no TLS).
    pub fn parse(url: &str) -> anyhow::Result<Target> {
        let uri: Uri = url
            .parse()
            .with_context(|| format!("--url {url:?} is not a URL"))?;
        if uri.scheme_str() != Some("http") {
            bail!("--url {url:?}: only http:// is supported");
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            bail!("--url {url:?}: give the server's root, without a path");
        }
        let host = uri
            .host()
            .ok_or_else(|| anyhow!("--url {url:?} has no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        Ok(Target {
            addr: format!("{host}:{port}"),
            authority: format!("{host}:{port}"),
            authorization: None,
        })
    }

    /// This target, sending `Authorization: Bearer <token>` on every request.
    pub fn with_token(mut self, token: Option<&str>) -> Target {
        self.authorization = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| format!("Bearer {t}"));
        self
    }
}

/// A complete HTTP answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// The `Retry-After` delay, when given in seconds.
    pub retry_after: Option<Duration>,
    /// The whole body.
    pub body: Bytes,
}

impl Answer {
    /// True for 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// An error naming the request, the status and the start of the body.
    pub fn error(&self, what: &str) -> anyhow::Error {
        let text = String::from_utf8_lossy(&self.body[..self.body.len().min(300)]).into_owned();
        anyhow!("{what}: HTTP {}: {}", self.status, text.trim())
    }
}

/// One keep-alive HTTP/1.1 connection, one request at a time.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    authority: String,
    authorization: Option<String>,
}

impl Conn {
    /// Connects (TCP_NODELAY) and starts the connection's driver task.
    pub async fn connect(target: &Target) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(&target.addr)
            .await
            .with_context(|| format!("connecting to {}", target.addr))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        // Ends when the sender is dropped or the server closes the connection.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            authority: target.authority.clone(),
            authorization: target.authorization.clone(),
        })
    }

    /// True once the server closed the connection (e.g. an idle keep-alive).
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Sends one request and reads the whole answer.
    pub async fn request(
        &mut self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> anyhow::Result<Answer> {
        self.sender.ready().await?;
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, &self.authority);
        if let Some(ct) = content_type {
            request = request.header(CONTENT_TYPE, ct);
        }
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization);
        }
        let response = self
            .sender
            .send_request(request.body(Full::new(body))?)
            .await?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> anyhow::Result<Answer> {
        self.request(Method::GET, path, None, Bytes::new()).await
    }
}

/// The parts of a topic description the benchmarks use.
#[derive(Debug, Clone, Deserialize)]
pub struct TopicInfo {
    /// Name.
    pub name: String,
    /// Settings.
    pub config: TopicSettings,
    /// Per-partition offsets.
    pub partitions: Vec<PartitionInfo>,
}

/// A topic's settings (a subset).
#[derive(Debug, Clone, Deserialize)]
pub struct TopicSettings {
    /// Number of partitions.
    pub partitions: u32,
    /// `always`, `interval` or `never`.
    pub fsync: String,
    /// Interval of the `interval` policy.
    pub fsync_interval_ms: u64,
}

/// One partition's offsets.
#[derive(Debug, Clone, Deserialize)]
pub struct PartitionInfo {
    /// Partition number.
    pub partition: u32,
    /// First stored offset.
    pub start_offset: u64,
    /// Offset the next record will get.
    pub end_offset: u64,
    /// Bytes on disk.
    pub bytes: u64,
}

impl TopicInfo {
    /// The partitions holding records (those a consume run reads).
    pub fn non_empty_partitions(&self) -> Vec<PartitionInfo> {
        self.partitions
            .iter()
            .filter(|p| p.end_offset > p.start_offset)
            .cloned()
            .collect()
    }

    /// Records stored (sum over partitions of end − start).
    pub fn records(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| p.end_offset - p.start_offset)
            .sum()
    }

    /// "4 partitions, fsync=interval (100 ms)".
    pub fn layout(&self) -> String {
        let c = &self.config;
        let fsync = if c.fsync == "interval" {
            format!("fsync=interval ({} ms)", c.fsync_interval_ms)
        } else {
            format!("fsync={}", c.fsync)
        };
        let s = if c.partitions == 1 { "" } else { "s" };
        format!("{} partition{s}, {fsync}", c.partitions)
    }
}

/// Describes a topic; `None` when it does not exist.
pub async fn describe_topic(conn: &mut Conn, topic: &str) -> anyhow::Result<Option<TopicInfo>> {
    let answer = conn.get(&format!("/v1/topics/{topic}")).await?;
    match answer.status {
        200 => Ok(Some(serde_json::from_slice(&answer.body)?)),
        404 => Ok(None),
        _ => Err(answer.error(&format!("describing topic {topic}"))),
    }
}

/// Deletes a topic; `false` when it did not exist.
pub async fn delete_topic(conn: &mut Conn, topic: &str) -> anyhow::Result<bool> {
    let path = format!("/v1/topics/{topic}");
    let answer = conn
        .request(Method::DELETE, &path, None, Bytes::new())
        .await?;
    match answer.status {
        200..=299 => Ok(true),
        404 => Ok(false),
        _ => Err(answer.error(&format!("deleting topic {topic}"))),
    }
}

/// Creates a topic from a `POST /v1/topics` body.
pub async fn create_topic(conn: &mut Conn, body: &serde_json::Value) -> anyhow::Result<TopicInfo> {
    let bytes = Bytes::from(serde_json::to_vec(body)?);
    let answer = conn
        .request(Method::POST, "/v1/topics", Some("application/json"), bytes)
        .await?;
    if !answer.is_success() {
        return Err(answer.error(&format!("creating topic {}", body["name"])));
    }
    Ok(serde_json::from_slice(&answer.body)?)
}

/// A produce scenario's topic before a run: with `recreate`, deleted
/// first; created from `create` (a `POST /v1/topics` body) on the first run
/// or after a delete; otherwise it must exist. Answers the topic.
pub async fn prepare_topic(
    target: &Target,
    topic: &str,
    create: Option<&serde_json::Value>,
    recreate: bool,
    first_run: bool,
) -> anyhow::Result<TopicInfo> {
    let mut conn = Conn::connect(target).await?;
    if recreate {
        delete_topic(&mut conn, topic).await?;
    }
    match create {
        Some(body) if first_run || recreate => create_topic(&mut conn, body).await,
        _ => describe_topic(&mut conn, topic)
            .await?
            .ok_or_else(|| anyhow::anyhow!("topic {topic:?} does not exist: pass --create")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_parsing() {
        let t = Target::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080");
        assert_eq!(t.authority, "127.0.0.1:8080");
        assert_eq!(
            Target::parse("http://localhost/").unwrap().addr,
            "localhost:80"
        );
        for bad in [
            "https://x:1",
            "127.0.0.1:8080",
            "http://x:1/v1",
            "nonsense url",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
