//! The logical plan of a processor: what it reads, how it turns events into
//! rows, and where the rows go. The Rust DSL ([`crate::dsl`]) and the SQL
//! front end both build this one type; the runtime executes it. It is plain
//! data (serializable) so the catalog can persist it.
//!
//! Operator order: source → event time → dedup → join → filter →
//! (aggregate, optionally windowed | projection) → sink.

use serde::{Deserialize, Serialize};

use crate::accumulators::AggregateKind;
use crate::expr::{DataType, Expr};
use crate::window::WindowSpec;
use serde_json::Value;

/// A processor definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Name of the processor and of the view or topic it feeds.
    pub name: String,
    /// The input topic and its event-time settings.
    pub source: SourceSpec,
    /// Drop events whose id was already seen within a time-to-live.
    pub dedup: Option<DedupSpec>,
    /// Enrich events with the latest row of a table (stream-table join),
    /// or join them with a stream's events (`JOIN .. WITHIN`).
    pub join: Option<JoinSpec>,
    /// Further tables joined after [`Plan::join`], in order: each
    /// enriches the events (or, after a join of two streams, its pairs)
    /// with the row its key had at the event's time, as `join` does. A
    /// key may read a table joined before it (`ON p.supplier_id = s.id`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_joins: Vec<JoinSpec>,
    /// Keep only events for which this is true.
    pub filter: Option<Expr>,
    /// What each event becomes.
    pub operation: Operation,
    /// Where results go.
    pub sink: Sink,
    /// What happens to events too late for their window.
    pub late: LateHandling,
    /// The Kafka cluster a [`Sink::Topic`] lives on (`CLUSTER` of a
    /// `CREATE STREAM .. AS`); `None`: the built-in log. Late side outputs
    /// go to the built-in log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink_cluster: Option<String>,
    /// `PARTITION BY`: a derived stream's output records are keyed (and so
    /// partitioned) by this expression's value as text instead of their
    /// input record's key; a `NULL` value gives a record without a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_by: Option<Expr>,
    /// An aggregate over the rows `operation` (an aggregate) makes — the
    /// outer query of a subquery or CTE in `FROM`: each change of one of
    /// those rows retracts its previous version and adds its new one
    /// ([`crate::operator::table_aggregate`]), and the view's rows are
    /// this aggregate's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<RowsAggregate>,
    /// The stage this plan is of a view spread over a Kappa cluster's
    /// nodes whose `GROUP BY` is not the record key (never set by SQL:
    /// [`crate::spread::repartition`] derives both stages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_stage: Option<SpreadStage>,
}

/// A stage of a view re-keyed through a repartition topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpreadStage {
    /// Each event passing the filter goes to `topic`, keyed by its group
    /// key, its value and record timestamp as read, with the input
    /// `partition` and its offset as its source; nothing is aggregated.
    Repartition {
        /// The repartition topic.
        topic: String,
        /// The input partition this stage reads.
        partition: u32,
    },
    /// The aggregate over the repartition topic: a record whose source
    /// position is not past the last one taken from that source is a
    /// repeat (the first stage replayed after a takeover) and dropped.
    AfterRepartition,
    /// [`SpreadStage::AfterRepartition`] of a view that joins a table:
    /// the first stage joined each event, and the row it joined comes in
    /// the record's header [`crate::spread::repartition::JOINED_HEADER`],
    /// under `alias`.
    AfterJoinedRepartition {
        /// The table's alias in the view's expressions.
        alias: String,
    },
}

impl SpreadStage {
    /// Whether this is the stage reading a repartition topic.
    pub fn reads_repartition(&self) -> bool {
        matches!(
            self,
            SpreadStage::AfterRepartition | SpreadStage::AfterJoinedRepartition { .. }
        )
    }
}

/// Where event time comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventTime {
    /// The record's timestamp (set by the producer, or the append time).
    RecordTimestamp,
    /// A field of the value: epoch milliseconds or an RFC 3339 string.
    Field(Vec<String>),
}

