//! What a PostgreSQL client is answered: statement results as rows or
//! command tags, errors with their SQLSTATE, and the session statements
//! drivers and `psql` send on their own.
//!
//! Rows are held in the text format and sent in it, or in the binary
//! format a `Bind` asks for ([`super::binary`]). A view's column has the PostgreSQL
//! type its SQL type maps to (`DESCRIBE` tells it): `BOOLEAN` → `bool`,
//! `INT`/`BIGINT` → `int8`, `DOUBLE` → `float8`, `DECIMAL` → `numeric`,
//! `VARCHAR` → `text`, `TIMESTAMP` → `timestamptz` (written
//! `YYYY-MM-DD HH:MM:SS.sss+00`); a column without one is `text` holding
//! the value as it reads over HTTP (a string as itself, anything else as
//! JSON).

use std::sync::Arc;

use futures::stream;
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::Type;
use pgwire::error::ErrorInfo;
use serde_json::Value;

use kappa_processor::sql::SqlError;

use super::binary::Cell;
use crate::auth::{Principal, Refusal};
use crate::dto::statements::{
    ColumnOut, DescribedOut, ExplainedOut, SelectedOut, ShownOut, SqlType, StatementOut,
    VersionChangedOut,
};
use crate::statements::run::{RunError, MAX_STATEMENTS};
use crate::statements::StatementError;
use crate::views::ViewError;
use crate::AppState;

/// An error answered in place of a statement's result.
pub fn error(info: ErrorInfo) -> Response {
    Response::Error(Box::new(info))
}

fn error_info(code: &str, message: impl Into<String>) -> ErrorInfo {
    ErrorInfo::new("ERROR".into(), code.into(), message.into())
}

/// A statement before the login finished.
pub fn not_logged_in() -> ErrorInfo {
    error_info("28000", "not logged in")
}

/// A statement of a connection whose token was revoked.
pub fn revoked() -> ErrorInfo {
    error_info(
        "28000",
        "the token of this connection was revoked: connect again with a valid one",
    )
}

/// A statement that could not be run at all (no statement thread).
pub fn internal(reason: String) -> ErrorInfo {
    error_info("XX000", reason)
}

/// Why `query`'s statements did not all run, as a PostgreSQL error: its
/// SQLSTATE and a SQL error's position (the character index into
/// `query`). A refusal is logged as HTTP's are; the administrative
/// statements that ran are audited.
pub fn run_error(e: RunError, principal: &Principal, query: &str) -> ErrorInfo {
    match e {
        RunError::Sql(e) => sql_error(&e, query),
        RunError::Empty => error_info("42601", "the query has no statements"),
        RunError::TooMany => error_info(
            "54000",
            format!("more than {MAX_STATEMENTS} statements in one query"),
        ),
        RunError::Refused { refusal, .. } => {
            let action = "run this statement";
            match refusal {
                Refusal::Unauthenticated => {
                    crate::auth::audit::denied("revoked", Some(&principal.name), action);
                    revoked()
                }
                Refusal::Missing(need) => {
                    crate::auth::audit::denied("forbidden", Some(&principal.name), action);
                    error_info(
                        "42501",
                        format!(
                            "token {:?} may not {action}: it needs the grant {}",
                            principal.name,
                            need.describe()
                        ),
                    )
                }
            }
        }
        RunError::Cluster(e) => statement_error(&e, query),
        RunError::Failed {
            index,
            error,
            audit,
        } => {
            let info = statement_error(&error, query);
            audit.record(principal, Some((index, audit_status(&info.code))));
            info
        }
    }
}

/// A failed statement's error and SQLSTATE.
fn statement_error(e: &StatementError, query: &str) -> ErrorInfo {
    let code = match e {
        StatementError::Sql(e) => return sql_error(e, query),
        StatementError::Log(_) => "58000",
        StatementError::View(v) => match v.as_ref() {
            ViewError::UnknownView(_)
            | ViewError::UnknownSource(_)
            | ViewError::UnknownVersion { .. } => "42P01",
            ViewError::Exists(_) => "42P07",
            ViewError::HasDependents { .. } => "2BP01",
            ViewError::InvalidPlan(_) => "42P17",
            ViewError::NotATable(_) => "42809",
            ViewError::BadRequest(_) => "22023",
            // dependent_objects_still_exist; else
            // object_not_in_prerequisite_state (nothing to promote, ..).
            ViewError::Refused {
                code: "has_dependents",
                ..
            } => "2BP01",
            ViewError::Refused { .. } => "55000",
            ViewError::Behind { .. } | ViewError::Closed | ViewError::Unavailable { .. } => "57P03",
            ViewError::Processor(_) | ViewError::Catalog(_) => "XX000",
        },
        StatementError::BadRequest(_) => "22023",
        StatementError::Unavailable(_) => "57P03",
        StatementError::OffsetOutOfRange(_) => "22023",
    };
    error_info(code, e.to_string())
}

