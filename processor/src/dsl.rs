//! The Rust DSL: builds the same [`Plan`] the SQL front end does, in the
//! spirit of Kafka Streams:
//!
//! ```ignore
//! let plan = Pipeline::from_topic("orders")
//!     .event_time_field("ts")
//!     .max_out_of_orderness(Duration::from_secs(5))
//!     .filter(Expr::field("type").eq(Expr::lit("purchase")))
//!     .key_by([("user_id", Expr::field("user"))])
//!     .window(Tumbling::of(Duration::from_secs(300)))
//!     .aggregate([count("purchases"), sum("total", Expr::field("amount"))])
//!     .to_view("purchase_stats");
//! ```

use std::time::Duration;

use crate::accumulators::AggregateKind;
use crate::expr::Expr;
use crate::plan::{
    AggregateColumn, AggregateSpec, ColumnSource, DedupSpec, Emit, EventTime, JoinKind, JoinSpec,
    LateHandling, Operation, Plan, Sink, SourceSpec, WindowedSpec,
};
use crate::window::WindowSpec;

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// Default idle timeout of a source partition: 30 s.
pub const DEFAULT_IDLE_TIMEOUT_MS: i64 = 30_000;

/// Tumbling windows.
pub struct Tumbling;

impl Tumbling {
    /// Windows of `size`.
    pub fn of(size: Duration) -> WindowSpec {
        WindowSpec::Tumbling { size_ms: ms(size) }
    }
}

/// Hopping windows.
pub struct Hopping;

impl Hopping {
    /// Windows of `size` every `advance`.
    pub fn of(size: Duration, advance: Duration) -> WindowSpec {
        WindowSpec::Hopping {
            size_ms: ms(size),
            advance_ms: ms(advance),
        }
    }
}

/// Session windows.
pub struct Session;

impl Session {
    /// Sessions closed by `gap` of inactivity.
    pub fn with_gap(gap: Duration) -> WindowSpec {
        WindowSpec::Session { gap_ms: ms(gap) }
    }
}

/// An aggregate column under construction.
pub struct Agg(AggregateColumn);

fn agg(name: &str, kind: AggregateKind, input: Option<Expr>) -> Agg {
    Agg(AggregateColumn {
        name: name.to_string(),
        kind,
        input,
    })
}

/// `COUNT(*) AS name`.
pub fn count(name: &str) -> Agg {
    agg(name, AggregateKind::CountAll, None)
}
/// `SUM(input) AS name`.
pub fn sum(name: &str, input: Expr) -> Agg {
    agg(name, AggregateKind::Sum, Some(input))
}
/// `AVG(input) AS name`.
pub fn avg(name: &str, input: Expr) -> Agg {
    agg(name, AggregateKind::Avg, Some(input))
}
/// `MIN(input) AS name`.
pub fn min(name: &str, input: Expr) -> Agg {
    agg(name, AggregateKind::Min, Some(input))
}
/// `MAX(input) AS name`.
pub fn max(name: &str, input: Expr) -> Agg {
    agg(name, AggregateKind::Max, Some(input))
}
/// `COUNT_DISTINCT(input) AS name`.
pub fn count_distinct(name: &str, input: Expr) -> Agg {
    agg(name, AggregateKind::CountDistinct, Some(input))
}
/// `LATEST_BY_OFFSET(input) AS name`.
pub fn latest(name: &str, input: Expr) -> Agg {
    agg(name, AggregateKind::Latest, Some(input))
}
/// `EARLIEST_BY_OFFSET(input) AS name`.
pub fn earliest(name: &str, input: Expr) -> Agg {
    agg(name, AggregateKind::Earliest, Some(input))
}

/// A stream being defined: source and per-event steps.
#[derive(Debug, Clone)]
pub struct Pipeline {
    source: SourceSpec,
    dedup: Option<DedupSpec>,
    join: Option<JoinSpec>,
    more_joins: Vec<JoinSpec>,
    filter: Option<Expr>,
    late: LateHandling,
}

