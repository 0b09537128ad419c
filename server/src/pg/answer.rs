//! What a PostgreSQL client is answered: statement results as rows or
//! command tags, errors with their SQLSTATE, and the session statements
//! drivers and `psql` send on their own.
//!
//! Rows are sent in the text format. A view's column has the PostgreSQL
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

use crate::dto::statements::{
    ColumnOut, DescribedOut, ExplainedOut, SelectedOut, ShownOut, SqlType, StatementOut,
};
use crate::error::ApiError;
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

/// `e` (what HTTP would have answered) as a PostgreSQL error: its
/// SQLSTATE from its code and status, and a SQL error's position as the
/// character index into `query`.
pub fn api_error(e: &ApiError, query: &str) -> ErrorInfo {
    let code = match (e.code, e.status.as_u16()) {
        ("sql_error", _) if e.message.starts_with("unknown") => "42P01",
        ("sql_error", _) => "42601",
        ("invalid_plan", _) => "42P17",
        (_, 401) => "28000",
        (_, 403) => "42501",
        (_, 404) => "42P01",
        (_, 409) => "42P07",
        (_, 413) => "54000",
        (_, 503) => "57P03",
        (_, 507) => "53100",
        (_, 400) => "22023",
        _ => "XX000",
    };
    let mut info = error_info(code, e.message.clone());
    let at = |k: &str| e.details.get(k).and_then(Value::as_u64);
    if let (Some(line), Some(column)) = (at("line"), at("column")) {
        info.position = position(query, line, column).map(|p| p.to_string());
    }
    info
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
pub fn session_statement(query: &str) -> Option<Vec<Response>> {
    let text = query.trim().trim_end_matches(';').trim();
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let tag = |t: &str| Some(vec![Response::Execution(Tag::new(t))]);
    match words.as_slice() {
        ["set", ..] => tag("SET"),
        ["reset", ..] => tag("RESET"),
        ["discard", ..] => tag("DISCARD ALL"),
        ["begin", ..] | ["start", "transaction", ..] => {
            Some(vec![Response::TransactionStart(Tag::new("BEGIN"))])
        }
        ["commit", ..] | ["end", ..] => Some(vec![Response::TransactionEnd(Tag::new("COMMIT"))]),
        ["rollback", ..] | ["abort", ..] => {
            Some(vec![Response::TransactionEnd(Tag::new("ROLLBACK"))])
        }
        ["show", name] if !KAPPA_SHOWS.contains(name) => Some(vec![match setting(name) {
            Some(value) => one_value(name, value),
            None => error(error_info(
                "42704",
                format!("unrecognized configuration parameter \"{name}\""),
            )),
        }]),
        ["select", "version()"] => Some(vec![one_value(
            "version",
            &format!(
                "PostgreSQL {} on Kappa {}",
                super::session::SERVER_VERSION,
                env!("CARGO_PKG_VERSION")
            ),
        )]),
        ["select", "current_schema()"] | ["select", "current_schema"] => {
            Some(vec![one_value("current_schema", "public")])
        }
        ["select", "current_database()"] => Some(vec![one_value("current_database", "kappa")]),
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
fn one_value(column: &str, value: &str) -> Response {
    text_rows(
        &[(column.to_string(), Type::TEXT)],
        vec![vec![Some(value.to_string())]],
        "SELECT",
    )
}

/// Rows of text values under `columns` (name, type), tagged `command`.
fn text_rows(
    columns: &[(String, Type)],
    rows: Vec<Vec<Option<String>>>,
    command: &str,
) -> Response {
    let schema = Arc::new(
        columns
            .iter()
            .map(|(name, ty)| {
                FieldInfo::new(name.clone(), None, None, ty.clone(), FieldFormat::Text)
            })
            .collect::<Vec<_>>(),
    );
    let count = rows.len();
    let mut encoder = DataRowEncoder::new(schema.clone());
    let encoded: Vec<_> = rows
        .into_iter()
        .map(|row| {
            for value in &row {
                encoder.encode_field(value)?;
            }
            Ok(encoder.take_row())
        })
        .collect();
    let mut response = QueryResponse::new(schema, stream::iter(encoded));
    response.set_command_tag(&format!("{command} {count}"));
    Response::Query(response)
}

/// The responses of statements' results, one each.
pub fn results(app: &AppState, results: Vec<StatementOut>) -> Vec<Response> {
    results.into_iter().map(|r| result(app, r)).collect()
}

fn result(app: &AppState, result: StatementOut) -> Response {
    match result {
        StatementOut::Selected(selected) => selected_rows(app, selected),
        StatementOut::Shown(shown) => shown_rows(shown),
        StatementOut::Described(described) => described_rows(*described),
        StatementOut::Explained(explained) => explained_rows(explained),
        StatementOut::Declared(d) => Response::Execution(Tag::new(&d.statement)),
        StatementOut::Created(c) => Response::Execution(Tag::new(&c.statement)),
        StatementOut::Dropped(d) => Response::Execution(Tag::new(&d.statement)),
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

fn selected_rows(app: &AppState, selected: SelectedOut) -> Response {
    let rows = selected.rows;
    let types = view_columns(app, &rows.view);
    let columns: Vec<(String, Type)> = rows
        .columns
        .iter()
        .map(|name| {
            let t = types.iter().find(|c| &c.name == name);
            (name.clone(), pg_type(t.and_then(|c| c.sql_type.as_ref())))
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
    text_rows(&columns, values, "SELECT")
}

/// The output columns of view `name` with their types (empty when it is
/// gone).
fn view_columns(app: &AppState, name: &str) -> Vec<ColumnOut> {
    let catalog = app.views.catalog();
    catalog
        .views
        .get(name)
        .map(|v| crate::statements::view_columns(&v.served.plan))
        .unwrap_or_default()
}

fn shown_rows(shown: ShownOut) -> Response {
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
    text_rows(&columns, rows, "SHOW")
}

fn described_rows(described: DescribedOut) -> Response {
    let columns = [
        ("column".to_string(), Type::TEXT),
        ("type".to_string(), Type::TEXT),
        ("key".to_string(), Type::BOOL),
    ];
    let rows: Vec<Vec<Option<String>>> = match (&described.columns, &described.source) {
        (Some(cols), _) => cols
            .iter()
            .map(|c| {
                vec![
                    Some(c.name.clone()),
                    c.sql_type.as_ref().map(ToString::to_string),
                    Some(if c.key { "t" } else { "f" }.into()),
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
                    Some(if c.key { "t" } else { "f" }.into()),
                ]
            })
            .collect(),
        (None, None) => Vec::new(),
    };
    text_rows(&columns, rows, "DESCRIBE")
}

fn explained_rows(explained: ExplainedOut) -> Response {
    let rows = explained
        .text
        .lines()
        .map(|l| vec![Some(l.to_string())])
        .collect();
    text_rows(&[("QUERY PLAN".to_string(), Type::TEXT)], rows, "EXPLAIN")
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
