//! The extended query protocol (parse, bind, describe, execute): what
//! psycopg, node-postgres and most drivers use.
//!
//! A statement is its SQL text. Kappa's SQL has no parameters of its own,
//! so a portal's `$1`, `$2`, .. are replaced by its bound values as SQL
//! literals before it runs ([`bind`]): a number sent for a numeric
//! parameter type as itself, anything else as a quoted string, `NULL` as
//! `NULL`. Values come in the text format, or in the binary format of
//! their parameter type (read back to text, [`binary::parameter_text`]).
//!
//! A `Describe` must tell the result's columns before the `Execute`: a
//! statement that only reads (a pull query, `SHOW`, `DESCRIBE`,
//! `EXPLAIN`, a session statement) is run to find them, and its answer is
//! kept for the `Execute` of the same text that follows, so the rows a
//! client is sent are the rows that were described; any other statement
//! describes as returning no rows. Each result column is sent in the
//! format the `Bind` asks for, text or binary ([`super::binary`]).

use std::fmt::Debug;
use std::sync::PoisonError;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::results::{
    DescribePortalResponse, DescribeResponse, DescribeStatementResponse, FieldFormat, FieldInfo,
    Response,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;

use super::answer::Answer;
use super::binary;
use super::session::Connection;

/// Statements are their SQL text, parsed when they run.
#[derive(Debug, Default)]
pub struct TextParser;

#[async_trait]
impl QueryParser for TextParser {
    type Statement = String;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<String>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        Ok(sql.to_string())
    }

    fn get_parameter_types(&self, stmt: &String) -> PgWireResult<Vec<Type>> {
        Ok(vec![Type::UNKNOWN; parameter_count(stmt)])
    }

    fn get_result_schema(
        &self,
        _stmt: &String,
        _column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(Vec::new())
    }
}

fn user_error(info: Box<ErrorInfo>) -> PgWireError {
    PgWireError::UserError(info)
}

fn refuse(code: &str, message: &str) -> PgWireError {
    user_error(Box::new(ErrorInfo::new(
        "ERROR".into(),
        code.into(),
        message.into(),
    )))
}

/// Whether `sql` only reads: it may run to describe its result.
fn only_reads(sql: &str) -> bool {
    let first = sql
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        first.as_str(),
        "select" | "show" | "describe" | "explain" | "set" | "reset" | "begin" | "commit"
    )
}

/// The one answer of a portal's statement (the extended protocol runs
/// one statement per `Parse`).
fn one(answers: Vec<Answer>) -> PgWireResult<Answer> {
    let mut answers = answers.into_iter();
    match (answers.next(), answers.next()) {
        (Some(a), None) => Ok(a),
        (None, _) => Ok(Answer::Done("EMPTY".into())),
        (Some(_), Some(_)) => Err(refuse(
            "42601",
            "cannot insert multiple commands into a prepared statement",
        )),
    }
}

impl Connection {
    /// Runs `sql` (a statement with its parameters bound), or takes the
    /// answer a `Describe` of the same text kept.
    async fn answer(&self, sql: &str) -> PgWireResult<Answer> {
        let kept = {
            let mut kept = self
                .described
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match kept.take() {
                Some((text, answer)) if text == sql => Some(answer),
                _ => None,
            }
        };
        if let Some(answer) = kept {
            return Ok(answer);
        }
        let principal = self.current_principal().map_err(PgWireError::UserError)?;
        let answers = self
            .run(principal, sql)
            .await
            .map_err(PgWireError::UserError)?;
        one(answers)
    }

    /// The columns `sql` answers: run (and kept for its `Execute`) when it
    /// only reads; none otherwise.
    /// The columns `sql` answers, in the formats `formats` asks for (`None`:
    /// a statement's describe, before any `Bind`: text).
    async fn describe(&self, sql: &str, formats: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        if !only_reads(sql) {
            return Ok(Vec::new());
        }
        let answer = self.answer(sql).await?;
        let formats = match formats {
            Some(f) => column_formats(f, answer.column_count())?,
            None => Vec::new(),
        };
        let fields = answer.fields(&formats);
        *self
            .described
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((sql.to_string(), answer));
        Ok(fields)
    }
}