impl Pipeline {
    /// Reads every partition of `topic`; event time is the record timestamp
    /// until told otherwise, with no out-of-orderness.
    pub fn from_topic(topic: &str) -> Pipeline {
        Pipeline {
            source: SourceSpec {
                topic: topic.to_string(),
                cluster: None,
                event_time: EventTime::RecordTimestamp,
                out_of_orderness_ms: 0,
                idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
                max_future_ms: crate::plan::DEFAULT_MAX_FUTURE_MS,
                typed_fields: Vec::new(),
            },
            dedup: None,
            join: None,
            more_joins: Vec::new(),
            filter: None,
            late: LateHandling::Drop,
        }
    }

    /// Event time from a value field (`a.b` for nested), epoch ms or RFC 3339.
    pub fn event_time_field(mut self, path: &str) -> Self {
        self.source.event_time = EventTime::Field(path.split('.').map(str::to_string).collect());
        self
    }

    /// Bounded out-of-orderness of the watermark.
    pub fn max_out_of_orderness(mut self, d: Duration) -> Self {
        self.source.out_of_orderness_ms = ms(d);
        self
    }

    /// How long an idle partition may hold the watermark back.
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.source.idle_timeout_ms = ms(d);
        self
    }

    /// How far after its record's append time an event time may be before
    /// the event is invalid (default 1 day).
    pub fn max_future(mut self, d: Duration) -> Self {
        self.source.max_future_ms = ms(d);
        self
    }

    /// Declares the type of top-level value field `name`: records holding
    /// a non-null value of another type there are invalid (skipped, counted).
    pub fn typed_field(mut self, name: &str, ty: crate::expr::DataType) -> Self {
        self.source.typed_fields.push((name.to_string(), ty));
        self
    }

    /// Drops events whose `id` was seen within `ttl` (event time).
    pub fn dedup_by(mut self, id: Expr, ttl: Duration) -> Self {
        self.dedup = Some(DedupSpec {
            id,
            ttl_ms: ms(ttl),
        });
        self
    }

    /// Joins the latest value per key of `table_topic`, matched on
    /// `stream_key`; the table row is visible as field `alias`. Called
    /// again, joins a further table ([`Plan::more_joins`]), whose key may
    /// read the rows joined before it.
    pub fn join_table(
        mut self,
        table_topic: &str,
        stream_key: Expr,
        alias: &str,
        kind: JoinKind,
    ) -> Self {
        let join = JoinSpec {
            table_topic: table_topic.to_string(),
            stream_key,
            alias: alias.to_string(),
            kind,
            table_time: None,
            history_ms: None,
            within: None,
        };
        match self.join {
            None => self.join = Some(join),
            Some(_) => self.more_joins.push(join),
        }
        self
    }

    /// Keeps only events for which `predicate` is true (ANDed with earlier filters).
    pub fn filter(mut self, predicate: Expr) -> Self {
        self.filter = Some(match self.filter.take() {
            Some(existing) => existing.and(predicate),
            None => predicate,
        });
        self
    }

    /// Sends events too late for their window to `topic` instead of dropping them.
    pub fn late_events_to(mut self, topic: &str) -> Self {
        self.late = LateHandling::SideOutput(topic.to_string());
        self
    }

    /// Groups by named key expressions.
    pub fn key_by<'a>(self, keys: impl IntoIterator<Item = (&'a str, Expr)>) -> Grouped {
        Grouped {
            pipeline: self,
            keys: keys.into_iter().map(|(n, e)| (n.to_string(), e)).collect(),
            window: None,
        }
    }

    /// Maps each event to named columns (a derived stream).
    pub fn select<'a>(self, columns: impl IntoIterator<Item = (&'a str, Expr)>) -> Projected {
        Projected {
            pipeline: self,
            columns: columns
                .into_iter()
                .map(|(n, e)| (n.to_string(), e))
                .collect(),
        }
    }

    fn into_plan(self, name: &str, operation: Operation, sink: Sink) -> Plan {
        Plan {
            name: name.to_string(),
            source: self.source,
            dedup: self.dedup,
            join: self.join,
            more_joins: self.more_joins,
            filter: self.filter,
            operation,
            sink,
            late: self.late,
            sink_cluster: None,
            partition_by: None,
            spread_stage: None,
            then: None,
        }
    }
}

