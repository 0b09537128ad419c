//! Pull queries (`SELECT .. FROM view [WHERE ..] [LIMIT n]`): the key
//! column check, the read of the served version (the rows that match the
//! key and window bounds, at most `LIMIT`) and the projection of the
//! selected columns.

use kappa_processor::plan::ColumnSource;
use kappa_processor::sql::PullQuery;
use serde_json::{json, Value};

use super::{Executor, StatementError};

/// Most rows a pull query examines (stored rows and open windows, matching
/// or not) before it answers what it found with `truncated: true`: window
/// bounds without a key are no key range, and a query finding few matches
/// must not walk a view of any size.
pub const MAX_PULL_QUERY_SCANNED: usize = 1_000_000;
use crate::dto::statements::SelectedOut;
use crate::dto::{RowOut, RowsOut};
use crate::nodes::rows;
use crate::views::RowsOutExt;
use crate::views::{RowsRequest, ViewError, MAX_ROWS_PER_PAGE};

impl Executor<'_> {
    /// Runs a pull query on the served version of its view: one read of
    /// the key range, with the window bounds applied inside it and at most
    /// [`MAX_PULL_QUERY_SCANNED`] rows examined.
    pub(super) fn select(&self, query: &PullQuery) -> Result<SelectedOut, StatementError> {
        self.check_key_column(query)?;
        let limit = query
            .limit
            .unwrap_or(MAX_ROWS_PER_PAGE)
            .min(MAX_ROWS_PER_PAGE);
        let request = RowsRequest {
            max_staleness: None,
            query: query.view_query(),
            filter: query.row_filter(Some(MAX_PULL_QUERY_SCANNED)),
            cursor: None,
            limit,
            version: None,
            after: Vec::new(),
            max_wait: std::time::Duration::ZERO,
        };
        let mut out = self.read(&query.view, &request)?;
        // More rows matched, or the scan cap stopped the read first.
        let truncated = out.next_cursor.is_some();
        let columns = query.columns.as_deref();
        out.rows = std::mem::take(&mut out.rows)
            .into_iter()
            .map(|row| project(row, columns))
            .collect();
        if let Some(selected) = &query.columns {
            out.columns = selected_columns(&out.columns, selected);
        }
        Ok(SelectedOut {
            statement: "SELECT".to_string(),
            rows: out,
            truncated,
        })
    }

    /// The rows `request` asks of `view`: from the nodes holding them when
    /// the view is spread over a Kappa cluster, else from this node.
    fn read(&self, view: &str, request: &RowsRequest) -> Result<RowsOut, StatementError> {
        if let Some(across) = &self.across {
            if let Some(spread) = self.views.spread_of(view, None)? {
                let incoming =
                    rows::Incoming::of_request(view, request, across.authorization.clone());
                return rows::rows(self.views, across.nodes, &incoming, request, &spread)
                    .map_err(|e| StatementError::Unavailable(e.message));
            }
        }
        let answer = self.views.rows(view, request)?;
        Ok(RowsOut::from_answer(view.to_string(), answer))
    }

    /// Checks that a pull query's `WHERE col = ..` names the view's one
    /// GROUP BY column: rows are looked up by that key.
    fn check_key_column(&self, query: &PullQuery) -> Result<(), StatementError> {
        let Some(column) = &query.key_column else {
            return Ok(());
        };
        let catalog = self.views.catalog();
        let Some(view) = catalog.views.get(&query.view) else {
            return Err(ViewError::UnknownView(query.view.clone()).into());
        };
        let keys: Vec<&str> = match view.served.plan.view_aggregate() {
            Some(a) => a
                .columns
                .iter()
                .filter(|(_, s)| matches!(s, ColumnSource::GroupKey(_)))
                .map(|(n, _)| n.as_str())
                .collect(),
            None => Vec::new(),
        };
        match keys.as_slice() {
            [key] if key.eq_ignore_ascii_case(column) => Ok(()),
            _ => Err(StatementError::BadRequest(format!(
                "a pull query on {:?} looks rows up by its key column {keys:?}, not {column:?}",
                query.view
            ))),
        }
    }
}

/// The names `project` gives the selected columns: a view column's own
/// name when one matches (case-insensitively), else the name as written.
fn selected_columns(view_columns: &[String], selected: &[String]) -> Vec<String> {
    selected
        .iter()
        .map(|c| {
            view_columns
                .iter()
                .find(|v| v.eq_ignore_ascii_case(c))
                .unwrap_or(c)
                .clone()
        })
        .collect()
}

/// The selected columns of a row (all when `columns` is None), matched
/// case-insensitively; `WINDOWSTART` / `WINDOWEND` are the window bounds.
fn project(row: RowOut, columns: Option<&[String]>) -> RowOut {
    let mut out = RowOut {
        window_end: row.window_start.and(row.window_end),
        ..row
    };
    let Some(columns) = columns else {
        return out;
    };
    let row = &out;
    let mut picked = serde_json::Map::new();
    for c in columns {
        if c.eq_ignore_ascii_case("windowstart") {
            picked.insert(c.clone(), json!(row.window_start));
        } else if c.eq_ignore_ascii_case("windowend") {
            picked.insert(c.clone(), json!(row.window_end));
        } else if let Some((k, v)) = row
            .row
            .as_object()
            .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(c)))
        {
            picked.insert(k.clone(), v.clone());
        } else {
            picked.insert(c.clone(), Value::Null);
        }
    }
    out.row = Value::Object(picked);
    out
}
