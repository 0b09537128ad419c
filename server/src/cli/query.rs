//! `kappa query`: read a view's rows — one key (and its windows in a time
//! range), a key prefix, or all — and print them as a table with the "as of"
//! line (input offsets and watermark the rows reflect), or as JSON. The row
//! table is also how the SQL shell prints a pull query's answer.

use std::io::Write;

use kappa_wire::{RowOut, RowsOut};
use serde_json::Value;

use super::http::{self, Client};
use super::table::{Align, Table};
use super::views::{time, view_path};

/// Arguments of `kappa query`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// The view (a table).
    pub view: String,
    /// Read the rows of this key (for a windowed view, every window of it).
    #[arg(conflicts_with = "prefix")]
    pub key: Option<String>,
    /// With a key: only windows starting at or after this time (ms or RFC 3339).
    #[arg(long, requires = "key")]
    pub from: Option<String>,
    /// With a key: only windows starting before this time (ms or RFC 3339).
    #[arg(long, requires = "key")]
    pub to: Option<String>,
    /// Read the rows whose key starts with this.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Most rows (the server allows 1..=10000; default 100).
    #[arg(long)]
    pub limit: Option<u64>,
    /// Read this version (served, building or replaced) instead of the served one.
    #[arg(long, conflicts_with = "after")]
    pub version: Option<u64>,
    /// Read-your-writes: wait until the view has processed these records
    /// (`partition:offset` pairs a produce answered, e.g. `0:17,2:5`).
    #[arg(long)]
    pub after: Option<String>,
    /// Print the server's JSON answer instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The query parameters of `args`.
pub fn query_params(args: &QueryArgs) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    let fields = [
        ("key", args.key.clone()),
        ("from", args.from.clone()),
        ("to", args.to.clone()),
        ("prefix", args.prefix.clone()),
        ("limit", args.limit.map(|l| l.to_string())),
        ("version", args.version.map(|v| v.to_string())),
        ("after", args.after.clone()),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            query.push((name, value));
        }
    }
    query
}

/// Runs `kappa query`, printing to `out`.
pub fn run(client: &Client, args: QueryArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = format!("{}/rows", view_path(&args.view));
    let body = client.get(&path, &query_params(&args))?;
    if args.json {
        writeln!(out, "{}", body.trim_end())?;
        return Ok(());
    }
    let answer: RowsOut = http::parse(&path, &body)?;
    out.write_all(render_rows(&answer.rows, &answer.columns).as_bytes())?;
    writeln!(out, "{}", summary(&answer, false))?;
    Ok(())
}

/// The row table: `KEY`, the window bounds (windowed views), then the row's
/// columns in `order` (the view's SELECT order; any others after them),
/// leaving out those that only repeat the key or a window bound.
pub fn render_rows(rows: &[RowOut], order: &[String]) -> String {
    let windowed = rows.iter().any(|r| r.window_start.is_some());
    let mut columns: Vec<String> = Vec::new();
    for row in rows {
        if let Value::Object(fields) = &row.row {
            for (name, value) in fields {
                if !columns.contains(name) && !repeats_key_or_window(row, value) {
                    columns.push(name.clone());
                }
            }
        }
    }
    let rank = |name: &String| order.iter().position(|o| o == name).unwrap_or(order.len());
    columns.sort_by_key(rank);
    let mut headers = vec![("KEY".to_string(), Align::Left)];
    if windowed {
        headers.push(("WINDOW_START".into(), Align::Left));
        headers.push(("WINDOW_END".into(), Align::Left));
    }
    let plain = rows.iter().any(|r| !r.row.is_object());
    if plain {
        headers.push(("VALUE".into(), Align::Left));
    }
    for name in &columns {
        let numeric = rows
            .iter()
            .all(|r| r.row.get(name).is_none_or(|v| v.is_number() || v.is_null()))
            && rows
                .iter()
                .any(|r| r.row.get(name).is_some_and(Value::is_number));
        headers.push((
            name.clone(),
            if numeric { Align::Right } else { Align::Left },
        ));
    }
    let spec: Vec<(&str, Align)> = headers.iter().map(|(h, a)| (h.as_str(), *a)).collect();
    let mut table = Table::new(&spec);
    for row in rows {
        let mut cells = vec![row.key.clone()];
        if windowed {
            cells.push(row.window_start.map(time).unwrap_or_default());
            cells.push(row.window_end.map(time).unwrap_or_default());
        }
        if plain {
            cells.push(if row.row.is_object() {
                String::new()
            } else {
                cell(&row.row)
            });
        }
        for name in &columns {
            cells.push(row.row.get(name).map(cell).unwrap_or_default());
        }
        table.row(cells);
    }
    table.render()
}

