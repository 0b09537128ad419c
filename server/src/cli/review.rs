//! `kappa promote` and `kappa rollback`: serve a view's version being
//! built now, or its previous version again.

use std::io::Write;

use serde::Deserialize;
use serde_json::json;

use super::http::Client;
use super::views::view_path;

/// The answer of promote and rollback.
#[derive(Debug, Deserialize)]
struct Served {
    served_version: u64,
    previous_version: u64,
}

/// `POST /v1/views/{view}/{action}` (`promote` or `rollback`), printing
/// which version now serves.
pub fn run(client: &Client, view: &str, action: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = format!("{}/{action}", view_path(view));
    let body = client.post_json(&path, &json!({}))?;
    let served: Served = super::http::parse(&path, &body)?;
    writeln!(
        out,
        "{view}: version {} is served (version {} is kept for rollback while its grace lasts)",
        served.served_version, served.previous_version
    )?;
    Ok(())
}
