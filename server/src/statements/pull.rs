//! Pull queries (`SELECT .. FROM view [WHERE ..] [ORDER BY ..] [LIMIT n]
//! [OFFSET m]`): which key range of the served version is read (the view's
//! key column decides, [`PullQuery::read`]), the conditions tested on each
//! row inside the read, the order, the offset, the aggregates, and the
//! projection of the selected columns.
//!
//! Every answer comes from one read, so from one snapshot of the view
//! (per worker store, as every read of a view): rows, aggregates and the
//! input offsets they reflect (`as_of`) agree. Rows the conditions reject
//! are examined inside the read, not sent anywhere; `ORDER BY .. DESC`
//! keeps the last rows of the range while reading it and an aggregate
//! folds the rows it reads, so neither holds more than its answer.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, PoisonError};

use kappa_processor::accumulators::{Accumulator, AggregateKind};
use kappa_processor::expr::Expr;
use kappa_processor::plan::ColumnSource;
use kappa_processor::sql::{self, PullAggregate, PullQuery, PullRead, ReadHow};
use kappa_processor::view::{row_key, ViewRow};
use serde_json::{json, Value};

use super::{Executor, StatementError};

/// Most rows a pull query examines (stored rows and open windows, matching
/// or not) before it answers what it found with `truncated: true`: window
/// bounds without a key are no key range, and a query finding few matches
/// must not walk a view of any size. An aggregate or `ORDER BY .. DESC`
/// that would examine more is refused (its answer would be wrong).
pub const MAX_PULL_QUERY_SCANNED: usize = 1_000_000;
use crate::dto::statements::{ExplainedOut, OperatorOut, SelectedOut, SqlType};
use crate::dto::{RowOut, RowsOut};
use crate::nodes::rows;
use crate::views::RowsOutExt;
use crate::views::{RowsRequest, RowsTest, ViewError, MAX_ROWS_PER_PAGE};

/// How a pull query runs on its view, once the view is known.
struct PullPlan {
    read: PullRead,
    /// `ORDER BY .. DESC`.
    descending: bool,
    /// The view's columns with their SQL types.
    columns: Vec<crate::dto::statements::ColumnOut>,
    /// The view's key column, if it has one.
    key_column: Option<String>,
}

