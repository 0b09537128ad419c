//! The SQL front end: ksqlDB-flavoured statements parsed into typed values
//! ([`Statement`]) and compiled into the same [`Plan`] the Rust DSL builds.
//!
//! The pipeline, one module per step:
//! - `lex`: tokenizes the whole input with `sqlparser`'s tokenizer (every
//!   token keeps its 1-based line and column) and splits it into statements.
//! - `ksql`: hand-parses what `sqlparser` cannot: `WITH (..)` properties,
//!   `WINDOW TUMBLING|HOPPING|SESSION (..)` with `GRACE PERIOD`, `EMIT
//!   CHANGES|FINAL`, durations (`5 MINUTES`).
//! - `limits`: what one statement may cost (tokens, expression depth and
//!   nodes), checked before anything recurses over it.
//! - `statement`: one statement's tokens into a [`Statement`] (the DDL by
//!   hand, queries through `sqlparser`); `query` checks a query's shape.
//! - `resolve` + `translate`: names and `sqlparser` expressions into
//!   [`crate::expr::Expr`].
//! - `planner` + `aggregate`: `CREATE .. AS SELECT` and a [`SourceCatalog`]
//!   into a [`Plan`].
//! - `pull`: pull queries (`SELECT` on a view) into [`PullQuery`].
//! - [`defaults`]: every default (watermark delay, idle timeout, grace,
//!   deduplication TTL) in one place.
//!
//! Identifier rule (documented in `docs/sql.md`): names of streams, tables
//! and views are case-insensitive unless quoted — unquoted ones are stored
//! lower-cased. Column references are matched case-insensitively against
//! the declared columns unless quoted (then exactly), and resolve to the
//! column's declared spelling, which is the JSON field name read.
//!
//! Positions: every [`SqlError`] carries the 1-based line and column in the
//! text given to [`parse`]; [`plan`] reports positions in that same text
//! (a [`CreateAs`] remembers where it started).

mod aggregate;
pub mod brief;
pub mod defaults;
mod error;
pub mod explain;
#[doc(hidden)]
pub mod fuzzing;
mod ksql;
mod lex;
mod limits;
mod planner;
mod pull;
mod pull_fast;
pub use pull_fast::{key_lookup, key_lookup_names, KeyLookupNames};
mod query;
mod resolve;
mod statement;
mod subquery;
mod top_n;
mod translate;
mod types;
mod view_ref;

#[cfg(test)]
mod marks;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_errors;
#[cfg(test)]
mod tests_limits;

pub use error::SqlError;
pub use limits::{
    MAX_KEEP_VERSIONS, MAX_NESTING_DEPTH, MAX_PARALLELISM, MAX_STATEMENT_TOKENS, SQL_STACK_BYTES,
};
pub use pull::{
    admits, eval_over, KeyCondition, KeyTest, PullAggregate, PullOrder, PullQuery, PullRead,
    ReadHow, TimeRange, MAX_PULL_OFFSET,
};
pub use types::{
    ColumnDecl, CreateAs, DedupDecl, Explain, InsertInto, ObjectKind, ShowWhat, SourceDecl,
    SqlType, Statement, VersionChange,
};

use crate::plan::Plan;

/// Looks up declared streams and tables by (normalized) name: what `FROM`
/// and `JOIN` refer to.
pub trait SourceCatalog {
    /// The declaration of `name` (already normalized: lower-cased unless it
    /// was quoted), if any.
    fn source(&self, name: &str) -> Option<SourceDecl>;

    /// The `CREATE TABLE .. AS` text of `name` when it is a table defined
    /// by a query (`FROM` it reads that query's rows as a subquery's).
    fn table_query(&self, _name: &str) -> Option<String> {
        None
    }
}

/// A catalog over a fixed list of declarations (tests, tools).
impl SourceCatalog for [SourceDecl] {
    fn source(&self, name: &str) -> Option<SourceDecl> {
        self.iter().find(|s| s.name == name).cloned()
    }
}

/// A catalog over a vector of declarations.
impl SourceCatalog for Vec<SourceDecl> {
    fn source(&self, name: &str) -> Option<SourceDecl> {
        self.as_slice().source(name)
    }
}

/// Parses one or more `;`-separated statements.
pub fn parse(sql: &str) -> Result<Vec<Statement>, SqlError> {
    if let Some(query) = pull_fast::key_lookup(sql) {
        return Ok(vec![Statement::Select(query)]);
    }
    statement::parse_all(sql)
}

/// The `CREATE STREAM .. AS` an `INSERT INTO` runs, writing to `topic` (the
/// target stream's): `CREATE STREAM <query id> WITH (KAFKA_TOPIC='topic')
/// AS <the SELECT>`, its errors pointing into the `INSERT`'s text.
pub fn insert_create(insert: &InsertInto, topic: &str) -> Result<CreateAs, SqlError> {
    let name = insert
        .query_id
        .clone()
        .unwrap_or_else(|| format!("insert_into_{}", insert.target));
    // The SELECT starts on the second line at its own column, so a
    // position in it is its position in the INSERT shifted by lines only.
    // An error about the whole statement points at the line before the
    // SELECT's (the first line when the statement is on one line).
    let text = format!(
        "CREATE STREAM \"{}\" WITH (KAFKA_TOPIC='{}') AS\n{}{}",
        name.replace('"', "\"\""),
        topic.replace('\'', "''"),
        " ".repeat(insert.column.saturating_sub(1) as usize),
        insert.select_sql
    );
    let shift = |e: SqlError| e.shifted(insert.line.saturating_sub(1), 1);
    match statement::parse_all(&text).map_err(shift)?.as_slice() {
        [Statement::CreateAs(create)] => Ok(CreateAs {
            line: insert.line.saturating_sub(1),
            column: 1,
            ..create.clone()
        }),
        _ => Err(SqlError::new(
            "expected one SELECT after INSERT INTO name",
            insert.line,
            insert.column,
        )),
    }
}

/// Compiles a `CREATE .. AS SELECT` into a validated plan, resolving its
/// `FROM` and `JOIN` sources through `catalog`.
pub fn plan(stmt: &CreateAs, catalog: &dyn SourceCatalog) -> Result<Plan, SqlError> {
    planner::plan(stmt, catalog)
}
