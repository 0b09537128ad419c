//! View admin over the public API, for the scenarios that need a view:
//! run SQL (`POST /v1/statements`), describe a view (`GET /v1/views/{view}`)
//! and the few fields of the description the benchmarks read, drop what a
//! scenario created.

use anyhow::{bail, Context};
use bytes::Bytes;
use hyper::Method;

use super::http::Conn;

/// Runs SQL statements; fails on any non-2xx answer, naming the SQL.
pub async fn statements(conn: &mut Conn, sql: &str) -> anyhow::Result<serde_json::Value> {
    let answer = conn
        .request(
            Method::POST,
            "/v1/statements",
            Some("application/sql"),
            Bytes::from(sql.to_string()),
        )
        .await?;
    if !answer.is_success() {
        return Err(answer.error(&format!("running SQL `{sql}`")));
    }
    Ok(serde_json::from_slice(&answer.body)?)
}

/// `GET /v1/views/{view}`: the server's own answer type.
pub use kappa_wire::ViewOut as ViewInfo;

/// Describes a view; `None` when it does not exist.
pub async fn describe_view(conn: &mut Conn, view: &str) -> anyhow::Result<Option<ViewInfo>> {
    let answer = conn.get(&format!("/v1/views/{view}")).await?;
    match answer.status {
        200 => Ok(Some(
            serde_json::from_slice(&answer.body).context("parsing a view description")?,
        )),
        404 => Ok(None),
        _ => Err(answer.error(&format!("describing view {view}"))),
    }
}

/// Starts a replay from the earliest offsets; returns the version being built.
pub async fn replay_earliest(conn: &mut Conn, view: &str) -> anyhow::Result<u64> {
    let answer = conn
        .request(
            Method::POST,
            &format!("/v1/views/{view}/replay"),
            Some("application/json"),
            Bytes::from_static(br#"{"from":"earliest"}"#),
        )
        .await?;
    if answer.status != 202 {
        return Err(answer.error(&format!("replaying view {view}")));
    }
    let body: serde_json::Value = serde_json::from_slice(&answer.body)?;
    match body["building_version"].as_u64() {
        Some(v) => Ok(v),
        None => bail!("replay of {view} answered no building_version: {body}"),
    }
}

/// The stream declaration and the aggregate view both scenarios define over
/// `topic`: `COUNT(*)` per record key, optionally per tumbling window.
pub fn define_sql(topic: &str, stream: &str, view: &str, tumbling_secs: Option<u64>) -> String {
    let window = tumbling_secs.map_or(String::new(), |s| {
        format!(" WINDOW TUMBLING (SIZE {s} SECONDS)")
    });
    format!(
        "CREATE STREAM {stream} (user_id VARCHAR KEY, seq BIGINT) \
         WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');\n\
         CREATE TABLE {view} AS SELECT user_id, COUNT(*) AS n FROM {stream}{window} \
         GROUP BY user_id EMIT CHANGES;"
    )
}

/// Drops the view if it exists.
pub async fn drop_view(conn: &mut Conn, view: &str) -> anyhow::Result<()> {
    statements(conn, &format!("DROP TABLE IF EXISTS {view};")).await?;
    Ok(())
}

/// Drops the view, then the stream declaration (`IF EXISTS`, so a partial
/// setup is cleaned up too).
pub async fn drop_view_and_stream(conn: &mut Conn, stream: &str, view: &str) -> anyhow::Result<()> {
    statements(
        conn,
        &format!("DROP TABLE IF EXISTS {view}; DROP STREAM IF EXISTS {stream};"),
    )
    .await?;
    Ok(())
}

/// Rows per page when counting a view's rows (the API's largest page).
const ROWS_PAGE: usize = 10_000;

/// Rows of the served version of `view` and the sum of their `column`
/// (an integer column; rows without it add nothing), paging through them.
pub async fn rows_and_sum(conn: &mut Conn, view: &str, column: &str) -> anyhow::Result<(u64, u64)> {
    let (mut rows, mut sum) = (0u64, 0u64);
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/views/{view}/rows?limit={ROWS_PAGE}");
        if let Some(c) = &cursor {
            path.push_str("&cursor=");
            path.push_str(&percent_encode(c));
        }
        let answer = conn.get(&path).await?;
        if !answer.is_success() {
            return Err(answer.error(&format!("reading the rows of {view}")));
        }
        let page: kappa_wire::RowsOut =
            serde_json::from_slice(&answer.body).context("parsing rows")?;
        rows += page.rows.len() as u64;
        sum += page
            .rows
            .iter()
            .filter_map(|r| r.row[column].as_u64())
            .sum::<u64>();
        match page.next_cursor {
            Some(c) if !page.rows.is_empty() => cursor = Some(c),
            _ => return Ok((rows, sum)),
        }
    }
}