impl Executor<'_> {
    /// Runs a pull query on the served version of its view: one read of
    /// the key range, with the window bounds and the other conditions
    /// applied inside it and at most [`MAX_PULL_QUERY_SCANNED`] rows
    /// examined.
    pub(super) fn select(&self, query: &PullQuery) -> Result<SelectedOut, StatementError> {
        let plan = self.pull_plan(query)?;
        let out = match &query.aggregates {
            Some(aggregates) => self.aggregate(query, &plan, aggregates)?,
            None if plan.descending => self.rows_descending(query, &plan)?,
            None => self.rows_ascending(query, &plan)?,
        };
        let truncated = out.next_cursor.is_some();
        Ok(SelectedOut {
            statement: "SELECT".to_string(),
            rows: out,
            truncated,
        })
    }

    /// Which key range `query` reads, and the checks of its `ORDER BY`
    /// and of a view spread over a Kappa cluster's nodes.
    fn pull_plan(&self, query: &PullQuery) -> Result<PullPlan, StatementError> {
        let Some((key_column, columns)) = self.views.with_view(&query.view, |view| {
            let plan = &view.served.plan;
            let keys: Vec<&str> = match plan.view_aggregate() {
                Some(a) => a
                    .columns
                    .iter()
                    .filter(|(_, s)| matches!(s, ColumnSource::GroupKey(_)))
                    .map(|(n, _)| n.as_str())
                    .collect(),
                None => Vec::new(),
            };
            let key_column = match keys.as_slice() {
                [key] => Some(key.to_string()),
                _ => None,
            };
            (key_column, crate::statements::view_columns(plan))
        }) else {
            return Err(ViewError::UnknownView(query.view.clone()).into());
        };
        let read = query.read(key_column.as_deref());
        let descending = match &query.order {
            None => false,
            Some(o) if key_column.as_deref().is_some_and(|k| k.eq_ignore_ascii_case(&o.column)) => {
                o.descending
            }
            Some(o) if o.column.eq_ignore_ascii_case("WINDOWSTART") && read.how == ReadHow::Lookup => {
                o.descending
            }
            Some(o) => {
                return Err(StatementError::BadRequest(format!(
                    "a pull query on {:?} answers in key order: ORDER BY {} [DESC], or ORDER BY WINDOWSTART [DESC] with WHERE {} = ..; not ORDER BY {}",
                    query.view,
                    key_column.as_deref().unwrap_or("its key"),
                    key_column.as_deref().unwrap_or("its key"),
                    o.column
                )))
            }
        };
        check_columns(query, &columns)?;
        let plain = read.residual.is_empty()
            && !descending
            && query.offset == 0
            && query.aggregates.is_none()
            && matches!(read.how, ReadHow::Lookup | ReadHow::Prefix | ReadHow::Scan);
        if !plain && self.spread(&query.view)? {
            return Err(StatementError::BadRequest(format!(
                "view {:?} is spread over a Kappa cluster's nodes: its pull queries read one key, a prefix or every row, with window bounds and LIMIT (conditions on other columns, key lists and ranges, ORDER BY .. DESC, OFFSET and aggregates read a view held by one node)",
                query.view
            )));
        }
        Ok(PullPlan {
            read,
            descending,
            columns,
            key_column,
        })
    }

    /// Whether `view` is spread over a Kappa cluster's nodes.
    fn spread(&self, view: &str) -> Result<bool, StatementError> {
        match &self.across {
            Some(_) => Ok(self.views.spread_of(view, None)?.is_some()),
            None => Ok(false),
        }
    }

    /// The rows in key order: `OFFSET + LIMIT` read, the first `OFFSET`
    /// dropped.
    fn rows_ascending(
        &self,
        query: &PullQuery,
        plan: &PullPlan,
    ) -> Result<RowsOut, StatementError> {
        let limit = row_limit(query);
        let residual = plan.read.residual.clone();
        let test = (!residual.is_empty())
            .then(|| RowsTest(Arc::new(move |row: &ViewRow| sql::admits(&residual, row))));
        let request = self.request(query, plan, query.offset + limit, test);
        let mut out = self.read(&query.view, &request)?;
        let rows = std::mem::take(&mut out.rows);
        out.rows = rows
            .into_iter()
            .skip(query.offset)
            .map(|row| project(row, query.columns.as_deref()))
            .collect();
        self.select_columns(query, &mut out);
        Ok(out)
    }

    /// The rows in descending key (or window) order: the whole range read
    /// once, the last `OFFSET + LIMIT` rows kept as it goes.
    fn rows_descending(
        &self,
        query: &PullQuery,
        plan: &PullPlan,
    ) -> Result<RowsOut, StatementError> {
        let limit = row_limit(query);
        let keep = query.offset + limit;
        let last: Arc<Mutex<BinaryHeap<Reverse<Ordered>>>> = Arc::default();
        let kept = last.clone();
        let mut out = self.visit_whole_range(query, plan, "ORDER BY .. DESC", move |row| {
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            kept.push(Reverse(Ordered(row_key(row), row.clone())));
            if kept.len() > keep {
                kept.pop();
            }
        })?;
        let kept = std::mem::take(&mut *last.lock().unwrap_or_else(PoisonError::into_inner));
        // Ascending order of `Reverse`: the rows in descending key order.
        out.rows = kept
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(o)| o)
            .skip(query.offset)
            .take(limit)
            .map(|Ordered(_, r)| project(row_out(r), query.columns.as_deref()))
            .collect();
        self.select_columns(query, &mut out);
        Ok(out)
    }

    /// One row of aggregates over the rows the query covers, folded as the
    /// read goes.
    fn aggregate(
        &self,
        query: &PullQuery,
        plan: &PullPlan,
        aggregates: &[PullAggregate],
    ) -> Result<RowsOut, StatementError> {
        let kinds: Vec<AggregateKind> = aggregates
            .iter()
            .map(|a| exact_kind(a, &plan.columns))
            .collect();
        let accumulators: Arc<Mutex<Vec<Accumulator>>> =
            Arc::new(Mutex::new(kinds.iter().map(|k| k.accumulator()).collect()));
        let args: Vec<(Option<Expr>, bool)> = aggregates
            .iter()
            .map(|a| (a.arg.clone(), a.kind == AggregateKind::CountAll))
            .collect();
        let folded = accumulators.clone();
        let mut out = self.visit_whole_range(query, plan, "an aggregate", move |row| {
            let mut accs = folded.lock().unwrap_or_else(PoisonError::into_inner);
            for (acc, (arg, count_all)) in accs.iter_mut().zip(&args) {
                let value = arg.as_ref().map_or(Value::Null, |e| sql::eval_over(e, row));
                acc.add(&value, *count_all, (0, 0));
            }
        })?;
        let accs = accumulators.lock().unwrap_or_else(PoisonError::into_inner);
        let mut row = serde_json::Map::new();
        for (a, acc) in aggregates.iter().zip(accs.iter()) {
            row.insert(a.name.clone(), acc.result());
        }
        out.columns = aggregates.iter().map(|a| a.name.clone()).collect();
        out.rows = match query.offset {
            0 => vec![RowOut {
                key: String::new(),
                window_start: None,
                window_end: None,
                row: Value::Object(row),
            }],
            _ => Vec::new(),
        };
        Ok(out)
    }

    /// Reads the whole range `query` covers under `plan`, handing `visit`
    /// each row that passes the conditions and answering none; refused for
    /// `what` when the range holds more rows than a read may examine (the
    /// visit would have missed some).
    fn visit_whole_range(
        &self,
        query: &PullQuery,
        plan: &PullPlan,
        what: &str,
        visit: impl Fn(&ViewRow) + Send + Sync + 'static,
    ) -> Result<RowsOut, StatementError> {
        let residual = plan.read.residual.clone();
        let test = RowsTest(Arc::new(move |row: &ViewRow| {
            if sql::admits(&residual, row) {
                visit(row);
            }
            false
        }));
        let out = self.read(&query.view, &self.request(query, plan, 1, Some(test)))?;
        match out.next_cursor {
            Some(_) => Err(whole_range_too_big(query, what)),
            None => Ok(out),
        }
    }

    /// The read of `query`'s key range under `plan`: its window bounds, at
    /// most [`MAX_PULL_QUERY_SCANNED`] rows examined, `limit` rows
    /// answered, `test` applied to each.
    fn request(
        &self,
        query: &PullQuery,
        plan: &PullPlan,
        limit: usize,
        test: Option<RowsTest>,
    ) -> RowsRequest {
        RowsRequest {
            max_staleness: None,
            query: plan.read.query.clone(),
            filter: query.row_filter(Some(MAX_PULL_QUERY_SCANNED)),
            cursor: None,
            limit,
            version: None,
            after: Vec::new(),
            max_wait: std::time::Duration::ZERO,
            test,
        }
    }

    /// Names the selected columns of `out` as [`project`] does.
    fn select_columns(&self, query: &PullQuery, out: &mut RowsOut) {
        if let Some(selected) = &query.columns {
            out.columns = selected_columns(&out.columns, selected);
        }
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

    /// `EXPLAIN SELECT ..`: how the pull query reads its view, without
    /// reading it.
    pub(super) fn explain_select(&self, query: &PullQuery) -> Result<ExplainedOut, StatementError> {
        let plan = self.pull_plan(query)?;
        let mut operators = vec![operator("read", read_detail(&plan))];
        if !query.window_start.is_unbounded() || !query.window_end.is_unbounded() {
            operators.push(operator(
                "filter",
                format!(
                    "window bounds inside the read: WINDOWSTART {}, WINDOWEND {}",
                    range_text(&query.window_start),
                    range_text(&query.window_end)
                ),
            ));
        }
        if !plan.read.residual.is_empty() {
            let conditions: Vec<String> =
                plan.read.residual.iter().map(|e| e.to_string()).collect();
            operators.push(operator(
                "filter",
                format!("on each row read: {}", conditions.join(" AND ")),
            ));
        }
        if let Some(aggregates) = &query.aggregates {
            let names: Vec<&str> = aggregates.iter().map(|a| a.text.as_str()).collect();
            operators.push(operator(
                "aggregate",
                format!(
                    "{} over the rows read, folded as they are read: one row",
                    names.join(", ")
                ),
            ));
        } else {
            let order = match (plan.descending, &query.order) {
                (true, _) => {
                    "descending key order: the whole range is read, the last rows kept".to_string()
                }
                (false, Some(o))
                    if !plan
                        .key_column
                        .as_deref()
                        .is_some_and(|k| k.eq_ignore_ascii_case(&o.column)) =>
                {
                    "window order of the one key (the read's own order)".to_string()
                }
                _ => "key order (the read's own order)".to_string(),
            };
            operators.push(operator("order", order));
            let limit = row_limit(query);
            operators.push(operator(
                "limit",
                match query.offset {
                    0 => format!("at most {limit} rows"),
                    n => format!("{n} rows skipped, then at most {limit}"),
                },
            ));
        }
        let text = std::iter::once(format!("pull query on view {:?}", query.view))
            .chain(
                operators
                    .iter()
                    .map(|o| format!("-> {}: {}", o.operator, o.detail)),
            )
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ExplainedOut {
            statement: "EXPLAIN".to_string(),
            name: query.view.clone(),
            operators,
            state_bytes: None,
            text,
        })
    }
}