/// A SQL error: undefined (`42P01`) when it names an unknown object, else
/// a syntax error (`42601`), with its position.
fn sql_error(e: &SqlError, query: &str) -> ErrorInfo {
    let code = match e.message.starts_with("unknown") {
        true => "42P01",
        false => "42601",
    };
    let mut info = error_info(code, e.message.clone());
    info.position = position(query, e.line, e.column).map(|p| p.to_string());
    info
}

/// The HTTP status an audit line shows for a statement that failed with
/// SQLSTATE `code` over PostgreSQL.
fn audit_status(code: &str) -> u16 {
    match code {
        "42501" => 403,
        "42P01" => 404,
        "42P07" | "2BP01" => 409,
        "57P03" => 503,
        "58000" | "XX000" => 500,
        _ => 400,
    }
}

/// The 1-based character index of `line`:`column` (both 1-based) in
/// `text`.
fn position(text: &str, line: u64, column: u64) -> Option<usize> {
    let mut index = 0;
    for (n, l) in text.split('\n').enumerate() {
        if n as u64 + 1 == line {
            let col = usize::try_from(column).ok()?.max(1);
            return Some(index + col.min(l.chars().count() + 1));
        }
        index += l.chars().count() + 1;
    }
    None
}

/// The answer to a session statement a client sends on its own (`SET`,
/// `SHOW` of a setting, `SELECT version()`, a transaction's `BEGIN` and
/// `COMMIT`), or `None` for a statement Kappa runs. Kappa's statements
/// take effect at once: a transaction groups nothing.
pub fn session_statement(query: &str) -> Option<Result<Answer, ErrorInfo>> {
    let text = query.trim().trim_end_matches(';').trim();
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let done = |t: &str| Some(Ok(Answer::Done(t.to_string())));
    match words.as_slice() {
        ["set", ..] => done("SET"),
        ["reset", ..] => done("RESET"),
        ["discard", ..] => done("DISCARD ALL"),
        ["begin", ..] | ["start", "transaction", ..] => Some(Ok(Answer::Begin)),
        ["commit", ..] | ["end", ..] => Some(Ok(Answer::End("COMMIT"))),
        // `ROLLBACK [WORK | TRANSACTION] [AND [NO] CHAIN]`; `ROLLBACK [TABLE]
        // name` is Kappa's statement.
        ["rollback"] | ["rollback", "work" | "transaction" | "and", ..] | ["abort", ..] => {
            Some(Ok(Answer::End("ROLLBACK")))
        }
        ["show", name] if !KAPPA_SHOWS.contains(name) => Some(match setting(name) {
            Some(value) => Ok(one_value(name, value)),
            None => Err(error_info(
                "42704",
                format!("unrecognized configuration parameter \"{name}\""),
            )),
        }),
        ["select", "version()"] => Some(Ok(one_value(
            "version",
            &format!(
                "PostgreSQL {} on Kappa {}",
                super::session::SERVER_VERSION,
                env!("CARGO_PKG_VERSION")
            ),
        ))),
        ["select", "current_schema()"] | ["select", "current_schema"] => {
            Some(Ok(one_value("current_schema", "public")))
        }
        ["select", "current_database()"] => Some(Ok(one_value("current_database", "kappa"))),
        _ => None,
    }
}

/// `SHOW` objects Kappa's SQL lists (`SHOW TABLES`, ..).
const KAPPA_SHOWS: [&str; 7] = [
    "streams", "tables", "views", "topics", "clusters", "queries", "sources",
];

/// The value of a setting drivers read (`SHOW name`).
fn setting(name: &str) -> Option<&'static str> {
    Some(match name {
        "server_version" => super::session::SERVER_VERSION,
        "server_encoding" | "client_encoding" => "UTF8",
        "standard_conforming_strings" => "on",
        "transaction_isolation" | "default_transaction_isolation" => "read committed",
        "timezone" => "UTC",
        "datestyle" => "ISO, MDY",
        "search_path" => "public",
        "integer_datetimes" => "on",
        "max_identifier_length" => "63",
        _ => return None,
    })
}