/// The input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceSpec {
    /// Topic read (all partitions).
    pub topic: String,
    /// The Kafka cluster the topic (and a joined table's topic) lives on,
    /// by the name the server configures it under; `None`: the built-in
    /// log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Event time.
    pub event_time: EventTime,
    /// Bounded out-of-orderness: the watermark trails the largest event
    /// time by this much.
    pub out_of_orderness_ms: i64,
    /// A partition without events for this long stops holding the watermark.
    pub idle_timeout_ms: i64,
    /// Event times later than the record's append time (log time) plus
    /// this are invalid: counted, sent to the late topic if there is one,
    /// and never applied to the watermark or state — one record with a
    /// far-future time would otherwise make every later event late.
    #[serde(default = "default_max_future_ms")]
    pub max_future_ms: i64,
    /// Declared types of top-level value fields (`CREATE STREAM s (amount
    /// DOUBLE, ..)`): a record with a non-null value of another type in one
    /// of them is invalid — counted and skipped, as ksqlDB skips a record
    /// it cannot deserialize ([`crate::expr::conforms`] says what fits).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub typed_fields: Vec<(String, DataType)>,
}

/// Default of [`SourceSpec::max_future_ms`]: 1 day.
pub const DEFAULT_MAX_FUTURE_MS: i64 = 86_400_000;

fn default_max_future_ms() -> i64 {
    DEFAULT_MAX_FUTURE_MS
}

/// Deduplication by an id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DedupSpec {
    /// The id of an event.
    pub id: Expr,
    /// How long (event time) an id is remembered.
    pub ttl_ms: i64,
}

/// Inner join keeps only matched events; left join keeps all (table
/// fields are then null); a full join of two streams also keeps the
/// joined stream's events that matched nothing (the stream's fields are
/// then null).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JoinKind {
    /// Only events with a table row.
    Inner,
    /// Every event.
    Left,
    /// Every event of both streams (stream-stream joins only).
    Full,
}

/// Stream-table join: the table is the latest value per record key of
/// another topic, kept in state. With [`JoinSpec::within`], a
/// stream-stream join: the other topic is a stream whose events join the
/// stream's events of the same key within a time bound
/// ([`crate::operator::stream_join`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinSpec {
    /// The topic materialized as the table (or the joined stream's topic).
    pub table_topic: String,
    /// The stream expression matched against the table's record key.
    pub stream_key: Expr,
    /// The table's value appears to expressions under this field name.
    pub alias: String,
    /// Inner or left.
    pub kind: JoinKind,
    /// The table's time column (its `TIMESTAMP='col'`): a table record's
    /// value holds from this time on; `None` = the record timestamp. Of a
    /// joined stream: its events' time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_time: Option<Vec<String>>,
    /// How far behind the watermark table history is kept (ms): the row
    /// that held at the horizon stands for all earlier time, so an event
    /// older than that joins it. `None`: the window's grace for windowed
    /// aggregates, else [`crate::operator::join::DEFAULT_HISTORY_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_ms: Option<i64>,
    /// Set for a stream-stream join (`JOIN .. WITHIN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<WithinSpec>,
}

impl JoinSpec {
    /// True if the joined topic is a stream (`JOIN .. WITHIN`).
    pub fn joins_stream(&self) -> bool {
        self.within.is_some()
    }
}

/// The time bound of a stream-stream join: an event of the stream at time
/// `t` joins the joined stream's events of the same key whose time is in
/// `[t - before_ms, t + after_ms]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WithinSpec {
    /// How much earlier than the stream's event a joined event may be.
    pub before_ms: i64,
    /// How much later than the stream's event a joined event may be.
    pub after_ms: i64,
    /// How far behind the watermark an event is still joined (`GRACE
    /// PERIOD`): an older one is late and dropped, and buffered events no
    /// later event can join are dropped from state.
    pub grace_ms: i64,
    /// The join key of the joined stream's events (the stream's is
    /// [`JoinSpec::stream_key`]); it reads their columns under
    /// [`JoinSpec::alias`], their record key as the column
    /// [`crate::event::JOINED_KEY_COLUMN`].
    pub joined_key: Expr,
    /// Declared types of the joined stream's top-level value fields, as
    /// [`SourceSpec::typed_fields`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub typed_fields: Vec<(String, DataType)>,
}