/// Refuses a pull query naming a column its view does not have (in
/// `WHERE`, an aggregate or `ORDER BY`): a condition on a missing column
/// would quietly match nothing.
fn check_columns(
    query: &PullQuery,
    columns: &[crate::dto::statements::ColumnOut],
) -> Result<(), StatementError> {
    let known = |name: &str| {
        columns.iter().any(|c| c.name.eq_ignore_ascii_case(name))
            || name.eq_ignore_ascii_case("WINDOWSTART")
            || name.eq_ignore_ascii_case("WINDOWEND")
    };
    let mut named: Vec<String> = query
        .conditions
        .iter()
        .chain(
            query
                .aggregates
                .iter()
                .flatten()
                .filter_map(|a| a.arg.as_ref()),
        )
        .flat_map(|e| e.fields())
        .filter_map(|path| path.into_iter().next())
        .collect();
    named.extend(query.order.as_ref().map(|o| o.column.clone()));
    match named.into_iter().find(|n| !known(n)) {
        None => Ok(()),
        Some(unknown) => {
            let have: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            Err(StatementError::BadRequest(format!(
                "view {:?} has no column {unknown:?}: its columns are {}",
                query.view,
                have.join(", ")
            )))
        }
    }
}

/// The most rows `query` answers: its `LIMIT`, at most
/// [`MAX_ROWS_PER_PAGE`].
fn row_limit(query: &PullQuery) -> usize {
    query
        .limit
        .unwrap_or(MAX_ROWS_PER_PAGE)
        .min(MAX_ROWS_PER_PAGE)
}