/// A one-row, one-column text answer.
fn one_value(column: &str, value: &str) -> Answer {
    Answer::Rows {
        columns: vec![(column.to_string(), Type::TEXT)],
        rows: vec![vec![Some(value.to_string())]],
        command: "SELECT",
    }
}

/// A statement's answer before it is encoded: what both query protocols
/// send, and what a `Describe` tells of it.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Rows of text values under named, typed columns, tagged `command`
    /// and their count.
    Rows {
        /// Name and type of each column.
        columns: Vec<(String, Type)>,
        /// The values (`None`: `NULL`), in PostgreSQL's text format.
        rows: Vec<Vec<Option<String>>>,
        /// The command tag's word (`SELECT`, `SHOW`, ..).
        command: &'static str,
    },
    /// A command tag without rows.
    Done(String),
    /// `BEGIN`.
    Begin,
    /// `COMMIT` or `ROLLBACK` (the tag).
    End(&'static str),
}

impl Answer {
    /// The number of columns of its rows (0: it has none).
    pub fn column_count(&self) -> usize {
        match self {
            Answer::Rows { columns, .. } => columns.len(),
            _ => 0,
        }
    }

    /// The row description a `Describe` answers (empty: no data), column
    /// `i` in `formats[i]` (text where `formats` ends).
    pub fn fields(&self, formats: &[FieldFormat]) -> Vec<FieldInfo> {
        match self {
            Answer::Rows { columns, .. } => fields(columns, formats),
            _ => Vec::new(),
        }
    }

    /// The response sending it, column `i` of its rows in `formats[i]`
    /// (text where `formats` ends).
    pub fn into_response(self, formats: &[FieldFormat]) -> Response {
        match self {
            Answer::Rows {
                columns,
                rows,
                command,
            } => encoded_rows(&columns, formats, rows, command),
            Answer::Done(tag) => Response::Execution(Tag::new(&tag)),
            Answer::Begin => Response::TransactionStart(Tag::new("BEGIN")),
            Answer::End(tag) => Response::TransactionEnd(Tag::new(tag)),
        }
    }
}

fn fields(columns: &[(String, Type)], formats: &[FieldFormat]) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            let format = formats.get(i).copied().unwrap_or(FieldFormat::Text);
            FieldInfo::new(name.clone(), None, None, ty.clone(), format)
        })
        .collect()
}

/// Rows of text values under `columns` (name, type), column `i` sent in
/// `formats[i]` (text where `formats` ends), tagged `command`. A value
/// that cannot be sent in binary ends the rows with an error naming it.
fn encoded_rows(
    columns: &[(String, Type)],
    formats: &[FieldFormat],
    rows: Vec<Vec<Option<String>>>,
    command: &str,
) -> Response {
    let schema = Arc::new(fields(columns, formats));
    let mut encoder = DataRowEncoder::new(schema.clone());
    let encoded: Vec<_> = rows
        .into_iter()
        .map(|row| {
            for value in &row {
                encoder.encode_field(&Cell(value.as_deref()))?;
            }
            Ok(encoder.take_row())
        })
        .collect();
    let mut response = QueryResponse::new(schema, stream::iter(encoded));
    response.set_command_tag(command);
    Response::Query(response)
}

/// What the last pull query answer of a connection reflected: its view and
/// the committed input offset of each input partition
/// (`SELECT * FROM kappa_offsets()`).
#[derive(Debug, Clone)]
pub struct Offsets {
    view: String,
    partitions: Vec<(u32, u64)>,
}

/// The offsets the last pull query among `results` reflects.
pub fn offsets_of(results: &[StatementOut]) -> Option<Offsets> {
    results.iter().rev().find_map(|r| match r {
        StatementOut::Selected(s) => Some(Offsets {
            view: s.rows.view.clone(),
            partitions: s
                .rows
                .as_of
                .offsets
                .iter()
                .map(|p| (p.partition, p.offset))
                .collect(),
        }),
        _ => None,
    })
}

/// Whether `query` asks for the offsets of the connection's last answer:
/// `SELECT * FROM kappa_offsets()` (any case, blanks and a final `;`).
pub fn asks_offsets(query: &str) -> bool {
    let words: String = query
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    words == "select * from kappa_offsets()"
}