/// What each event becomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// One output row per event (a derived stream).
    Project {
        /// Output columns, in order.
        columns: Vec<(String, Expr)>,
    },
    /// Rows per group (and window).
    Aggregate(AggregateSpec),
}

/// Emit a window's row on every change, or once when it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Emit {
    /// EMIT CHANGES.
    Changes,
    /// EMIT FINAL.
    Final,
}

/// Windowing of an aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowedSpec {
    /// Window kind and sizes.
    pub window: WindowSpec,
    /// Allowed lateness after the watermark passes a window's end.
    pub grace_ms: i64,
    /// When rows appear.
    pub emit: Emit,
    /// How long a closed window's row is kept after the window's end
    /// (event time, against the watermark); `None` keeps rows forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<i64>,
}

/// One aggregate output column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggregateColumn {
    /// Column name.
    pub name: String,
    /// Function.
    pub kind: AggregateKind,
    /// Input (`None` for COUNT(*)).
    pub input: Option<Expr>,
}

/// Where an output column's value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnSource {
    /// The i-th GROUP BY expression's value.
    GroupKey(usize),
    /// The window's start (ms).
    WindowStart,
    /// The window's end (ms, exclusive).
    WindowEnd,
    /// The i-th aggregate.
    Aggregate(usize),
    /// An expression over the group's aggregates, group keys and window
    /// bounds (`SUM(x) / COUNT(*)`), which it reads as [`Expr::Column`]s
    /// named as [`AggregateSpec::inputs`] names them.
    Computed(Expr),
}

/// The name under which a [`ColumnSource::Computed`] expression reads the
/// i-th group key.
pub fn group_key_input(i: usize) -> String {
    format!("#key{i}")
}

/// The name under which a [`ColumnSource::Computed`] expression reads the
/// window's start.
pub const WINDOW_START_INPUT: &str = "#window_start";
/// The name under which a [`ColumnSource::Computed`] expression reads the
/// window's end.
pub const WINDOW_END_INPUT: &str = "#window_end";

/// The name of an aggregate that only a [`ColumnSource::Computed`]
/// expression reads (not selected itself): `#agg<i>`. `#` is not part of
/// an unquoted SQL name, and [`AggregateSpec::validate`] refuses an
/// output column named like an input.
pub fn hidden_aggregate(i: usize) -> String {
    format!("#agg{i}")
}

/// Grouped aggregation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggregateSpec {
    /// Group key expressions (empty = one global group).
    pub group_by: Vec<Expr>,
    /// Windowing, if any (else a running aggregate).
    pub window: Option<WindowedSpec>,
    /// The aggregates.
    pub aggregates: Vec<AggregateColumn>,
    /// Output columns, in order.
    pub columns: Vec<(String, ColumnSource)>,
    /// Keep only rows for which this is true; reads output columns by name.
    pub having: Option<Expr>,
}

impl AggregateSpec {
    /// What a [`ColumnSource::Computed`] expression reads, by name: each
    /// aggregate under its name, the i-th group key under
    /// [`group_key_input`], the window bounds under [`WINDOW_START_INPUT`]
    /// and [`WINDOW_END_INPUT`].
    pub fn inputs(
        &self,
        group: &[Value],
        window: Option<(i64, i64)>,
        results: impl Iterator<Item = Value>,
    ) -> serde_json::Map<String, Value> {
        let mut inputs = serde_json::Map::new();
        for (a, result) in self.aggregates.iter().zip(results) {
            inputs.insert(a.name.clone(), result);
        }
        for (i, v) in group.iter().enumerate() {
            inputs.insert(group_key_input(i), v.clone());
        }
        if let Some((start, end)) = window {
            inputs.insert(WINDOW_START_INPUT.to_string(), start.into());
            inputs.insert(WINDOW_END_INPUT.to_string(), end.into());
        }
        inputs
    }