fn repeats_key_or_window(row: &RowOut, value: &Value) -> bool {
    match value {
        Value::String(s) => *s == row.key,
        Value::Number(n) => {
            let n = n.as_i64();
            n.is_some() && (n == row.window_start || n == row.window_end)
        }
        _ => false,
    }
}

/// A JSON value as a table cell: strings without quotes, the rest as JSON.
pub fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// `3 rows of purchase_stats version 1, as of offsets 0:120 1:33, watermark …`;
/// `truncated`: a pull query matched more rows than it answered.
pub fn summary(answer: &RowsOut, truncated: bool) -> String {
    let n = answer.rows.len();
    let offsets: Vec<String> = answer
        .as_of
        .offsets
        .iter()
        .map(|o| format!("{}:{}", o.partition, o.offset))
        .collect();
    let watermark = answer.as_of.watermark.map_or("none yet".into(), time);
    let mut text = format!(
        "{n} row{} of {} version {}, as of offsets {} (partition:offset), watermark {watermark}",
        if n == 1 { "" } else { "s" },
        answer.view,
        answer.version,
        if offsets.is_empty() {
            "-".to_string()
        } else {
            offsets.join(" ")
        },
    );
    if answer.next_cursor.is_some() || truncated {
        text.push_str(" (more rows match: raise --limit)");
    }
    if answer.catching_up {
        text.push_str("; the view is still catching up with its input: rows are partial");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};

    const ROWS: &str = r#"{"view": "purchase_stats", "version": 1, "columns": [],
 "rows": [{"key": "u1", "window_start": 1767225600000, "window_end": 1767225900000,
           "row": {"user_id": "u1", "window_start": 1767225600000, "window_end": 1767225900000,
                   "purchase_count": 2, "total_amount": 15.5, "avg_amount": 7.75}}],
 "next_cursor": null,
 "as_of": {"offsets": [{"partition": 0, "offset": 1200}, {"partition": 1, "offset": 7}], "watermark": 1767225595000}}"#;

    #[test]
    fn renders_rows_without_repeating_key_and_window() {
        let answer: RowsOut = serde_json::from_str(ROWS).unwrap();
        assert_eq!(
            render_rows(&answer.rows, &answer.columns),
            "KEY  WINDOW_START              WINDOW_END                avg_amount  purchase_count  total_amount\n\
             u1   2026-01-01T00:00:00.000Z  2026-01-01T00:05:00.000Z        7.75               2          15.5\n"
        );
        assert_eq!(
            summary(&answer, false),
            "1 row of purchase_stats version 1, as of offsets 0:1200 1:7 (partition:offset), \
             watermark 2025-12-31T23:59:55.000Z"
        );
    }

    #[test]
    fn partial_rows_of_a_view_catching_up_say_so() {
        let text = ROWS.replace(
            "\"next_cursor\": null,",
            "\"next_cursor\": null, \"catching_up\": true,",
        );
        let answer: RowsOut = serde_json::from_str(&text).unwrap();
        assert!(
            summary(&answer, false).ends_with("still catching up with its input: rows are partial")
        );
    }

    #[test]
    fn renders_unwindowed_and_plain_rows() {
        let rows: Vec<RowOut> = serde_json::from_str(
            r#"[{"key": "a", "row": {"n": 1, "tag": "x"}}, {"key": "b", "row": 5}]"#,
        )
        .unwrap();
        assert_eq!(
            render_rows(&rows, &[]),
            "KEY  VALUE  n  tag\na           1  x\nb    5\n"
        );
    }

    #[test]
    fn columns_follow_the_select_order() {
        let mut answer: RowsOut = serde_json::from_str(ROWS).unwrap();
        answer.columns = [
            "user_id",
            "window_start",
            "window_end",
            "total_amount",
            "purchase_count",
            "avg_amount",
        ]
        .map(String::from)
        .to_vec();
        let table = render_rows(&answer.rows, &answer.columns);
        let header = table.lines().next().unwrap();
        assert_eq!(
            header.split_whitespace().collect::<Vec<_>>(),
            [
                "KEY",
                "WINDOW_START",
                "WINDOW_END",
                "total_amount",
                "purchase_count",
                "avg_amount"
            ]
        );
    }

    #[test]
    fn sends_the_given_parameters() {
        let server = FakeServer::start(vec![Canned::json(200, ROWS)]);
        let args = QueryArgs {
            view: "purchase_stats".into(),
            key: Some("u 1".into()),
            from: Some("2026-01-01T00:00:00Z".into()),
            to: None,
            prefix: None,
            limit: Some(5),
            version: None,
            after: None,
            json: true,
        };
        let mut out = Vec::new();
        run(&Client::new(&server.url), args, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().trim_end(), ROWS.trim_end());
        assert_eq!(
            server.requests()[0].target,
            "/v1/views/purchase_stats/rows?key=u+1&from=2026-01-01T00%3A00%3A00Z&limit=5"
        );
    }
}