/// The rows of `kappa_offsets()`: `view`, `partition`, `offset` (every
/// record of the partition before `offset` is in the answer), one per
/// input partition of the connection's last pull query; none before one.
pub fn offsets_rows(last: Option<&Offsets>) -> Answer {
    let rows = last
        .map(|o| {
            o.partitions
                .iter()
                .map(|(p, off)| {
                    vec![
                        Some(o.view.clone()),
                        Some(p.to_string()),
                        Some(off.to_string()),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    Answer::Rows {
        columns: vec![
            ("view".to_string(), Type::TEXT),
            ("partition".to_string(), Type::INT8),
            ("offset".to_string(), Type::INT8),
        ],
        rows,
        command: "SELECT",
    }
}

/// The answers of statements' results, one each.
pub fn results(app: &AppState, results: Vec<StatementOut>) -> Vec<Answer> {
    results.into_iter().map(|r| result(app, r)).collect()
}

fn result(app: &AppState, result: StatementOut) -> Answer {
    match result {
        StatementOut::Selected(selected) => selected_rows(app, selected),
        StatementOut::Shown(shown) => shown_rows(shown),
        StatementOut::Described(described) => described_rows(*described),
        StatementOut::Explained(explained) => explained_rows(explained),
        StatementOut::Declared(d) => Answer::Done(d.statement),
        StatementOut::Created(c) => Answer::Done(c.statement),
        StatementOut::Dropped(d) => Answer::Done(d.statement),
        StatementOut::VersionChanged(changed) => version_rows(changed),
    }
}

/// A version change's one row: the view, the version being built and
/// the ones served now and before (NULL where the change has none), under
/// the statement's tag (`REPLAY 1`, ..).
fn version_rows(changed: VersionChangedOut) -> Answer {
    let command = match changed.statement.as_str() {
        "PROMOTE" => "PROMOTE",
        "ROLLBACK" => "ROLLBACK",
        _ => "REPLAY",
    };
    let version = |v: Option<u64>| v.map(|v| v.to_string());
    Answer::Rows {
        columns: vec![
            ("name".to_string(), Type::TEXT),
            ("building_version".to_string(), Type::INT8),
            ("served_version".to_string(), Type::INT8),
            ("previous_version".to_string(), Type::INT8),
        ],
        rows: vec![vec![
            Some(changed.name),
            version(changed.building_version),
            version(changed.served_version),
            version(changed.previous_version),
        ]],
        command,
    }
}

/// The PostgreSQL type of a column of SQL type `t` (`None`: untyped).
fn pg_type(t: Option<&SqlType>) -> Type {
    match t {
        Some(SqlType::Boolean) => Type::BOOL,
        Some(SqlType::Integer | SqlType::BigInt) => Type::INT8,
        Some(SqlType::Double) => Type::FLOAT8,
        Some(SqlType::Decimal { .. }) => Type::NUMERIC,
        Some(SqlType::Timestamp) => Type::TIMESTAMPTZ,
        Some(SqlType::Varchar) | Some(SqlType::Json) | None => Type::TEXT,
    }
}

/// The type of a column that is not a view's (a pull query's aggregate):
/// `int8` when every value is a whole number, `numeric` when every value is
/// a number, `bool` when every one is a boolean, else `text` (`NULL`s and
/// missing values aside).
fn type_of_values<'a>(values: impl Iterator<Item = Option<&'a Value>>) -> Type {
    let mut ty: Option<Type> = None;
    for v in values.flatten() {
        let this = match v {
            Value::Null => continue,
            Value::Number(n) if n.is_i64() || n.is_u64() => Type::INT8,
            Value::Number(_) => Type::NUMERIC,
            Value::Bool(_) => Type::BOOL,
            _ => return Type::TEXT,
        };
        ty = Some(match (ty, this) {
            (None, t) => t,
            (Some(a), b) if a == b => a,
            (Some(Type::INT8 | Type::NUMERIC), Type::INT8 | Type::NUMERIC) => Type::NUMERIC,
            _ => return Type::TEXT,
        });
    }
    ty.unwrap_or(Type::TEXT)
}

/// `v` as the text of a value of type `ty` (`None`: SQL `NULL`).
fn text_value(v: &Value, ty: &Type) -> Option<String> {
    match v {
        Value::Null => None,
        Value::Bool(b) if *ty == Type::BOOL => Some(if *b { "t" } else { "f" }.to_string()),
        _ if *ty == Type::TIMESTAMPTZ => {
            let ms = kappa_processor::time::parse_timestamp(v)?;
            let iso = kappa_processor::time::format_timestamp(ms)?;
            Some(iso.replace('T', " ").replace('Z', "+00"))
        }
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn selected_rows(app: &AppState, selected: SelectedOut) -> Answer {
    let rows = selected.rows;
    let types = view_columns(app, &rows.view);
    let columns: Vec<(String, Type)> = rows
        .columns
        .iter()
        .map(|name| {
            let ty = match types.iter().find(|c| &c.name == name) {
                Some(c) => pg_type(c.sql_type.as_ref()),
                // An aggregate (or a window bound): typed by its values.
                None => type_of_values(rows.rows.iter().map(|r| r.row.get(name))),
            };
            (name.clone(), ty)
        })
        .collect();
    let values = rows
        .rows
        .iter()
        .map(|r| {
            columns
                .iter()
                .map(|(name, ty)| text_value(r.row.get(name).unwrap_or(&Value::Null), ty))
                .collect()
        })
        .collect();
    Answer::Rows {
        columns,
        rows: values,
        command: "SELECT",
    }
}

/// The output columns of view `name` with their types (empty when it is
/// gone).
fn view_columns(app: &AppState, name: &str) -> Vec<ColumnOut> {
    app.views
        .with_view(name, |v| crate::statements::view_columns(&v.served.plan))
        .unwrap_or_default()
}

fn shown_rows(shown: ShownOut) -> Answer {
    let objects: Vec<serde_json::Map<String, Value>> = shown
        .rows
        .iter()
        .filter_map(|r| match serde_json::to_value(r) {
            Ok(Value::Object(o)) => Some(o),
            _ => None,
        })
        .collect();
    // `name` first, then every other field in the order met.
    let mut names: Vec<String> = vec!["name".to_string()];
    for o in &objects {
        for k in o.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    let columns: Vec<(String, Type)> = names.iter().map(|n| (n.clone(), Type::TEXT)).collect();
    let rows = objects
        .iter()
        .map(|o| {
            names
                .iter()
                .map(|n| text_value(o.get(n).unwrap_or(&Value::Null), &Type::TEXT))
                .collect()
        })
        .collect();
    Answer::Rows {
        columns,
        rows,
        command: "SHOW",
    }
}

fn described_rows(described: DescribedOut) -> Answer {
    let columns = vec![
        ("column".to_string(), Type::TEXT),
        ("type".to_string(), Type::TEXT),
        ("key".to_string(), Type::BOOL),
    ];
    let flag = |b: bool| Some(if b { "t" } else { "f" }.to_string());
    let rows: Vec<Vec<Option<String>>> = match (&described.columns, &described.source) {
        (Some(cols), _) => cols
            .iter()
            .map(|c| {
                vec![
                    Some(c.name.clone()),
                    c.sql_type.as_ref().map(ToString::to_string),
                    flag(c.key),
                ]
            })
            .collect(),
        (None, Some(source)) => source
            .columns
            .iter()
            .map(|c| {
                vec![
                    Some(c.name.clone()),
                    Some(c.sql_type.to_string()),
                    flag(c.key),
                ]
            })
            .collect(),
        (None, None) => Vec::new(),
    };
    Answer::Rows {
        columns,
        rows,
        command: "DESCRIBE",
    }
}

fn explained_rows(explained: ExplainedOut) -> Answer {
    let rows = explained
        .text
        .lines()
        .map(|l| vec![Some(l.to_string())])
        .collect();
    Answer::Rows {
        columns: vec![("QUERY PLAN".to_string(), Type::TEXT)],
        rows,
        command: "EXPLAIN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_is_the_character_index_of_line_and_column() {
        assert_eq!(position("SELECT x", 1, 8), Some(8));
        assert_eq!(position("SELECT\n  é FROM", 2, 3), Some(10));
        assert_eq!(position("SELECT", 3, 1), None);
    }

    #[test]
    fn values_are_written_as_their_type_reads_them() {
        assert_eq!(text_value(&Value::Null, &Type::TEXT), None);
        assert_eq!(
            text_value(&serde_json::json!(true), &Type::BOOL).unwrap(),
            "t"
        );
        assert_eq!(
            text_value(&serde_json::json!(12), &Type::INT8).unwrap(),
            "12"
        );
        assert_eq!(
            text_value(
                &serde_json::json!(1_704_067_200_000_i64),
                &Type::TIMESTAMPTZ
            )
            .unwrap(),
            "2024-01-01 00:00:00.000+00"
        );
        assert_eq!(
            text_value(&serde_json::json!({"a": 1}), &Type::TEXT).unwrap(),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn session_statements_are_answered_and_kappas_run() {
        assert!(session_statement("SET extra_float_digits = 3").is_some());
        assert!(session_statement("show TimeZone;").is_some());
        assert!(session_statement("SHOW TABLES").is_none());
        assert!(session_statement("SELECT * FROM purchase_stats").is_none());
        assert!(session_statement("select version()").is_some());
    }
}