    /// Whether a row needs [`AggregateSpec::inputs`]: an output column is
    /// computed, or HAVING reads a hidden input.
    pub fn computes(&self) -> bool {
        self.columns
            .iter()
            .any(|(_, s)| matches!(s, ColumnSource::Computed(_)))
            || self.having_reads_inputs()
    }

    /// Whether HAVING reads a hidden input (a `#` name) besides the output
    /// columns.
    pub fn having_reads_inputs(&self) -> bool {
        let mut reads = false;
        if let Some(h) = &self.having {
            h.walk(&mut |e| reads |= matches!(e, Expr::Column(n) if n.starts_with('#')));
        }
        reads
    }

    /// Whether grouping an event reads its record key: a group key or
    /// aggregate input reading `ROWKEY`.
    pub fn reads_key(&self) -> bool {
        let mut reads = false;
        let inputs = self.aggregates.iter().filter_map(|a| a.input.as_ref());
        for expr in self.group_by.iter().chain(inputs) {
            expr.walk(&mut |e| reads |= matches!(e, Expr::Key));
        }
        reads
    }
}

/// An aggregate over the rows of another aggregate (a table's changes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowsAggregate {
    /// Keep only inner rows for which this is true (the outer `WHERE`);
    /// reads the inner rows' columns as fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Expr>,
    /// The aggregate: unwindowed, its expressions reading the inner rows'
    /// columns as fields, its last aggregate the hidden `COUNT(*)`
    /// [`crate::operator::table_aggregate::ROWS_AGGREGATE`]. With
    /// [`RowsAggregate::top`]: the columns of the rows kept, each a
    /// `LATEST_BY_OFFSET` of its expression over the inner row (how a
    /// view stores a row's values), and no group.
    pub aggregate: AggregateSpec,
    /// Instead of aggregating: keep the first rows of each partition
    /// (`QUALIFY ROW_NUMBER() OVER (PARTITION BY .. ORDER BY ..) <= n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<TopSpec>,
    /// Instead of aggregating or ranking: each row passing the filter is a
    /// view row of `aggregate`'s columns, under the row's key — a query
    /// over a declared table's rows without `GROUP BY` (a filtered
    /// projection of the table, or a join of two tables).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub each_row: bool,
    /// The rows are a declared table's, each joined with the row of
    /// another declared table its `ON` expression names (a table-table
    /// join).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<RowsJoin>,
}

/// A join of a declared table's rows with another declared table's latest
/// rows, on the other table's key: a primary-key join when `on` is the
/// first table's key column, a foreign-key join when it is another
/// column (`crate::operator::tables_join`). Each joined row is the first
/// table's row with the other's row (or, for a left join without one,
/// `null`) under [`RowsJoin::alias`]; it is keyed by the first table's
/// key, and changes when either row does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowsJoin {
    /// The joined table's topic.
    pub topic: String,
    /// An expression over a row of the `FROM` table whose value, as text,
    /// is the key of the joined table's row it joins (`NULL`: none).
    pub on: Expr,
    /// The column the joined table's row appears under.
    pub alias: String,
    /// Inner (a row without a joined row is absent) or left.
    pub kind: JoinKind,
    /// The joined table's `PRIMARY KEY` column, read from its record key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_column: Option<String>,
}

