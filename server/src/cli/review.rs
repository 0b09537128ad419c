//! `kappa diff`, `kappa promote` and `kappa rollback`: review how a view's
//! new version differs, serve it now, or serve the previous version again.

use std::io::Write;

use kappa_wire::{DiffOut, ServedOut};
use serde_json::json;

use super::http::Client;
use super::views::view_path;

/// `POST /v1/views/{view}/{action}` (`promote` or `rollback`), printing
/// which version now serves.
pub fn run(client: &Client, view: &str, action: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = format!("{}/{action}", view_path(view));
    let body = client.post_json(&path, &json!({}))?;
    let served: ServedOut = super::http::parse(&path, &body)?;
    writeln!(
        out,
        "{view}: version {} is served (version {} is kept for rollback while its grace lasts)",
        served.served_version, served.previous_version
    )?;
    Ok(())
}

/// Prints how version `candidate` (default: the one being built) of a view
/// differs from `base` (default: the served one): counts, then the first
/// `limit` differences side by side.
pub fn diff(
    client: &Client,
    view: &str,
    base: Option<u64>,
    candidate: Option<u64>,
    limit: u64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let path = format!("{}/diff", view_path(view));
    let mut query = vec![("limit", limit.to_string())];
    query.extend(base.map(|b| ("base", b.to_string())));
    query.extend(candidate.map(|c| ("candidate", c.to_string())));
    let answer: DiffOut = client.get_json(&path, &query)?;
    writeln!(
        out,
        "{view}: version {} against version {}: {} added, {} removed, {} changed, {} unchanged",
        answer.candidate.version,
        answer.base.version,
        answer.added,
        answer.removed,
        answer.changed,
        answer.unchanged
    )?;
    for e in &answer.examples {
        let window = match (e.window_start, e.window_end) {
            (Some(s), Some(end)) => format!(" [{s}, {end})"),
            _ => String::new(),
        };
        let side = |v: &Option<serde_json::Value>| match v {
            None | Some(serde_json::Value::Null) => "-".to_string(),
            Some(v) => v.to_string(),
        };
        writeln!(
            out,
            "  {:<8} {}{window}: {} -> {}",
            e.change,
            e.key,
            side(&e.base),
            side(&e.candidate)
        )?;
    }
    Ok(())
}
