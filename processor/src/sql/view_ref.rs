//! `FROM` a table defined by a query: `CREATE TABLE b AS SELECT .. FROM a
//! GROUP BY ..` where `a` is `CREATE TABLE a AS SELECT ..`. The defining
//! query of `a` is put in place of its name as a subquery — `FROM (SELECT
//! ..) AS a` — and the statement is planned as a query over a subquery's
//! rows ([`super::subquery`]), the way Materialize inlines a view that is
//! not materialized.
//!
//! So the new table computes from the streams `a` reads, with state of its
//! own, and its rows are what a query over `a`'s rows gives. `a`'s
//! definition is copied when the statement is planned: replacing or
//! dropping `a` later does not change it. The subquery's limits hold: `a`
//! must aggregate a stream (not read a subquery or a declared table), and
//! the outer query aggregates its rows. A table whose `WITH` list changes
//! what its rows are (watermark, deduplication, late events, join history)
//! is refused: its query over the stream alone would give other rows.

use sqlparser::tokenizer::{Span, Token, TokenWithSpan};

use super::error::{Result, SqlError};
use super::lex::{self, Cursor, StatementTokens};
use super::statement;
use super::types::{CreateAs, ObjectKind};
use super::SourceCatalog;

/// `st` (a `CREATE .. AS` with no subquery) with the relation named at
/// `name` (its token's span) replaced by `view_sql`'s defining query as a
/// subquery read under that name (or under the alias `st` gives it).
/// Every token put in has the name's span, so an error in the definition
/// points at the name.
pub(crate) fn inline(
    st: &StatementTokens,
    name: Span,
    view: &str,
    view_sql: &str,
    has_alias: bool,
    catalog: &dyn SourceCatalog,
) -> Result<StatementTokens> {
    let refuse = |reason: String| Err(SqlError::span(name, reason));
    let Some(at) = st.tokens.iter().position(|t| t.span == name) else {
        return refuse(format!("table {view:?} could not be read as a subquery"));
    };
    let defined = lex::split(view_sql)?;
    let [definition] = defined.as_slice() else {
        return refuse(format!("table {view:?} has no single defining query"));
    };
    let (decl, parsed) = statement::parse_create_as(definition)?;
    if parsed.inner.is_some() {
        return refuse(format!(
            "table {view:?} reads a subquery: a query reads one level of query rows; write both levels here instead"
        ));
    }
    if let Some(table) = decl.sources.iter().find(|s| {
        catalog
            .source(s)
            .is_some_and(|d| d.kind == ObjectKind::Table)
    }) {
        return refuse(format!(
            "table {view:?} reads the declared table {table:?}: a subquery reads a stream; aggregate {table:?} here instead"
        ));
    }
    if let Some(other) = decl.sources.iter().find(|s| catalog.source(s).is_none()) {
        return refuse(format!(
            "table {view:?} reads {other:?}, which is not a stream: a query reads the rows of a table defined over streams, one level deep"
        ));
    }
    if let Some(property) = changes_rows(&decl) {
        return refuse(format!(
            "table {view:?} sets {property}, which a subquery cannot carry: write its query as a subquery here, with {property} in this statement's WITH list"
        ));
    }
    let query = select_tokens(definition)?;
    let mut tokens = Vec::with_capacity(st.tokens.len() + query.len() + 4);
    tokens.extend_from_slice(&st.tokens[..at]);
    let put = |token: Token| TokenWithSpan { token, span: name };
    tokens.push(put(Token::LParen));
    tokens.extend(query.iter().map(|t| put(t.token.clone())));
    tokens.push(put(Token::RParen));
    if !has_alias {
        tokens.push(put(Token::make_keyword("AS")));
        tokens.push(put(st.tokens[at].token.clone()));
    }
    tokens.extend_from_slice(&st.tokens[at + 1..]);
    Ok(StatementTokens {
        tokens,
        ..st.clone()
    })
}

/// The first property of `decl` that makes its rows differ from its query
/// over the stream alone.
fn changes_rows(decl: &CreateAs) -> Option<&'static str> {
    [
        (decl.watermark_delay_ms.is_some(), "WATERMARK_DELAY"),
        (decl.idle_timeout_ms.is_some(), "IDLE_TIMEOUT"),
        (decl.max_future_ms.is_some(), "MAX_FUTURE"),
        (decl.dedup.is_some(), "DEDUP_BY"),
        (decl.late_topic.is_some(), "LATE_TOPIC"),
        (decl.join_history_ms.is_some(), "JOIN_HISTORY"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

/// The tokens of a `CREATE .. AS` statement from its `SELECT` (or `WITH`)
/// on.
fn select_tokens(st: &StatementTokens) -> Result<&[TokenWithSpan]> {
    let mut c = Cursor::new(&st.tokens, st.end);
    while !c.at_end() {
        if !c.eat_kw("AS") {
            c.next_token();
        } else if c.is_kw("SELECT") || c.is_kw("WITH") {
            return Ok(c.rest());
        }
    }
    Err(c.expected("AS SELECT in the table's definition"))
}
