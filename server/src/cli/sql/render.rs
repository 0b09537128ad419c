//! Prints one result of `POST /v1/statements` for a human: a table for
//! `SHOW`, `DESCRIBE` and pull queries, a one-line status for the others.
//! A result of a shape this client does not know is printed as JSON.

use kappa_wire::statements::SelectedOut;
use kappa_wire::ViewOut;
use serde_json::Value;

use crate::cli::query;
use crate::cli::table::{Align, Table};
use crate::cli::views;

/// The text for one statement result, ending in a newline.
pub fn render(result: &Value) -> String {
    let statement = result["statement"].as_str().unwrap_or_default();
    let text = match statement {
        "SELECT" => select(result),
        "DESCRIBE" => describe(result),
        "EXPLAIN" => result["text"].as_str().map(str::to_string),
        s if s.starts_with("SHOW") => show(result),
        s if s.starts_with("CREATE") || s.starts_with("DROP") || s == "INSERT INTO" => {
            Some(status(result))
        }
        "REPLAY" | "PROMOTE" | "ROLLBACK" => version_change(result),
        _ => None,
    };
    let text = text.unwrap_or_else(|| json_text(result));
    // A blank line after a table or description sets it apart from the next.
    if text.trim_end().contains('\n') {
        text + "\n"
    } else {
        text
    }
}

fn json_text(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()) + "\n"
}

fn field<'a>(result: &'a Value, name: &str) -> &'a str {
    result[name].as_str().unwrap_or("?")
}

/// One line for CREATE and DROP statements.
fn status(result: &Value) -> String {
    let statement = field(result, "statement");
    let name = field(result, "name");
    let kind = result["kind"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| {
            statement
                .split_whitespace()
                .nth(1)
                .unwrap_or("object")
                .to_lowercase()
        });
    let version = result["version"].as_u64();
    let line = match (field(result, "status"), version) {
        ("created", _) if result.get("topic").is_some() => {
            let mut line = format!(
                "created {kind} {name} over topic {}",
                field(result, "topic")
            );
            if result["topic_created"].as_bool() == Some(true) {
                line.push_str(" (topic created)");
            }
            line
        }
        ("created", Some(v)) => format!("created {kind} {name} (version {v})"),
        ("unchanged", Some(v)) => format!("{kind} {name} unchanged (version {v})"),
        ("unchanged", None) => format!("{kind} {name} unchanged"),
        ("building", Some(v)) => format!(
            "{kind} {name}: version {v} is building from the start of its input; the served \
             version answers until it catches up (follow it with `kappa views {name}`)"
        ),
        ("replaced", Some(v)) => format!("{kind} {name} replaced: version {v} took over"),
        ("dropped", _) => format!("dropped {kind} {name}"),
        ("not_found", _) => format!("{kind} {name} does not exist (nothing dropped)"),
        (other, _) => format!("{statement} {name}: {other}"),
    };
    line + "\n"
}

/// One line for REPLAY, PROMOTE and ROLLBACK: which version builds or
/// serves now.
fn version_change(result: &Value) -> Option<String> {
    let name = field(result, "name");
    let building = result["building_version"].as_u64();
    let served = result["served_version"].as_u64();
    let previous = result["previous_version"].as_u64();
    Some(match (building, served, previous) {
        (Some(v), _, _) => format!(
            "{name}: version {v} is building; the served version answers until it takes over \
             (follow it with `kappa views {name}`)\n"
        ),
        (None, Some(v), Some(p)) => format!("{name}: version {v} is served (was {p})\n"),
        (None, Some(v), None) => format!("{name}: version {v} is served\n"),
        (None, None, _) => format!("{name}: unchanged\n"),
    })
}