/// Top-N per partition of a subquery's rows
/// ([`crate::operator::top_n`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopSpec {
    /// The partition of a row (`PARTITION BY`); empty: one partition.
    pub partition_by: Vec<Expr>,
    /// What rows are ranked by (`ORDER BY`).
    pub order_by: Expr,
    /// Largest first (`DESC`).
    pub descending: bool,
    /// How many ranks are kept (`<= n`).
    pub limit: u64,
    /// `RANK()`: rows tied with the last kept one are kept too; else
    /// `ROW_NUMBER()`: exactly `limit` rows, ties broken by the row's key.
    pub ties: bool,
}

/// Most ranks a top-N keeps per partition.
pub const MAX_TOP_N: u64 = 10_000;

/// The rows a [`RowsAggregate`] reads: what its plan's
/// [`Plan::operation`] makes of the input.
#[derive(Debug, Clone, Copy)]
pub enum InnerRows<'p> {
    /// The rows of an aggregate (a subquery or CTE in `FROM`).
    Aggregate(&'p AggregateSpec),
    /// A declared table's rows: a projection of each record of its topic,
    /// the latest per record key (a record with a null value deletes its
    /// key's row), as Kafka Streams reads a topic into a `KTable`.
    Table,
}

impl<'p> InnerRows<'p> {
    /// The inner rows of `plan`, if it aggregates (or ranks) rows.
    pub fn of(plan: &'p Plan) -> Option<InnerRows<'p>> {
        plan.then.as_ref()?;
        Some(match &plan.operation {
            Operation::Aggregate(spec) => InnerRows::Aggregate(spec),
            Operation::Project { .. } => InnerRows::Table,
        })
    }

    /// Whether each row reaches the outer aggregate once, never changed
    /// again: an inner aggregate's windows emit final rows.
    pub fn are_final(self) -> bool {
        match self {
            InnerRows::Aggregate(inner) => RowsAggregate::inner_rows_are_final(inner),
            InnerRows::Table => false,
        }
    }
}

impl RowsAggregate {
    /// Whether the rows of `inner` reach the outer aggregate once each:
    /// its windows emit final rows.
    pub fn inner_rows_are_final(inner: &AggregateSpec) -> bool {
        inner.window.as_ref().is_some_and(|w| w.emit == Emit::Final)
    }

    /// Checks it can aggregate (or rank) the rows of `inner`.
    pub fn validate(&self, inner: InnerRows<'_>) -> Result<(), String> {
        let a = &self.aggregate;
        if a.window.is_some() {
            return Err("an aggregate over a table's rows takes no WINDOW".into());
        }
        let mut reads_event = false;
        let top_exprs = self
            .top
            .iter()
            .flat_map(|t| t.partition_by.iter().chain([&t.order_by]));
        for e in a
            .group_by
            .iter()
            .chain(a.aggregates.iter().filter_map(|c| c.input.as_ref()))
            .chain(&self.filter)
            .chain(top_exprs)
        {
            e.walk(&mut |e| {
                reads_event |= matches!(e, Expr::Key | Expr::RecordTimestamp | Expr::Column(_))
            });
        }
        if reads_event {
            return Err(
                "a query over a table's rows (a subquery's or a declared table's) reads only the rows' columns (no ROWKEY or ROWTIME)"
                    .into(),
            );
        }
        if let InnerRows::Aggregate(inner) = inner {
            self.validate_inner(inner)?;
        }
        if let Some(j) = &self.join {
            if !matches!(inner, InnerRows::Table) {
                return Err("a join of rows joins a declared table's rows".into());
            }
            if j.kind == JoinKind::Full {
                return Err("a join of two tables is an inner or a left join".into());
            }
            let mut reads_event = false;
            j.on.walk(&mut |e| {
                reads_event |= matches!(e, Expr::Key | Expr::RecordTimestamp | Expr::Column(_))
            });
            if reads_event {
                return Err("a join of tables is ON the first table's columns".into());
            }
        }
        if self.each_row && self.top.is_some() {
            return Err("a query over rows either ranks them or shows each one".into());
        }
        if self.each_row {
            if !matches!(inner, InnerRows::Table) {
                return Err("each row of a subquery is shown by the subquery itself".into());
            }
            return self.validate_values();
        }
        if let Some(top) = &self.top {
            if top.limit == 0 || top.limit > MAX_TOP_N {
                return Err(format!(
                    "a top-N keeps 1 to {MAX_TOP_N} ranks per partition (got {})",
                    top.limit
                ));
            }
            return self.validate_values();
        }
        match a.aggregates.last() {
            Some(last)
                if last.name == crate::operator::table_aggregate::ROWS_AGGREGATE
                    && last.kind == AggregateKind::CountAll => {}
            _ => return Err("an aggregate over a table's rows ends with its row count".into()),
        }
        if let Some(k) = a.aggregates.iter().find(|c| c.kind.retracting().is_none()) {
            return Err(format!(
                "{} cannot aggregate a table's rows: they have no offsets (use MIN, MAX, COUNT, SUM, AVG or COUNT_DISTINCT)",
                match k.kind {
                    AggregateKind::Latest => "LATEST_BY_OFFSET",
                    _ => "EARLIEST_BY_OFFSET",
                }
            ));
        }
        a.validate()
    }