/// Checks a portal asks for text results.
/// The format of each of `count` result columns by a `Bind`'s result
/// format codes: none (all text), one (all in it), or one per column.
fn column_formats(format: &Format, count: usize) -> PgWireResult<Vec<FieldFormat>> {
    match format {
        Format::UnifiedText => Ok(vec![FieldFormat::Text; count]),
        Format::UnifiedBinary => Ok(vec![FieldFormat::Binary; count]),
        Format::Individual(codes) if codes.len() == count => {
            Ok(codes.iter().map(|c| FieldFormat::from(*c)).collect())
        }
        Format::Individual(codes) => Err(refuse(
            "08P01",
            &format!(
                "the Bind gave {} result format codes for {count} result columns",
                codes.len()
            ),
        )),
    }
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = String;
    type QueryParser = TextParser;

    fn query_parser(&self) -> std::sync::Arc<TextParser> {
        std::sync::Arc::new(TextParser)
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<String>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let count = parameter_count(&target.statement);
        let types = parameter_types(target, count);
        // Unbound parameters read as NULL: the columns do not depend on them.
        let nulls = vec![None; count];
        let sql = bind(&target.statement, &nulls, &types).map_err(user_error)?;
        // A statement that fails with NULLs (a key lookup, say) describes
        // no columns: the portal's `Describe` before each `Execute` tells
        // them.
        let fields = self.describe(&sql, None).await.unwrap_or_default();
        // The answer kept was for NULL parameters, not the ones to come.
        self.described
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if fields.is_empty() && types.is_empty() {
            return Ok(DescribeStatementResponse::no_data());
        }
        Ok(DescribeStatementResponse::new(types, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<String>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = bound(portal)?;
        let fields = self
            .describe(&sql, Some(&portal.result_column_format))
            .await?;
        Ok(DescribePortalResponse::new(fields))
    }

    async fn do_query<C>(
        &self,
        _client: &mut C,
        portal: &Portal<String>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = bound(portal)?;
        let answer = self.answer(&sql).await?;
        let formats = column_formats(&portal.result_column_format, answer.column_count())?;
        Ok(answer.into_response(&formats))
    }
}

/// The portal's statement with its parameters bound.
fn bound(portal: &Portal<String>) -> PgWireResult<String> {
    let types = parameter_types(&portal.statement, portal.parameters.len());
    let formats = parameter_formats(&portal.parameter_format, portal.parameters.len())?;
    let values: Vec<Option<String>> = portal
        .parameters
        .iter()
        .zip(&formats)
        .zip(&types)
        .map(|((p, format), ty)| match (p, format) {
            (None, _) => Ok(None),
            (Some(b), FieldFormat::Text) => Ok(Some(String::from_utf8_lossy(b).into_owned())),
            (Some(b), FieldFormat::Binary) => binary::parameter_text(b, ty)
                .map(Some)
                .map_err(|e| refuse("22P03", &e)),
        })
        .collect::<PgWireResult<_>>()?;
    bind(&portal.statement.statement, &values, &types).map_err(user_error)
}

/// The types of the first `count` parameters of `statement`: as its
/// `Parse` declared them, `text` where it did not.
fn parameter_types(statement: &StoredStatement<String>, count: usize) -> Vec<Type> {
    (0..count)
        .map(|i| {
            statement
                .parameter_types
                .get(i)
                .cloned()
                .flatten()
                .unwrap_or(Type::TEXT)
        })
        .collect()
}

/// The format of each of `count` parameters by a `Bind`'s parameter
/// format codes: none (all text), one (all in it), or one per parameter.
fn parameter_formats(format: &Format, count: usize) -> PgWireResult<Vec<FieldFormat>> {
    match format {
        Format::Individual(codes) if codes.len() != count => Err(refuse(
            "08P01",
            &format!(
                "the Bind gave {} parameter format codes for {count} parameters",
                codes.len()
            ),
        )),
        other => column_formats(other, count),
    }
}

/// The highest `$n` in `sql` outside quotes and comments.
fn parameter_count(sql: &str) -> usize {
    let mut highest = 0;
    scan(sql, |n| {
        highest = highest.max(n);
        String::new()
    });
    highest
}

/// `sql` with each `$n` (outside quotes and comments) replaced by the
/// literal of `values[n - 1]` of type `types[n - 1]`.
pub fn bind(
    sql: &str,
    values: &[Option<String>],
    types: &[Type],
) -> Result<String, Box<ErrorInfo>> {
    let mut missing = None;
    let out = scan(sql, |n| match values.get(n - 1) {
        None => {
            missing.get_or_insert(n);
            String::new()
        }
        Some(None) => "NULL".to_string(),
        Some(Some(v)) => literal(v, types.get(n - 1).unwrap_or(&Type::TEXT)),
    });
    match missing {
        Some(n) => Err(Box::new(ErrorInfo::new(
            "ERROR".into(),
            "08P01".into(),
            format!("there is no parameter ${n}: {} were bound", values.len()),
        ))),
        None => Ok(out),
    }
}

/// A bound value as a SQL literal: a number of a numeric type as itself,
/// a boolean as `TRUE`/`FALSE`, anything else quoted.
fn literal(value: &str, ty: &Type) -> String {
    let numeric = [
        Type::INT2,
        Type::INT4,
        Type::INT8,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::NUMERIC,
    ];
    if numeric.contains(ty) && value.parse::<f64>().is_ok_and(f64::is_finite) {
        return value.to_string();
    }
    if *ty == Type::BOOL {
        match value {
            "t" | "true" | "TRUE" => return "TRUE".into(),
            "f" | "false" | "FALSE" => return "FALSE".into(),
            _ => {}
        }
    }
    format!("'{}'", value.replace('\'', "''"))
}

/// Copies `sql`, replacing each `$n` outside quoted strings, quoted
/// identifiers and comments by `replace(n)`.
fn scan(sql: &str, mut replace: impl FnMut(usize) -> String) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for (_, d) in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek().is_some_and(|(_, d)| *d == '-') => {
                out.push(c);
                for (_, d) in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '$' if chars.peek().is_some_and(|(_, d)| d.is_ascii_digit()) => {
                let mut digits = String::new();
                while let Some((_, d)) = chars.peek().filter(|(_, d)| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                match digits.parse::<usize>() {
                    Ok(n) if n >= 1 => out.push_str(&replace(n)),
                    _ => {
                        out.push('$');
                        out.push_str(&digits);
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_become_literals_outside_quotes_and_comments() {
        let sql = "SELECT * FROM v WHERE k = $1 AND n > $2 -- $3\nAND s = '$1' AND t = $10";
        let mut values: Vec<Option<String>> = vec![Some("it's".into()), Some("5".into())];
        values.resize(10, None);
        let mut types = vec![Type::TEXT, Type::INT8];
        types.resize(10, Type::TEXT);
        assert_eq!(
            bind(sql, &values, &types).unwrap(),
            "SELECT * FROM v WHERE k = 'it''s' AND n > 5 -- $3\nAND s = '$1' AND t = NULL"
        );
        assert_eq!(parameter_count(sql), 10);
        // A number sent for a text parameter stays a string; a number
        // type's value that is not a number is quoted (and fails as SQL).
        assert_eq!(literal("5", &Type::TEXT), "'5'");
        assert_eq!(literal("5; DROP", &Type::INT8), "'5; DROP'");
        assert_eq!(literal("t", &Type::BOOL), "TRUE");
        // A value cannot end its string: quotes are doubled, and
        // backslashes are not escapes in Kappa's SQL.
        assert_eq!(literal("x' OR '1'='1", &Type::TEXT), "'x'' OR ''1''=''1'");
        assert_eq!(literal("x\\' --", &Type::TEXT), "'x\\'' --'");
        let e = bind("SELECT $2", &[Some("1".into())], &[Type::TEXT]).unwrap_err();
        assert!(e.message.contains("no parameter $2"), "{}", e.message);
    }

    #[test]
    fn only_reading_statements_run_to_be_described() {
        assert!(only_reads("  select * from v"));
        assert!(only_reads("SHOW TABLES"));
        assert!(!only_reads("CREATE TABLE t AS SELECT 1"));
        assert!(!only_reads("DROP TABLE t"));
    }
}