/// SHOW: a table of the rows' fields, in the order the server gives them
/// (`name` first).
fn show(result: &Value) -> Option<String> {
    let rows = result["rows"].as_array()?;
    let mut columns: Vec<String> = vec!["name".into()];
    for row in rows {
        for name in row.as_object()?.keys() {
            if !columns.contains(name) {
                columns.push(name.clone());
            }
        }
    }
    let headers: Vec<String> = columns.iter().map(|c| c.to_uppercase()).collect();
    let spec: Vec<(&str, Align)> = headers
        .iter()
        .zip(&columns)
        .map(|(h, c)| {
            let numeric = rows.iter().all(|r| r[c].is_number() || r[c].is_null())
                && rows.iter().any(|r| r[c].is_number());
            (h.as_str(), if numeric { Align::Right } else { Align::Left })
        })
        .collect();
    let mut table = Table::new(&spec);
    for row in rows {
        table.row(
            columns
                .iter()
                .map(|c| match &row[c] {
                    Value::Null => "-".into(),
                    v => query::cell(v),
                })
                .collect(),
        );
    }
    let n = rows.len();
    Some(format!(
        "{}{n} row{}\n",
        table.render(),
        if n == 1 { "" } else { "s" }
    ))
}

/// SELECT: the row table and the "as of" line.
fn select(result: &Value) -> Option<String> {
    let selected: SelectedOut = serde_json::from_value(result.clone()).ok()?;
    let answer = &selected.rows;
    Some(format!(
        "{}{}\n",
        query::render_rows(&answer.rows, &answer.columns),
        query::summary(answer, selected.truncated)
    ))
}

/// DESCRIBE: a view as `kappa views NAME` prints it and its columns, or a
/// declared source's columns; then the settings and the defaults, one
/// `key = value` line each.
fn describe(result: &Value) -> Option<String> {
    let mut out = if result.get("view").is_some() {
        let view: ViewOut = serde_json::from_value(result["view"].clone()).ok()?;
        let mut out = views::render_description(&view);
        if let Some(columns) = result["columns"].as_array() {
            out.push_str("columns:\n");
            out.push_str(&columns_table(columns));
        }
        out
    } else {
        source(&result["source"])?
    };
    for section in ["settings", "defaults"] {
        if let Some(values) = result[section].as_object() {
            let mut lines = Vec::new();
            for (key, value) in values {
                settings_lines(key, value, &mut lines);
            }
            out.push_str(&format!("{section}:\n"));
            for line in lines {
                out.push_str(&format!("  {line}\n"));
            }
        }
    }
    Some(out)
}