    /// Checks the view's rows are the values of its columns: no group,
    /// each aggregate a `LATEST_BY_OFFSET` of its column's expression.
    fn validate_values(&self) -> Result<(), String> {
        let a = &self.aggregate;
        let holds_values = a
            .aggregates
            .iter()
            .all(|c| c.kind == AggregateKind::Latest && c.input.is_some());
        if !a.group_by.is_empty() || !holds_values {
            return Err("the rows of a top-N or of a query over a table's rows without GROUP BY are its columns' values".into());
        }
        a.validate()
    }

    /// Checks the inner aggregate's rows can be followed.
    fn validate_inner(&self, inner: &AggregateSpec) -> Result<(), String> {
        if let Some(w) = &inner.window {
            if w.retention_ms.is_some() {
                return Err(
                    "a windowed subquery keeps its windows' rows: RETENTION is not supported there"
                        .into(),
                );
            }
            if matches!(w.window, crate::window::WindowSpec::Hopping { .. })
                && w.emit == Emit::Changes
            {
                return Err(
                    "a subquery over HOPPING windows feeds its windows' final rows: write EMIT FINAL"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

/// Where results go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sink {
    /// A queryable view named after the plan.
    View,
    /// Records appended to a topic.
    Topic(String),
}

/// Late events: older than their window's end plus grace at the watermark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LateHandling {
    /// Dropped and counted.
    Drop,
    /// Appended to this topic (and counted).
    SideOutput(String),
}

impl Plan {
    /// Whether it aggregates (or ranks) a declared table's rows
    /// ([`InnerRows::Table`]): its projection's rows, latest per key.
    pub fn reads_table_rows(&self) -> bool {
        matches!(InnerRows::of(self), Some(InnerRows::Table))
    }

    /// The topics of the tables (or stream) the plan joins, read beside
    /// its input, in join order: a stream's joined table or stream and
    /// its further tables, or the table a declared table's rows are
    /// joined with.
    pub fn joined_topics(&self) -> Vec<&str> {
        match (&self.join, &self.then) {
            (Some(join), _) => std::iter::once(join)
                .chain(&self.more_joins)
                .map(|j| j.table_topic.as_str())
                .collect(),
            (None, Some(rows)) => rows.join.iter().map(|j| j.topic.as_str()).collect(),
            (None, None) => Vec::new(),
        }
    }

    /// The aggregate whose rows the view holds: the query over rows'
    /// ([`Plan::then`]), else the plan's own; `None` for a projection.
    pub fn view_aggregate(&self) -> Option<&AggregateSpec> {
        match (&self.then, &self.operation) {
            (Some(rows), _) => Some(&rows.aggregate),
            (None, Operation::Aggregate(spec)) => Some(spec),
            (None, Operation::Project { .. }) => None,
        }
    }

    /// The expressions the plan evaluates on events: filter, dedup id,
    /// join key, `PARTITION BY`, and the projection's columns or the
    /// aggregate's group keys and inputs.
    fn event_exprs(&self) -> Vec<&Expr> {
        let mut exprs: Vec<&Expr> = Vec::new();
        exprs.extend(&self.filter);
        exprs.extend(self.dedup.as_ref().map(|d| &d.id));
        exprs.extend(
            self.join
                .iter()
                .chain(&self.more_joins)
                .map(|j| &j.stream_key),
        );
        exprs.extend(&self.partition_by);
        match &self.operation {
            Operation::Project { columns } => exprs.extend(columns.iter().map(|(_, e)| e)),
            Operation::Aggregate(a) => {
                exprs.extend(&a.group_by);
                exprs.extend(a.aggregates.iter().filter_map(|c| c.input.as_ref()));
            }
        }
        exprs
    }

    /// The top-level value fields the plan reads, or `None` if it reads
    /// whole values (so a record's value must be decoded in full).
    pub fn used_fields(&self) -> Option<Vec<String>> {
        let exprs = self.event_exprs();
        let mut paths: Vec<Vec<String>> = exprs.iter().flat_map(|e| e.fields()).collect();
        if let EventTime::Field(path) = &self.source.event_time {
            paths.push(path.clone());
        }
        let mut names: Vec<String> = Vec::new();
        for path in paths {
            let first = path.into_iter().next()?;
            if !names.contains(&first) {
                names.push(first);
            }
        }
        Some(names)
    }

    /// The top-level fields of a joined stream's values the plan reads
    /// (under the join's alias, its time column), or `None` if it reads
    /// them whole or joins no stream.
    pub fn joined_fields(&self) -> Option<Vec<String>> {
        let join = self.join.as_ref()?;
        let within = join.within.as_ref()?;
        self.fields_under(join, Some(&within.joined_key))
    }

    /// The top-level fields of a joined table's values the plan reads
    /// (under the join's alias, and its time column), or `None` if it
    /// reads them whole: what [`crate::operator::join::TableJoin`] keeps
    /// of each row.
    pub fn table_fields(&self, join: &JoinSpec) -> Option<Vec<String>> {
        self.fields_under(join, None)
    }

    /// The top-level fields the plan's expressions (and `extra`) read under
    /// `join`'s alias, with its time column; `None` if one reads the alias
    /// whole.
    fn fields_under(&self, join: &JoinSpec, extra: Option<&Expr>) -> Option<Vec<String>> {
        let mut exprs = self.event_exprs();
        exprs.extend(extra);
        let mut names: Vec<String> = join
            .table_time
            .iter()
            .filter_map(|p| p.first().cloned())
            .collect();
        let mut whole = false;
        for e in exprs {
            e.walk(&mut |e| {
                if let Expr::Field(path) = e {
                    match path.as_slice() {
                        [alias] if *alias == join.alias => whole = true,
                        [alias, name, ..] if *alias == join.alias && !names.contains(name) => {
                            names.push(name.clone());
                        }
                        _ => {}
                    }
                }
            });
        }
        (!whole).then_some(names)
    }

    /// Checks the plan is executable: windows valid, grace and TTLs not
    /// negative, column references in range, names non-empty.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.source.topic.is_empty() {
            return Err("a plan needs a name and a source topic".into());
        }
        if self.source.out_of_orderness_ms < 0 || self.source.idle_timeout_ms <= 0 {
            return Err("out-of-orderness must be >= 0 and the idle timeout > 0".into());
        }
        if self.source.max_future_ms < 0 {
            return Err(format!(
                "MAX_FUTURE must not be negative (got {} ms)",
                self.source.max_future_ms
            ));
        }
        if let Some(d) = &self.dedup {
            if d.ttl_ms <= 0 {
                return Err("the deduplication TTL must be positive".into());
            }
        }
        if let Some(j) = &self.join {
            match &j.within {
                Some(w) if w.before_ms < 0 || w.after_ms < 0 || w.grace_ms < 0 => {
                    return Err("a join's time bound and grace period must not be negative".into())
                }
                None if j.kind == JoinKind::Full => {
                    return Err("a full join needs two streams (JOIN .. WITHIN)".into())
                }
                _ => {}
            }
        }
        if !self.more_joins.is_empty() && self.join.is_none() {
            return Err("further joins follow a first join".into());
        }
        if self
            .more_joins
            .iter()
            .any(|j| j.joins_stream() || j.kind == JoinKind::Full)
        {
            return Err(
                "a query joins at most one stream: the joins after the first join tables (JOIN or LEFT JOIN)"
                    .into(),
            );
        }
        if self.partition_by.is_some() && !matches!(self.sink, Sink::Topic(_)) {
            return Err(
                "PARTITION BY applies to CREATE STREAM .. AS (a view is keyed by GROUP BY)".into(),
            );
        }
        if let (Some(rows), Some(inner)) = (&self.then, InnerRows::of(self)) {
            if self.sink != Sink::View {
                return Err("an aggregate over a table's rows feeds a view".into());
            }
            if self.reads_table_rows() && (self.filter.is_some() || self.join.is_some()) {
                return Err(
                    "a declared table's rows are read whole: the query's WHERE filters them".into(),
                );
            }
            rows.validate(inner)?;
        }
        match &self.operation {
            Operation::Project { columns } if columns.is_empty() => {
                Err("a projection needs columns".into())
            }
            Operation::Project { .. } => Ok(()),
            Operation::Aggregate(a) => a.validate(),
        }?;
        crate::limits::check_plan(self)
    }
}

impl AggregateSpec {
    fn validate(&self) -> Result<(), String> {
        if let Some(w) = &self.window {
            w.window.validate()?;
            if w.grace_ms < 0 {
                return Err("the grace period must not be negative".into());
            }
            if let Some(r) = w.retention_ms {
                if r < w.grace_ms || r <= 0 {
                    return Err(format!(
                        "the retention ({r} ms) must be positive and at least the grace period ({} ms): rows are kept until their window has closed",
                        w.grace_ms
                    ));
                }
            }
        }
        let known = |name: &str| {
            self.aggregates.iter().any(|a| a.name == name)
                || (0..self.group_by.len()).any(|i| group_key_input(i) == name)
                || (self.window.is_some()
                    && (name == WINDOW_START_INPUT || name == WINDOW_END_INPUT))
        };
        if let Some(h) = &self.having {
            let mut ok = true;
            h.walk(&mut |e| {
                if let Expr::Column(n) = e {
                    ok &= !n.starts_with('#') || known(n);
                }
            });
            if !ok {
                return Err("HAVING reads an input the aggregate does not have".into());
            }
        }
        for (name, source) in &self.columns {
            if name.starts_with('#') {
                return Err(format!("output column {name:?} must not start with '#'"));
            }
            let ok = match source {
                ColumnSource::GroupKey(i) => *i < self.group_by.len(),
                ColumnSource::Aggregate(i) => *i < self.aggregates.len(),
                ColumnSource::WindowStart | ColumnSource::WindowEnd => self.window.is_some(),
                ColumnSource::Computed(e) => {
                    let mut ok = true;
                    e.walk(&mut |e| {
                        if let Expr::Column(n) = e {
                            ok &= known(n);
                        }
                        ok &= !matches!(e, Expr::Field(_) | Expr::Key | Expr::RecordTimestamp);
                    });
                    ok
                }
            };
            if !ok {
                return Err(format!(
                    "column {name:?} refers to nothing in this aggregate"
                ));
            }
        }
        if self.columns.is_empty() {
            return Err("an aggregate needs output columns".into());
        }
        Ok(())
    }
}
