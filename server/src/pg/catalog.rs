//! PostgreSQL's catalogs (`pg_catalog`, `information_schema`) as clients
//! read them to discover what a server holds: `psql`'s `\d` commands,
//! drivers' metadata calls (pgjdbc's `DatabaseMetaData`), BI tools'
//! schema discovery (Grafana, Metabase).
//!
//! A query [`reads_catalog`] takes is parsed as PostgreSQL (`sqlparser`)
//! and evaluated here over in-memory relations built, per query, from
//! Kappa's catalog as the principal sees it — never matched against known
//! texts, so other clients' and versions' queries work too when they use
//! what is supported. What is not (an unknown function, relation or
//! construct) is an error naming it (SQLSTATE `0A000`, `42883`, `42P01`),
//! never a wrong answer.
//!
//! - [`detect`]: which queries are catalog queries.
//! - [`schema`]: the system relations served and the built-in types.
//! - [`relations`]: their rows, from Kappa's views.
//! - [`eval`]: queries (WHERE, grouping, ORDER BY, ..); [`from`]: their
//!   `FROM` clauses and joins.
//! - [`expr`]: expressions; [`functions`] and [`strings`]: PostgreSQL's
//!   functions.
//! - [`value`]: values, comparison, text format.
//!
//! Limits: expressions and subqueries nest at most [`MAX_DEPTH`] deep
//! (`54001`), and no intermediate result holds more than [`MAX_ROWS`]
//! rows (`54000`).

mod detect;
mod eval;
mod expr;
mod from;
mod functions;
mod relations;
mod schema;
mod strings;
mod value;

use pgwire::error::ErrorInfo;
use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::answer::Answer;
use crate::auth::Principal;
use crate::AppState;

pub use detect::reads_catalog;

/// Deepest nesting of expressions and subqueries a catalog query may have.
pub const MAX_DEPTH: usize = 64;

/// Most rows any intermediate result of a catalog query may hold (a join
/// of catalogs must not fill memory).
pub const MAX_ROWS: usize = 1_000_000;

/// Most statements in one catalog query string.
const MAX_STATEMENTS: usize = 16;

/// Why a catalog query has no answer: a SQLSTATE and a message.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogError {
    /// The SQLSTATE.
    pub code: &'static str,
    /// What went wrong, naming the object or construct.
    pub message: String,
}

impl CatalogError {
    /// An error with SQLSTATE `code`.
    pub fn new(code: &'static str, message: impl Into<String>) -> CatalogError {
        CatalogError {
            code,
            message: message.into(),
        }
    }

    /// A construct catalog queries do not support (`0A000`).
    pub fn unsupported(what: impl std::fmt::Display) -> CatalogError {
        CatalogError::new(
            "0A000",
            format!("{what} is not supported in catalog queries"),
        )
    }

    /// Values of types that do not go together (`42804`).
    pub fn mismatch(message: String) -> CatalogError {
        CatalogError::new("42804", message)
    }

    /// A string that is not a valid `what` (`22P02`).
    pub fn invalid_text(what: &str, text: &str) -> CatalogError {
        CatalogError::new(
            "22P02",
            format!("invalid input syntax for type {what}: \"{text}\""),
        )
    }

    /// Nesting beyond [`MAX_DEPTH`] (`54001`).
    pub fn too_deep() -> CatalogError {
        CatalogError::new(
            "54001",
            format!("statement too complex: nested more than {MAX_DEPTH} deep"),
        )
    }

    /// A result beyond [`MAX_ROWS`] (`54000`).
    pub fn too_many_rows() -> CatalogError {
        CatalogError::new(
            "54000",
            format!("a catalog query may not produce more than {MAX_ROWS} rows"),
        )
    }

    fn into_info(self) -> ErrorInfo {
        ErrorInfo::new("ERROR".into(), self.code.into(), self.message)
    }
}

/// The answers of `query`, a query [`reads_catalog`] took, over what
/// `principal` may see of `app`'s objects. Runs on a statement thread.
pub fn answer(
    app: &AppState,
    principal: &Principal,
    query: &str,
) -> Result<Vec<Answer>, Box<ErrorInfo>> {
    let catalog = relations::Catalog::of(app, principal);
    answer_over(&catalog, query).map_err(|e| Box::new(e.into_info()))
}

/// The answers of `query` over `catalog`.
fn answer_over(catalog: &relations::Catalog, query: &str) -> Result<Vec<Answer>, CatalogError> {
    let statements = Parser::new(&PostgreSqlDialect {})
        .with_recursion_limit(MAX_DEPTH)
        .try_with_sql(query)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| CatalogError::new("42601", e.to_string()))?;
    if statements.len() > MAX_STATEMENTS {
        return Err(CatalogError::new(
            "54000",
            format!("more than {MAX_STATEMENTS} statements in one query"),
        ));
    }
    statements
        .iter()
        .map(|statement| match statement {
            Statement::Query(q) => {
                let frame = eval::Evaluator::new(catalog).run(q)?;
                Ok(frame.into_answer())
            }
            other => Err(CatalogError::unsupported(format!(
                "the statement {}",
                other.to_string().split_whitespace().next().unwrap_or("")
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests;