/// `key = value` lines of one setting; an object gives a line per field
/// (`window.size_ms = 300000`), a null none.
fn settings_lines(key: &str, value: &Value, lines: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::Object(fields) => {
            for (field, value) in fields {
                settings_lines(&format!("{key}.{field}"), value, lines);
            }
        }
        other => lines.push(format!("{key} = {}", compact(other))),
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn source(decl: &Value) -> Option<String> {
    let mut out = format!(
        "{}: {} over topic {}\n",
        decl["kind"].as_str()?,
        decl["name"].as_str()?,
        decl["topic"].as_str().unwrap_or("?")
    );
    if let Some(ts) = decl["timestamp"].as_str() {
        out.push_str(&format!("event time: {ts}\n"));
    }
    let columns = decl["columns"].as_array().cloned().unwrap_or_default();
    if columns.is_empty() {
        out.push_str("columns: none declared (schemaless)\n");
        return Some(out);
    }
    out.push_str(&columns_table(&columns));
    Some(out)
}

/// The COLUMN/TYPE table of declared or output columns (`{"name",
/// "sql_type", "key"}`); a column without a type holds any JSON value.
fn columns_table(columns: &[Value]) -> String {
    let mut table = Table::new(&[("COLUMN", Align::Left), ("TYPE", Align::Left)]);
    for column in columns {
        let mut name = column["name"].as_str().unwrap_or("?").to_string();
        if column["key"].as_bool() == Some(true) {
            name.push_str(" (key)");
        }
        let ty = match &column["sql_type"] {
            Value::Null => "any".to_string(),
            ty => serde_json::from_value::<kappa_processor::sql::SqlType>(ty.clone())
                .map_or_else(|_| compact(ty), |t| t.to_string()),
        };
        table.row(vec![name, ty]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_lines() {
        let r = |v: Value| render(&v);
        assert_eq!(
            r(
                json!({"statement": "CREATE STREAM", "name": "user_events", "kind": "stream",
                     "topic": "user_events", "status": "created", "topic_created": true})
            ),
            "created stream user_events over topic user_events (topic created)\n"
        );
        assert_eq!(
            r(
                json!({"statement": "CREATE TABLE AS", "name": "purchase_stats", "kind": "table",
                     "status": "created", "version": 1})
            ),
            "created table purchase_stats (version 1)\n"
        );
        assert!(r(
            json!({"statement": "CREATE TABLE AS", "name": "p", "kind": "table",
                         "status": "building", "version": 2})
        )
        .starts_with("table p: version 2 is building"));
        assert_eq!(
            r(json!({"statement": "DROP TABLE", "name": "p", "status": "dropped"})),
            "dropped table p\n"
        );
        assert_eq!(
            r(
                json!({"statement": "PROMOTE", "name": "p", "served_version": 2, "previous_version": 1})
            ),
            "p: version 2 is served (was 1)\n"
        );
        assert!(r(
            json!({"statement": "REPLAY", "name": "p", "building_version": 3, "from": "latest"})
        )
        .starts_with("p: version 3 is building"));
        assert_eq!(
            r(json!({"statement": "EXPLAIN", "x": 1})),
            "{\n  \"statement\": \"EXPLAIN\",\n  \"x\": 1\n}\n\n"
        );
    }

    #[test]
    fn show_is_a_table() {
        let text = render(&json!({"statement": "SHOW TABLES", "rows": [
            {"name": "purchase_stats", "kind": "table", "topic": null, "defined_by": "query", "version": 1}]}));
        assert_eq!(
            text,
            "NAME            DEFINED_BY  KIND   TOPIC  VERSION\n\
             purchase_stats  query       table  -            1\n1 row\n\n"
        );
    }

    #[test]
    fn select_is_a_row_table_with_as_of() {
        let text = render(&json!({"statement": "SELECT", "view": "v", "version": 1,
            "columns": [], "next_cursor": null,
            "rows": [{"key": "u1", "row": {"user_id": "u1", "n": 2}}],
            "as_of": {"offsets": [{"partition": 0, "offset": 3}], "watermark": null},
            "truncated": false}));
        assert_eq!(
            text,
            "KEY  n\nu1   2\n1 row of v version 1, as of offsets 0:3 (partition:offset), watermark none yet\n\n"
        );
    }

    #[test]
    fn describe_lists_columns_and_settings_lines() {
        let view: Value = serde_json::from_str(crate::cli::views::tests::VIEW).unwrap();
        let text = render(&json!({"statement": "DESCRIBE", "name": "v", "view": view,
            "columns": [
                {"name": "user", "sql_type": {"type": "varchar"}, "key": true},
                {"name": "total", "sql_type": {"type": "decimal", "precision": 38, "scale": 2}, "key": false},
                {"name": "raw", "sql_type": null, "key": false}],
            "settings": {"watermark_delay_ms": 0, "window": {"kind": "tumbling", "size_ms": 300000},
                "grace_ms": null, "late_events": "drop"},
            "defaults": {"GRACE": "0"}}));
        let tail = text.split_once("columns:\n").expect("a columns section").1;
        assert_eq!(
            tail,
            "COLUMN      TYPE\n\
             user (key)  VARCHAR\n\
             total       DECIMAL(38, 2)\n\
             raw         any\n\
             settings:\n  \
             late_events = drop\n  \
             watermark_delay_ms = 0\n  \
             window.kind = tumbling\n  \
             window.size_ms = 300000\n\
             defaults:\n  \
             GRACE = 0\n\n"
        );
    }
}