/// The read-your-writes read of `view` after the last record of every
/// non-empty partition (`ends`: (partition, end offset)), answered once
/// the view has committed them or after `max_wait_ms` (504); `None` when
/// every partition is empty.
pub fn read_after_ends_path(
    view: &str,
    ends: impl IntoIterator<Item = (u32, u64)>,
    max_wait_ms: u64,
) -> Option<String> {
    let after: Vec<String> = ends
        .into_iter()
        .filter(|&(_, end)| end > 0)
        .map(|(p, end)| format!("{p}:{}", end - 1))
        .collect();
    (!after.is_empty()).then(|| {
        format!(
            "/v1/views/{view}/rows?limit=1&max_wait_ms={max_wait_ms}&after={}",
            percent_encode(&after.join(","))
        )
    })
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_after_the_ends_skips_empty_partitions() {
        assert_eq!(
            read_after_ends_path("v", [(0, 5), (1, 0), (2, 1)], 100).as_deref(),
            Some("/v1/views/v/rows?limit=1&max_wait_ms=100&after=0%3A4%2C2%3A0")
        );
        assert_eq!(read_after_ends_path("v", [(0, 0)], 100), None);
        assert_eq!(percent_encode("a+b/c"), "a%2Bb%2Fc");
    }

    #[test]
    fn definition_sql_names_topic_stream_and_view() {
        let sql = define_sql("t", "s", "v", None);
        assert!(sql.contains("KAFKA_TOPIC='t'"), "{sql}");
        assert!(sql.contains("CREATE TABLE v AS SELECT user_id, COUNT(*) AS n FROM s GROUP BY"));
        let windowed = define_sql("t", "s", "v", Some(60));
        assert!(windowed.contains("FROM s WINDOW TUMBLING (SIZE 60 SECONDS) GROUP BY"));
    }

    #[test]
    fn view_description_parses_the_documented_shape() {
        let text = r#"{"name":"v","kind":"table","sql":"x","source_topic":"t","output_topic":null,
          "status":"building",
          "served_version":{"version":1,"sql":"x","started_ms":1,"running":true,
            "partitions":[{"partition":0,"committed":5,"end":5,"lag":0}],"lag":0,
            "watermark":null,"state_bytes":10,"processed":5,"late":0,"invalid":0,
            "parallelism":1,"workers":[],"catching_up":false,"not_keeping_up":false},
          "building_version":{"version":2,"sql":"x","started_ms":2,"running":true,
            "partitions":[],"lag":3,"watermark":null,"state_bytes":0,"processed":2,"late":0,
            "invalid":0,"parallelism":1,"workers":[],"catching_up":true,"not_keeping_up":false,
            "start":"earliest","swap":"auto","ready":false,"start_offsets":[0],"target_offsets":[5],
            "progress":{"done":2,"total":5,"rate_records_per_second":10.0,"eta_ms":300}},
          "grace_versions":[],"keep_versions":1,"version_grace_ms":0,"failure":null,
          "retry":null,"replay_horizon":{"complete":true,"topics":[]}}"#;
        let v: ViewInfo = serde_json::from_str(text).unwrap();
        assert_eq!(v.served_version.version, 1);
        let b = v.building_version.unwrap();
        assert_eq!(
            (b.version.version, b.progress.done, b.progress.total),
            (2, 2, 5)
        );
    }
}