/// A row and its stored key: ordered as the view stores rows.
struct Ordered(Vec<u8>, ViewRow);

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

fn row_out(r: ViewRow) -> RowOut {
    RowOut {
        key: r.key,
        window_start: r.window_start,
        window_end: r.window_end,
        row: r.row,
    }
}

/// The refusal of a query that must read its whole range (`what`) when the
/// range holds more rows than a read may examine.
fn whole_range_too_big(query: &PullQuery, what: &str) -> StatementError {
    StatementError::BadRequest(format!(
        "{what} reads every row of the range it covers, and the range of view {:?} holds more than {MAX_PULL_QUERY_SCANNED} rows: narrow it with a condition on the key",
        query.view
    ))
}

/// The aggregate kind of `a`: `SUM` and `AVG` of a `DECIMAL(p, s)` column
/// sum exactly, as in a view.
fn exact_kind(a: &PullAggregate, columns: &[crate::dto::statements::ColumnOut]) -> AggregateKind {
    let scale = a.column.as_ref().and_then(|c| {
        columns
            .iter()
            .find(|col| col.name.eq_ignore_ascii_case(c))
            .and_then(|col| match col.sql_type {
                Some(SqlType::Decimal { scale, .. }) => Some(scale),
                _ => None,
            })
    });
    match scale {
        Some(scale) => a.kind.for_decimal(scale),
        None => a.kind,
    }
}

fn operator(name: &str, detail: String) -> OperatorOut {
    OperatorOut {
        operator: name.to_string(),
        detail,
        runs_on: "the statement's thread".to_string(),
        state: None,
        state_entries: None,
    }
}

/// What the read of a pull query covers.
fn read_detail(plan: &PullPlan) -> String {
    use kappa_processor::view::ViewQuery as Q;
    let key = plan.key_column.as_deref().unwrap_or("key");
    let what = match &plan.read.query {
        Q::Key(k) | Q::KeyWindows { key: k, .. } => format!("{key} = {k:?}"),
        Q::Keys(keys) => {
            let shown: Vec<String> = keys.iter().take(5).map(|k| format!("{k:?}")).collect();
            let more = if keys.len() > 5 { ", .." } else { "" };
            format!("{key} IN ({}{more})", shown.join(", "))
        }
        Q::Prefix(p) => format!("{key} starting with {p:?}"),
        Q::Range { lower, upper } => format!(
            "{key} in {}{}, {}{}",
            if lower.as_ref().is_some_and(|l| l.1) {
                "["
            } else {
                "("
            },
            lower
                .as_ref()
                .map_or("..".to_string(), |l| format!("{:?}", l.0)),
            upper
                .as_ref()
                .map_or("..".to_string(), |u| format!("{:?}", u.0)),
            if upper.as_ref().is_some_and(|u| u.1) {
                "]"
            } else {
                ")"
            },
        ),
        Q::All => format!("every row, at most {MAX_PULL_QUERY_SCANNED} examined"),
    };
    format!(
        "{} of the served version's key order: {what}",
        plan.read.how.describe()
    )
}

/// A time range as `[from, to)` in epoch ms (`..` unbounded).
fn range_text(r: &kappa_processor::view::TimeRange) -> String {
    format!(
        "[{}, {})",
        r.from_ms.map_or("..".to_string(), |t| t.to_string()),
        r.to_ms.map_or("..".to_string(), |t| t.to_string())
    )
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
