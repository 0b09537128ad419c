//! PostgreSQL's catalogs (`pg_catalog`, `information_schema`) as clients
//! read them to discover what a server holds: `psql`'s `\d` commands,
//! drivers' metadata calls, BI tools' schema discovery.
//!
//! Not built yet: [`reads_catalog`] answers `false`, so such queries reach
//! Kappa's own SQL and are refused there.

use pgwire::error::ErrorInfo;

use super::answer::Answer;
use crate::auth::Principal;
use crate::AppState;

/// Whether `query` reads PostgreSQL's catalogs and is answered here
/// rather than by Kappa's SQL.
pub fn reads_catalog(_query: &str) -> bool {
    false
}

/// The answers of `query`, a query [`reads_catalog`] took, over what
/// `principal` may see of `app`'s objects. Runs on a statement thread.
pub fn answer(
    _app: &AppState,
    _principal: &Principal,
    _query: &str,
) -> Result<Vec<Answer>, ErrorInfo> {
    Ok(Vec::new())
}