/// A projected stream.
#[derive(Debug, Clone)]
pub struct Projected {
    pipeline: Pipeline,
    columns: Vec<(String, Expr)>,
}

impl Projected {
    /// Appends each row to `topic`.
    pub fn to_topic(self, topic: &str) -> Plan {
        let operation = Operation::Project {
            columns: self.columns,
        };
        self.pipeline
            .into_plan(topic, operation, Sink::Topic(topic.to_string()))
    }
}

/// A grouped stream, optionally windowed.
#[derive(Debug, Clone)]
pub struct Grouped {
    pipeline: Pipeline,
    keys: Vec<(String, Expr)>,
    window: Option<WindowedSpec>,
}

impl Grouped {
    /// Windows the groups (EMIT CHANGES, no grace, until changed).
    pub fn window(mut self, window: WindowSpec) -> Self {
        self.window = Some(WindowedSpec {
            window,
            grace_ms: 0,
            emit: Emit::Changes,
            retention_ms: None,
        });
        self
    }

    /// Keeps a window's row for `d` after the window's end (event time),
    /// then deletes it; without it rows are kept forever.
    pub fn retention(mut self, d: Duration) -> Self {
        if let Some(w) = &mut self.window {
            w.retention_ms = Some(ms(d));
        }
        self
    }

    /// Allowed lateness after a window ends.
    pub fn grace(mut self, d: Duration) -> Self {
        if let Some(w) = &mut self.window {
            w.grace_ms = ms(d);
        }
        self
    }

    /// Rows appear once, when their window closes.
    pub fn emit_final(mut self) -> Self {
        if let Some(w) = &mut self.window {
            w.emit = Emit::Final;
        }
        self
    }

    /// The aggregates; output columns are the keys, then `window_start` and
    /// `window_end` when windowed, then the aggregates.
    pub fn aggregate(self, aggregates: impl IntoIterator<Item = Agg>) -> Aggregated {
        let aggregates: Vec<AggregateColumn> = aggregates.into_iter().map(|a| a.0).collect();
        let mut columns: Vec<(String, ColumnSource)> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), ColumnSource::GroupKey(i)))
            .collect();
        if self.window.is_some() {
            columns.push(("window_start".into(), ColumnSource::WindowStart));
            columns.push(("window_end".into(), ColumnSource::WindowEnd));
        }
        columns.extend(
            aggregates
                .iter()
                .enumerate()
                .map(|(i, a)| (a.name.clone(), ColumnSource::Aggregate(i))),
        );
        Aggregated {
            pipeline: self.pipeline,
            spec: AggregateSpec {
                group_by: self.keys.into_iter().map(|(_, e)| e).collect(),
                window: self.window,
                aggregates,
                columns,
                having: None,
            },
        }
    }
}

/// An aggregation ready to be sunk.
#[derive(Debug, Clone)]
pub struct Aggregated {
    pipeline: Pipeline,
    spec: AggregateSpec,
}

impl Aggregated {
    /// Keeps only rows for which `predicate` (over output columns) is true.
    pub fn having(mut self, predicate: Expr) -> Self {
        self.spec.having = Some(predicate);
        self
    }

    /// Materializes the rows as a queryable view called `name`.
    pub fn to_view(self, name: &str) -> Plan {
        self.pipeline
            .into_plan(name, Operation::Aggregate(self.spec), Sink::View)
    }

    /// Appends each row change to `topic`.
    pub fn to_topic(self, topic: &str) -> Plan {
        self.pipeline.into_plan(
            topic,
            Operation::Aggregate(self.spec),
            Sink::Topic(topic.to_string()),
        )
    }
}
