//! The runtime of one processor version: pull records from the log in log
//! order, push them through the operators, and commit ([`crate::commit`])
//! every commit interval; restore from the last commit when opened.
//!
//! Exactly-once: after a crash the runtime resumes from the offsets of its
//! last commit, so the state and views count every input once; output
//! records go through the commit's outbox (see [`crate::commit`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kappa_log::{Log, RecordRef, TopicConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::commit::CommitMeta;
pub use crate::commit::CrashPoint;
use crate::commit::OutRecord;
use crate::decoder::{Decoded, Decoder};
use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::joined_tables::JoinedTables;
use crate::operator::aggregate::{AggregateOp, Outcome};
use crate::operator::dedup::Dedup;
use crate::operator::each_row::EachRow;
use crate::operator::join::TableJoin;
use crate::operator::stream_join::{Joined, JoinedInput, JoinedRecord, StreamJoin};
use crate::operator::table_aggregate::TableAggregate;
use crate::operator::table_rows::TableRows;
use crate::operator::tables_join::TablesJoin;
use crate::operator::top_n::TopN;
use crate::operator::RowsStage;
use crate::order::{BatchEnds, InputOrder, NextBatch, Side};
use crate::parallel::{
    Aggregation, Mark, Prepared, Projected, ProjectedRow, ShardContext, ShardEvent, ShardPool,
    SourcePool, SourceWork,
};
use crate::plan::{InnerRows, LateHandling, Operation, Plan, RowsAggregate, Sink};
use crate::progress::Progress;
use crate::sink::{LogOutput, OutputSink};
use crate::source::{LogSource, Source, SourceTopic};
use crate::state::key::{Meta, TableSlot};
use crate::state::store::{Batch, Scope, Store};
use crate::stop::StopSignal;
use crate::time::parse_timestamp;
use crate::watermark::{TrackerState, WatermarkTracker};

/// Where a new version starts reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartFrom {
    /// The start of every partition.
    Earliest,
    /// The end of every partition (new records only).
    Latest,
    /// The first record at or after this time (ms).
    Timestamp(i64),
    /// These offsets, one per partition.
    Offsets(Vec<u64>),
}

/// Runtime settings.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Commit at least this often (default 100 ms).
    pub commit_interval_ms: u64,
    /// Records read per partition per poll (default 5,000).
    pub max_poll_records: u64,
    /// State entries (aggregate slots) kept in memory beyond the dirty ones
    /// (default 1,000,000, roughly 150 MB at most for COUNT/SUM slots; the
    /// cache only grows as far as the state does). Fewer means lookups in
    /// RocksDB when an evicted slot is needed again.
    pub state_cache_entries: usize,
    /// Where to start when the version has no committed offsets.
    pub start: StartFrom,
    /// Entries waiting in memory for a commit (dirty slots, rows and
    /// changes to write, outbox records) beyond which the runtime commits
    /// at once instead of at the interval (default 500,000): a jump in
    /// event time that closes many windows cannot pile up unbounded writes.
    pub pending_entries_max: usize,
    /// State entries in memory (cached slots, open windows, sessions,
    /// hopping slices, events a join of two streams keeps) after a commit
    /// beyond which the version fails with
    /// a [`ProcessorError::StateLimit`] naming the limit (default
    /// 10,000,000, roughly 1.5 GB; at least `state_cache_entries`).
    pub state_entries_max: usize,
    /// The config of output topics a version creates — its sink topic and
    /// its `LATE_TOPIC` — when they do not exist yet (default
    /// `TopicConfig::default()`; the server passes its topic defaults).
    pub output_topics: TopicConfig,
    /// Commit as soon as a poll has caught up with the input — processed
    /// everything readable, whatever is still held back for an append in
    /// flight (default true): a record is visible a few milliseconds after
    /// its append instead of up to `commit_interval_ms` later. While a
    /// commit runs, new input gathers for the next one (group commit), so
    /// under a steady load each commit takes what came during the last;
    /// a poll stopped by its budget (a backlog) waits for the interval.
    pub commit_when_caught_up: bool,
    /// Commit interval while working through a backlog (default 1,000 ms;
    /// at most the commit interval's own value counts, whichever is
    /// longer): a commit writes every group changed since the last, so a
    /// replay that commits every 50 ms rewrites its groups 20 times as
    /// often for no reader (what it has committed is not served until it
    /// caught up). A crash costs at most this much work again.
    pub catch_up_commit_interval_ms: u64,
    /// Workers of each kind (default 1: the version runs on one thread).
    /// With `n > 1` the version runs `n` source workers and, for an
    /// aggregate, `n` key-shard workers around a coordinating thread
    /// ([`crate::parallel`]), with the same results; at most
    /// [`crate::parallel::MAX_WORKERS`].
    pub workers: usize,
    /// Records of a derived stream (or another sequenced output,
    /// `crate::sequenced`) waiting after a poll beyond which they are
    /// appended at once, ahead of the commit (default 4,096): the log
    /// writes them while the version goes on processing, and they do not
    /// pile up in memory until the commit.
    pub append_ahead_records: usize,
    /// Longest an idle version waits for input before it looks at the
    /// clock again — for an idle partition's timeout, a due commit
    /// (default 100 ms; the commit interval when shorter). A stop ends
    /// the wait at once whatever its length.
    pub idle_wait_max_ms: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            commit_interval_ms: 100,
            max_poll_records: 5_000,
            state_cache_entries: 1_000_000,
            start: StartFrom::Earliest,
            pending_entries_max: 500_000,
            state_entries_max: 10_000_000,
            output_topics: TopicConfig::default(),
            commit_when_caught_up: true,
            catch_up_commit_interval_ms: 1_000,
            workers: 1,
            append_ahead_records: 4_096,
            idle_wait_max_ms: 100,
        }
    }
}

/// One processor version at work. The fields are the crate's so that
/// [`crate::commit`] can write what they hold.
pub struct Runtime {
    pub(crate) plan: Plan,
    pub(crate) scope: Scope,
    /// Where the inputs live: the built-in log or a Kafka cluster.
    pub(crate) source: Arc<dyn Source>,
    /// Every output topic (sink, late side output) by name, where it
    /// lives: the built-in log, or a cluster ([`Plan::sink_cluster`]).
    pub(crate) outputs: BTreeMap<String, Arc<dyn OutputSink>>,
    pub(crate) store: Arc<Store>,
    pub(crate) options: RunOptions,
    /// The input partitions, merged in log order; owns the positions.
    pub(crate) order: InputOrder,
    /// Log time (append time) up to which input has been processed and the
    /// watermark evaluated: the clock of every time-based decision.
    pub(crate) log_time: i64,
    pub(crate) watermark: WatermarkTracker,
    pub(crate) dedup: Option<Dedup>,
    /// The joined tables, in join order: the first join's table (unless
    /// it joins a stream) and the tables joined after it
    /// ([`Plan::more_joins`]).
    pub(crate) tables: Vec<TableJoin>,
    /// The stream-stream join (`JOIN .. WITHIN`): the first join, when it
    /// joins a stream.
    pub(crate) stream_join: Option<StreamJoin>,
    pub(crate) aggregate: Option<Aggregation>,
    /// What takes `aggregate`'s (or `table_rows`') rows ([`Plan::then`]):
    /// the view's.
    pub(crate) rows_aggregate: Option<RowsStage>,
    /// A declared table's latest rows, when the plan aggregates (or ranks)
    /// them ([`Plan::reads_table_rows`]).
    pub(crate) table_rows: Option<TableRows>,
    /// The table `table_rows` are joined with ([`crate::plan::RowsJoin`]).
    pub(crate) tables_join: Option<TablesJoin>,
    /// Source workers, when the version runs in parallel.
    pub(crate) sources: Option<SourcePool>,
    pub(crate) outbox: Vec<OutRecord>,
    pub(crate) outbox_seq: u64,
    /// An output topic holding records of a run whose state is lost, and
    /// the input positions that run had reached: this run's records for
    /// that topic from inputs before them are dropped
    /// ([`Runtime::number_entries_past_a_lost_run`]).
    pub(crate) written_by_lost_run: Option<(Arc<str>, Vec<u64>)>,
    /// The output topics appended ahead of the commit, by sequence.
    pub(crate) sequenced: crate::sequenced::Sequenced,
    /// A projection's sink topic and row writer.
    pub(crate) project: Option<crate::project::ProjectOutput>,
    /// The index of the projection's sink among the sequenced topics when
    /// it is one: its rows made by the projection path
    /// ([`ProjectedRow`]) go there as they are made, not through the
    /// outbox ([`Runtime::process_projected`]).
    pub(crate) projected_sequenced: Option<usize>,
    /// A single-threaded version's projection made where its events are
    /// decoded, from their located fields where it can
    /// ([`crate::parallel::SourceProjection::project_located`]).
    pub(crate) located_projection: Option<crate::parallel::SourceProjection>,
    /// The buffer `located_projection` writes each row to.
    pub(crate) projected_rows: Vec<u8>,
    pub(crate) last_commit: Instant,
    /// What the last commit wrote besides state (`None` before the first
    /// one of this runtime).
    pub(crate) last_meta: Option<CommitMeta>,
    /// Why a commit failed, once one did: the state it flushed went with
    /// it, so this runtime never commits again ([`Runtime::commit`]).
    pub(crate) failed_commit: Option<String>,
    /// Input records (stream and table) processed since the last commit.
    pub(crate) uncommitted_records: u64,
    /// The last poll processed everything readable (it was not stopped by
    /// its budget). Input the log is not yet complete up to (appended in
    /// the current millisecond, or after an append still in flight) is
    /// not a backlog: under a steady load of small appends there nearly
    /// always is some, and counting it as one held commits back to the
    /// catch-up interval.
    pub(crate) caught_up: bool,
    /// Largest append time among records processed since the last commit.
    pub(crate) newest_input_ms: Option<i64>,
    /// For the aggregate stage of a repartitioned view: the last input
    /// position taken per input partition ([`crate::spread::repartition`]).
    pub(crate) source_dedup: Option<crate::spread::repartition::SourceDedup>,
    pub(crate) progress: Arc<Progress>,
    /// Turns input records into events.
    pub(crate) decoder: Decoder,
    /// Stream records taken so far in this run: the place of each in the
    /// processing order (orders side outputs; see [`OutRecord`]).
    pub(crate) event_seq: u64,
    /// Ends the run loop (at the next batch boundary), with or without a
    /// final commit.
    pub(crate) signal: Arc<StopSignal>,
}

impl Runtime {
    /// Opens the version `scope` of `plan` over inputs in the built-in
    /// `log`: creates its column families, restores state, offsets and
    /// watermark, and re-appends a pending outbox.
    pub fn open(
        plan: Plan,
        version: u64,
        log: Arc<Log>,
        store: Arc<Store>,
        options: RunOptions,
    ) -> Result<Runtime> {
        let source = LogSource::shared(log.clone());
        Runtime::open_with_source(plan, version, log, source, None, store, options)
    }

    /// [`Runtime::open`] reading the inputs from `source`, appending the
    /// sink topic's records to `cluster_sink` when it lives on a cluster
    /// and every other output topic to the built-in `log`.
    pub fn open_with_source(
        plan: Plan,
        version: u64,
        log: Arc<Log>,
        input_source: Arc<dyn Source>,
        cluster_sink: Option<Arc<dyn OutputSink>>,
        store: Arc<Store>,
        options: RunOptions,
    ) -> Result<Runtime> {
        if plan.sink_cluster.is_some() != cluster_sink.is_some() {
            return Err(ProcessorError::InvalidPlan(
                "the output topic's cluster and the sink given differ".into(),
            ));
        }
        plan.validate().map_err(ProcessorError::InvalidPlan)?;
        if matches!(plan.operation, Operation::Project { .. })
            && plan.sink == Sink::View
            && !plan.reads_table_rows()
        {
            return Err(ProcessorError::InvalidPlan(
                "a projection must sink to a topic".into(),
            ));
        }
        let scope = Scope {
            name: plan.name.clone(),
            version,
        };
        store.ensure(&scope)?;
        let rows_aggregate = match (&plan.then, InnerRows::of(&plan)) {
            (Some(rows), Some(inner)) => {
                store.ensure_cf(&scope.stage_cf())?;
                rows.validate(inner).map_err(ProcessorError::InvalidPlan)?;
                Some(match rows.top {
                    _ if rows.each_row => RowsStage::Each(EachRow::new(rows, scope.view_cf())),
                    Some(_) => RowsStage::Top(TopN::new(
                        rows,
                        inner,
                        scope.stage_cf(),
                        scope.view_cf(),
                        scope.state_cf(),
                        options.state_cache_entries,
                    )?),
                    None => RowsStage::Aggregate(TableAggregate::new(
                        rows,
                        inner,
                        scope.stage_cf(),
                        scope.view_cf(),
                        scope.state_cf(),
                        options.state_cache_entries,
                    )?),
                })
            }
            _ => None,
        };
        let source = input_source.open(&plan.source.topic)?;
        let on_cluster = match (&plan.sink, &plan.sink_cluster) {
            (Sink::Topic(t), Some(_)) => Some(t.clone()),
            _ => None,
        };
        let writer = format!("{}@{version}", plan.name);
        let mut outputs: BTreeMap<String, Arc<dyn OutputSink>> = BTreeMap::new();
        for topic in Self::output_topics(&plan) {
            if let (Some(t), Some(sink)) = (&on_cluster, &cluster_sink) {
                if *t == topic {
                    outputs.insert(topic, sink.clone());
                    continue;
                }
            }
            outputs.insert(
                topic.clone(),
                LogOutput::shared(log.clone(), &topic, &writer),
            );
            if log.topic(&topic).is_err() {
                match log.create_topic(&topic, options.output_topics.clone()) {
                    Ok(_) | Err(kappa_log::LogError::TopicExists(_)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let sequenced = crate::sequenced::Sequenced::new(
            log.clone(),
            &writer,
            crate::sequenced::topics_of(&plan, Self::output_topics(&plan)),
        );
        let project = crate::project::ProjectOutput::of(&plan);
        let projected_sequenced = project.as_ref().and_then(|p| sequenced.index(&p.topic));
        let state_cf = scope.state_cf();
        let partitions = source.partition_count() as usize;
        // The watermark runs over a joined stream's partitions too, after
        // the stream's.
        let joined_partitions = match &plan.join {
            Some(j) if j.joins_stream() => input_source.open(&j.table_topic)?.partition_count(),
            _ => 0,
        } as usize;
        let mut rt = Runtime {
            watermark: WatermarkTracker::new(
                partitions + joined_partitions,
                plan.source.out_of_orderness_ms,
                plan.source.idle_timeout_ms,
            ),
            // Positions and the table side come from the commit (`restore`).
            order: InputOrder::new(source, Vec::new(), None),
            log_time: i64::MIN,
            dedup: plan.dedup.clone().map(|d| Dedup::new(d, state_cf.clone())),
            tables: plan
                .join
                .iter()
                .chain(&plan.more_joins)
                .enumerate()
                .filter(|(_, j)| !j.joins_stream())
                .map(|(place, j)| {
                    TableJoin::new(j.clone(), state_cf.clone(), TableSlot::at(place))
                        .reading(plan.table_fields(j))
                })
                .collect(),
            stream_join: plan
                .join
                .clone()
                .and_then(|j| {
                    // The WHERE's conditions on one stream are applied
                    // before it buffers an event, unless tables joined
                    // after it might be read (the whole WHERE follows).
                    let filter = plan.filter.as_ref().filter(|_| plan.more_joins.is_empty());
                    StreamJoin::new(j, state_cf.clone(), filter)
                })
                .map(|j| {
                    // Nothing sends a buffered event's record on.
                    let keep =
                        plan.late == crate::plan::LateHandling::Drop && plan.spread_stage.is_none();
                    j.reading(plan.joined_fields()).keeping_read_fields(keep)
                }),
            aggregate: aggregate_op(&plan, &scope, options.state_cache_entries)
                .map(|op| Aggregation::Local(Box::new(op))),
            rows_aggregate,
            table_rows: plan
                .reads_table_rows()
                .then(|| TableRows::new(scope.stage_cf())),
            tables_join: plan
                .then
                .as_ref()
                .and_then(|t| t.join.clone())
                .map(|j| TablesJoin::new(j, scope.state_cf())),
            sources: None,
            progress: Arc::new(Progress::new(partitions, &plan.name, version)),
            decoder: Decoder::new(&plan),
            event_seq: 0,
            signal: Arc::new(StopSignal::default()),
            plan,
            scope,
            source: input_source,
            outputs,
            store,
            options,
            outbox: Vec::new(),
            outbox_seq: 0,
            sequenced,
            project,
            projected_sequenced,
            located_projection: None,
            projected_rows: Vec::new(),
            last_commit: Instant::now(),
            last_meta: None,
            failed_commit: None,
            uncommitted_records: 0,
            caught_up: false,
            newest_input_ms: None,
            source_dedup: None,
            written_by_lost_run: None,
        };
        rt.restore(partitions)?;
        if let Some(spec) = rt.plan.view_aggregate() {
            // Readers compute a view's rows from its accumulators with the spec.
            let mut batch = Batch::default();
            let json = serde_json::to_vec(spec).expect("plans serialize");
            batch.put(&rt.scope.state_cf(), Meta::Spec.key(), json);
            rt.store.write(batch)?;
        }
        Ok(rt)
    }

    fn output_topics(plan: &Plan) -> Vec<String> {
        let mut topics = Vec::new();
        if let Sink::Topic(t) = &plan.sink {
            topics.push(t.clone());
        }
        if let LateHandling::SideOutput(t) = &plan.late {
            topics.push(t.clone());
        }
        topics
    }

    fn get_u64(&self, meta: Meta) -> Result<Option<u64>> {
        let Some(v) = self.store.get(&self.scope.state_cf(), &meta.key())? else {
            return Ok(None);
        };
        let bytes: [u8; 8] = v
            .as_slice()
            .try_into()
            .map_err(|_| ProcessorError::CorruptState {
                cf: self.scope.state_cf(),
                reason: format!("meta {} is not 8 bytes", meta.name()),
            })?;
        Ok(Some(u64::from_le_bytes(bytes)))
    }

    fn restore(&mut self, partitions: usize) -> Result<()> {
        // The topic `open` opened: one client of a cluster, not two.
        let source = self.order.stream_topic();
        let mut positions = Vec::with_capacity(partitions);
        for p in 0..partitions {
            let committed = self.get_u64(Meta::Offset(p))?;
            let part = p as u32;
            let start = match (committed, &self.options.start) {
                (Some(o), _) => o,
                (None, StartFrom::Earliest) => source.start_offset(part)?,
                (None, StartFrom::Latest) => source.end_offset(part)?,
                (None, StartFrom::Timestamp(ts)) => source.offset_for_timestamp(part, *ts)?,
                (None, StartFrom::Offsets(o)) => o.get(p).copied().unwrap_or(0),
            };
            positions.push(start.max(source.start_offset(part)?));
        }
        let joined = self.plan.joined_topics();
        let table = match joined.is_empty() {
            false => {
                let topics = joined
                    .into_iter()
                    .map(|topic| self.source.open(topic))
                    .collect::<Result<Vec<_>>>()?;
                let table = JoinedTables::of(topics);
                let positions = (0..table.partition_count())
                    .map(|p| Ok(self.get_u64(Meta::TableOffset(p as usize))?.unwrap_or(0)))
                    .collect::<Result<_>>()?;
                Some((table, positions))
            }
            true => None,
        };
        self.order = InputOrder::new(source, positions, table);
        self.order.start_reading()?;
        let watermark = self
            .get_u64(Meta::Watermark)?
            .map_or(i64::MIN, |w| w as i64);
        self.watermark.restore(watermark);
        if let Some(state) = self
            .store
            .get(&self.scope.state_cf(), &Meta::WatermarkPartitions.key())?
        {
            let state: TrackerState =
                serde_json::from_slice(&state).map_err(|e| ProcessorError::CorruptState {
                    cf: self.scope.state_cf(),
                    reason: format!("meta {}: {e}", Meta::WatermarkPartitions.name()),
                })?;
            self.watermark.restore_state(state);
        }
        if let Some(t) = self.get_u64(Meta::LogTime)? {
            self.log_time = t as i64;
        }
        self.outbox_seq = self.get_u64(Meta::OutboxSeq)?.unwrap_or(0);
        self.number_entries_past_a_lost_run();
        if self
            .plan
            .spread_stage
            .as_ref()
            .is_some_and(|s| s.reads_repartition())
        {
            self.source_dedup = Some(crate::spread::repartition::SourceDedup::restore(
                &self.store,
                &self.scope.state_cf(),
            )?);
        }
        if let Some(d) = &mut self.dedup {
            d.restore(&self.store)?;
        }
        for j in &mut self.tables {
            j.restore(&self.store)?;
        }
        if let Some(j) = &mut self.stream_join {
            j.restore(&self.store)?;
        }
        self.start_workers(partitions, watermark)?;
        self.progress
            .set_committed(self.order.stream_positions(), watermark);
        self.flush_pending_outbox()
    }

    /// Numbers the next outbox entry past every entry an output topic
    /// already holds from this writer, and notes what to drop. A topic
    /// holding an entry this store has not numbered yet was written by a
    /// run whose state is lost: a task taken over on another node,
    /// restored from an older checkpoint or built from the start of its
    /// partition. That run's entries of the same numbers hold other
    /// records (a commit's records depend on when it came), so taking the
    /// new entries for them would lose records. The new run's entries are
    /// numbered past them instead, and where the sink kept the input
    /// positions that run had reached, the records this run makes from
    /// inputs before them are dropped as they are made (they are in the
    /// topic: the processing is deterministic). Where it did not (an entry
    /// of an older build), or for an aggregate's row changes (made at each
    /// commit, not per input), they are written again: a repartition
    /// topic's reader drops them by their source offsets
    /// ([`crate::spread::repartition::SourceDedup`]); a derived stream's
    /// readers see them twice.
    fn number_entries_past_a_lost_run(&mut self) {
        let newest = self
            .outputs
            .iter()
            .filter_map(|(topic, o)| Some((topic, o.written()?)))
            .max_by_key(|(_, w)| w.entry);
        let Some((topic, written)) = newest else {
            return;
        };
        if written.entry < self.outbox_seq {
            return;
        }
        let partitions = self.order.stream_positions().len();
        let reach = written.reach.filter(|r| r.len() == partitions);
        let entries = format!("{}..={}", self.outbox_seq, written.entry);
        match &reach {
            Some(reach) => tracing::warn!(
                view = %self.scope.name,
                version = self.scope.version,
                %topic,
                entries,
                ?reach,
                "the output topic holds outbox entries of a run whose state is lost: this run's records of the inputs that run had read are not written again"
            ),
            None => tracing::warn!(
                view = %self.scope.name,
                version = self.scope.version,
                %topic,
                entries,
                "the output topic holds outbox entries of a run whose state is lost, without the input positions it reached: this run's records since its state's commit are written again"
            ),
        }
        self.outbox_seq = written.entry + 1;
        self.written_by_lost_run = reach.map(|r| (Arc::from(topic.as_str()), r));
    }

    /// Drops the records for the topic a lost run wrote that processing
    /// the input at `offset` of `partition` put in the outbox after its
    /// first `before` records, when that run had read past it
    /// ([`Runtime::number_entries_past_a_lost_run`]); forgets that run
    /// once every partition is past its positions. (A version on one
    /// thread, as every task of a spread version is: with several, the
    /// records are written again.)
    fn drop_what_a_lost_run_wrote(&mut self, partition: u32, offset: u64, before: usize) {
        let Some((topic, reach)) = &self.written_by_lost_run else {
            return;
        };
        let p = partition as usize;
        if reach.get(p).is_some_and(|&r| offset < r) {
            let kept: Vec<OutRecord> = self
                .outbox
                .drain(before..)
                .filter(|r| r.topic != *topic)
                .collect();
            self.outbox.extend(kept);
        }
        let positions = self.order.stream_positions();
        let past = reach.iter().enumerate().all(|(i, &r)| match i == p {
            true => offset + 1 >= r,
            false => positions.get(i).is_some_and(|&at| at >= r),
        });
        if past {
            self.written_by_lost_run = None;
        }
    }

    /// Restores the aggregate's state as of the committed `watermark`: in
    /// this thread, or — with several workers — in key-shard workers, each
    /// its own key groups; starts the source workers.
    fn start_workers(&mut self, partitions: usize, watermark: i64) -> Result<()> {
        let workers = self.options.workers.clamp(1, crate::parallel::MAX_WORKERS);
        // A table's records are taken whole on this thread (each replaces
        // its key's row; one with a null value deletes it).
        if workers == 1 || self.table_rows.is_some() {
            if let Some(Aggregation::Local(a)) = &mut self.aggregate {
                a.restore(&self.store, watermark)?;
            }
            let joined_header = matches!(
                self.plan.spread_stage,
                Some(crate::plan::SpreadStage::AfterJoinedRepartition { .. })
            );
            self.located_projection = self.projection_where_decoded().filter(|_| !joined_header);
            return Ok(());
        }
        let thread_name = format!("kappa-proc-{}@{}", self.scope.name, self.scope.version);
        let cache = (self.options.state_cache_entries / workers).max(1);
        let spec = match &self.plan.operation {
            Operation::Aggregate(spec) => {
                let ops = (0..workers)
                    .filter_map(|_| aggregate_op(&self.plan, &self.scope, cache))
                    .collect();
                let context = ShardContext {
                    store: self.store.clone(),
                    progress: self.progress.clone(),
                    late: self.plan.late.clone(),
                };
                self.aggregate = Some(Aggregation::Sharded(ShardPool::start(
                    ops,
                    watermark,
                    context,
                    &thread_name,
                )?));
                Some(spec.clone())
            }
            Operation::Project { .. } => None,
        };
        // The coordinator needs only the event time of an aggregate's
        // events when nothing before the aggregate reads them: source
        // workers then group them (`SourceWork::grouped`).
        let grouped = spec
            .filter(|_| !self.coordinator_reads_events())
            .map(|spec| (spec, workers));
        let late_side_output = self.late_side_output();
        // A grouped event is all that leaves a source worker: its record is
        // read only for a late side output or by an aggregate reading the key.
        let reads_record =
            late_side_output || grouped.as_ref().is_none_or(|(spec, _)| spec.reads_key());
        let project = self.projection_where_decoded();
        let work = SourceWork {
            decoder: match reads_record {
                true => self.decoder.clone(),
                false => self.decoder.clone().without_record(),
            },
            grouped,
            late_side_output,
            project,
            joined: self.stream_join.as_ref().map(|join| {
                let decoder = join.joined_decoder().clone();
                (decoder, self.plan.source.max_future_ms)
            }),
        };
        self.sources = Some(SourcePool::start(
            workers,
            partitions,
            work,
            &self.progress,
            &thread_name,
        )?);
        Ok(())
    }

    /// Whether the coordinator reads events beyond their event time: for
    /// dedup, a join, or a filter the decoder does not apply.
    fn coordinator_reads_events(&self) -> bool {
        self.dedup.is_some()
            || self.plan.join.is_some()
            || !self.plan.more_joins.is_empty()
            || (self.plan.filter.is_some() && !self.decoder.filters())
    }

    /// A derived stream's projection, made where its events are decoded
    /// when the coordinator needs nothing else of them.
    fn projection_where_decoded(&self) -> Option<crate::parallel::SourceProjection> {
        match (&self.plan.operation, &self.project) {
            (Operation::Project { columns }, Some(output))
                if !self.coordinator_reads_events() && self.table_rows.is_none() =>
            {
                Some(crate::parallel::SourceProjection::new(
                    Arc::from(columns.as_slice()),
                    output.row.clone(),
                    self.plan.partition_by.clone(),
                    &self.decoder,
                ))
            }
            _ => None,
        }
    }

    /// Entries waiting in memory for the next commit.
    pub fn pending_entries(&self) -> usize {
        self.outbox.len()
            + self
                .stream_join
                .as_ref()
                .map_or(0, StreamJoin::pending_writes)
            + self
                .aggregate
                .as_ref()
                .map_or(0, Aggregation::pending_entries)
            + self
                .rows_aggregate
                .as_ref()
                .map_or(0, RowsStage::pending_entries)
            + self
                .table_rows
                .as_ref()
                .map_or(0, TableRows::pending_entries)
            + self
                .tables_join
                .as_ref()
                .map_or(0, TablesJoin::pending_entries)
    }

    /// Fails with [`ProcessorError::StateLimit`] when the state in memory
    /// outgrew [`RunOptions::state_entries_max`] (checked after commits).
    pub(crate) fn check_state_limit(&self) -> Result<()> {
        let aggregate = self
            .aggregate
            .as_ref()
            .map_or(0, Aggregation::memory_entries);
        let aggregate = aggregate
            + self
                .rows_aggregate
                .as_ref()
                .map_or(0, RowsStage::memory_entries);
        let joined = self.stream_join.as_ref().map_or(0, StreamJoin::buffered);
        let entries = aggregate + joined;
        let max = self.options.state_entries_max;
        if entries > max {
            let remedy = match joined > aggregate {
                true => format!("{joined} of them are events a join of two streams keeps: a shorter WITHIN or GRACE PERIOD, or a WHERE on one stream, keeps it within"),
                false => "fewer groups or windows (a shorter window, RETENTION, a smaller GROUP BY) keep it within".to_string(),
            };
            return Err(ProcessorError::StateLimit(format!(
                "{}@{} holds {entries} state entries in memory, more than its limit of {max}: {remedy}",
                self.scope.name, self.scope.version
            )));
        }
        Ok(())
    }

    /// The input topic this runtime reads (for its lag, without opening it
    /// again).
    pub(crate) fn input_topic(&self) -> Arc<dyn SourceTopic> {
        self.order.stream_topic()
    }

    /// The plan this runtime runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The shared progress (offsets, watermark, counters) of this runtime.
    pub fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// Processes the input the log holds in log order ([`crate::order`]),
    /// up to what the log is complete up to and at most
    /// `max_poll_records` per input partition; returns the number of stream
    /// records processed. Idleness and every other time-based decision use
    /// log time: the append time of the batch at hand, or, once the input
    /// is drained, the log's completeness bound.
    pub fn poll_once(&mut self) -> Result<u64> {
        match (&mut self.rows_aggregate, &mut self.aggregate) {
            // The inner aggregate always hands its changes to the outer.
            (Some(rows), _) => {
                if self.progress.changes.is_enabled() {
                    rows.set_emit_changes(true);
                }
            }
            (None, Some(a)) => {
                if !a.emits_changes() && self.progress.changes.is_enabled() {
                    a.set_emit_changes(true)?;
                }
            }
            (None, None) => {}
        }
        self.order.check_topics(self.source.as_ref())?;
        // Read before any fetch: every batch at or before it is readable.
        let complete = self.source.complete_up_to();
        let (processed, drained) = match self.sources.is_some() {
            true => self.poll_parallel(complete)?,
            false => self.poll_serial(complete)?,
        };
        if drained {
            self.advance_log_time(complete)?;
        }
        self.append_ahead()?;
        self.caught_up = drained;
        self.progress.add_processed(processed);
        self.report_operator_state();
        Ok(processed)
    }

    /// Tells [`Progress`] how many entries each stateful operator keeps
    /// (what `EXPLAIN` of a running view shows).
    fn report_operator_state(&self) {
        use crate::sql::explain::{
            DEDUP_GAUGE, ROWS_AGGREGATE_GAUGE, STREAM_JOIN_GAUGE, TABLE_JOIN_GAUGE,
        };
        if let Some(r) = &self.rows_aggregate {
            self.progress
                .set_operator_state(ROWS_AGGREGATE_GAUGE, r.memory_entries() as u64);
        }
        if let Some(j) = &self.stream_join {
            self.progress
                .set_operator_state(STREAM_JOIN_GAUGE, j.buffered() as u64);
        }
        if !self.tables.is_empty() {
            let keys = self.tables.iter().map(TableJoin::keys).sum::<usize>();
            self.progress
                .set_operator_state(TABLE_JOIN_GAUGE, keys as u64);
        }
        if let Some(d) = &self.dedup {
            self.progress
                .set_operator_state(DEDUP_GAUGE, d.ids() as u64);
        }
    }

    /// Before a batch appended at `append_time`: time passes up to just
    /// before it (partitions go idle as they would have while waiting for
    /// it live), and it is the newest input so far if it is.
    pub(crate) fn enter_batch(&mut self, append_time: i64) -> Result<()> {
        self.advance_log_time(append_time.saturating_sub(1))?;
        self.newest_input_ms = Some(
            self.newest_input_ms
                .map_or(append_time, |n| n.max(append_time)),
        );
        Ok(())
    }

    /// [`Runtime::poll_once`] on this thread: returns the stream records
    /// processed and whether the input was drained (not stopped by the
    /// poll's budget).
    fn poll_serial(&mut self, complete: i64) -> Result<(u64, bool)> {
        let max_records = self.options.max_poll_records;
        let budget = max_records.saturating_mul(self.order.input_count() as u64);
        self.order.start_poll();
        let (mut processed, mut read) = (0u64, 0u64);
        let mut drained = true;
        while let Some(next) = self
            .order
            .next(complete, max_records, BatchEnds::AtTheFetch)?
        {
            self.enter_batch(next.batch.append_time())?;
            read += match next.side {
                Side::Table => self.apply_table_batch(&next)?,
                Side::Stream => {
                    let n = self.process_batch(&next)?;
                    processed += n;
                    n
                }
            };
            self.order.processed_to(next.side, next.partition, next.to);
            if read >= budget || self.signal.is_set() {
                drained = false;
                break;
            }
        }
        Ok((processed, drained))
    }

    /// Moves log time forward to `t` (never back) and applies what the
    /// watermark at `t` closes, expires and prunes.
    fn advance_log_time(&mut self, t: i64) -> Result<()> {
        if t <= self.log_time {
            return Ok(());
        }
        self.log_time = t;
        let before = self.watermark.current();
        let watermark = self.watermark.watermark(t);
        if watermark > before {
            self.watermark_advanced(watermark)?;
        }
        Ok(())
    }

    /// Closes windows, expires dedup entries and prunes join history up to
    /// the new `watermark`.
    fn watermark_advanced(&mut self, watermark: i64) -> Result<()> {
        if let Some(a) = &mut self.aggregate {
            a.advance(&self.store, watermark)?;
        }
        if let Some(d) = &mut self.dedup {
            d.expire(watermark);
        }
        if let Some(j) = &mut self.stream_join {
            // Outer joins' unmatched events, leaving the buffers.
            for event in j.expire(watermark) {
                self.apply_event(event, watermark)?;
            }
        }
        // As the definition says (JOIN_HISTORY), else: windowed, events
        // behind the watermark by more than the grace are late, so no
        // event needs older history; otherwise a day is kept.
        let window_grace = match &self.plan.operation {
            Operation::Aggregate(spec) => spec.window.as_ref().map(|w| w.grace_ms),
            _ => None,
        };
        for j in &mut self.tables {
            let keep = j
                .history_ms()
                .or(window_grace)
                .unwrap_or(crate::operator::join::DEFAULT_HISTORY_MS);
            j.prune(watermark.saturating_sub(keep));
        }
        Ok(())
    }

    /// Processes a stream batch's records, the batch checked whole first
    /// (a damaged one fails with the log's damage error: [`InputOrder::check`]);
    /// returns how many.
    fn process_batch(&mut self, next: &NextBatch) -> Result<u64> {
        let append_time = next.batch.append_time();
        let batch = self.order.check(next)?;
        let buffer = batch.as_bytes();
        let mut processed = 0;
        for record in batch.record_refs() {
            let offset = record.offset;
            let outbox_before = self.outbox.len();
            self.process(next.partition, record, buffer, append_time)?;
            self.drop_what_a_lost_run_wrote(next.partition, offset, outbox_before);
            processed += 1;
            self.uncommitted_records += 1;
            // The commit covers the records processed so far.
            self.order
                .processed_to(Side::Stream, next.partition, offset + 1);
            if self.pending_entries() > self.options.pending_entries_max {
                self.commit()?;
            }
        }
        Ok(processed)
    }

    /// Applies a table batch's records to the join's table, the batch
    /// checked whole first (as [`Runtime::process_batch`]); returns how many.
    pub(crate) fn apply_table_batch(&mut self, next: &NextBatch) -> Result<u64> {
        if self.is_joined_stream(next) {
            return self.apply_joined_stream_batch(next);
        }
        let (place, _) = JoinedTables::table_of(self.order.table_topic(), next.partition);
        let batch = self.order.check(next)?;
        if let Some(join) = &mut self.tables_join {
            let mut applied = 0;
            for r in batch.record_refs() {
                let key = r
                    .key
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .unwrap_or_default();
                match join.row_of_record(&key, r.value) {
                    Some(row) => join.upsert(key, row),
                    None => self.progress.count_invalid(),
                }
                applied += 1;
                self.uncommitted_records += 1;
            }
            return Ok(applied);
        }
        // Places count the first join, which a joined stream's is not here.
        let index = place - usize::from(self.stream_join.is_some());
        let Some(join) = self.tables.get_mut(index) else {
            return Ok(0);
        };
        let mut applied = 0;
        for r in batch.record_refs() {
            let key = r
                .key
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .unwrap_or_default();
            let value = join.row_of(r.value);
            // From the table's time column when it has one (a deletion has
            // no value: its record timestamp).
            let at = join
                .time_field()
                .and_then(|path| path.iter().try_fold(&value, |v, p| v.get(p)))
                .and_then(parse_timestamp)
                .unwrap_or(r.timestamp);
            join.upsert(key, value, at);
            applied += 1;
            self.uncommitted_records += 1;
        }
        Ok(applied)
    }

    /// True if `next` is a batch of the stream a stream-stream join joins:
    /// the first place of the table side ([`JoinedTables::table_of`]).
    pub(crate) fn is_joined_stream(&self, next: &NextBatch) -> bool {
        next.side == Side::Table
            && self.stream_join.is_some()
            && JoinedTables::table_of(self.order.table_topic(), next.partition).0 == 0
    }

    /// Joins a joined stream's batch's records, the batch checked whole
    /// first (as [`Runtime::process_batch`]); returns how many.
    fn apply_joined_stream_batch(&mut self, next: &NextBatch) -> Result<u64> {
        let batch = self.order.check(next)?;
        let append_time = next.batch.append_time();
        let max_future_ms = self.plan.source.max_future_ms;
        let mut applied = 0;
        for record in batch.record_refs() {
            applied += 1;
            self.uncommitted_records += 1;
            self.event_seq += 1;
            let join = self.stream_join.as_ref().expect("a stream join");
            let input = JoinedInput::of(next.partition, &record);
            let decoded = join
                .joined_decoder()
                .decode(input, append_time, max_future_ms);
            self.join_joined(next.partition, record.offset, decoded, append_time)?;
        }
        Ok(applied)
    }

    /// Joins the joined stream's record at `offset` of `partition`,
    /// appended at `append_time` and decoded
    /// ([`crate::operator::stream_join::JoinedDecoder::decode`]):
    /// it moves the watermark (the joined stream's partitions come after
    /// the stream's) and joins the stream's buffered events
    /// ([`StreamJoin`]), and the commit then covers it.
    pub(crate) fn join_joined(
        &mut self,
        partition: u32,
        offset: u64,
        decoded: JoinedRecord,
        append_time: i64,
    ) -> Result<()> {
        let (event_time, event) = match decoded {
            JoinedRecord::Invalid | JoinedRecord::Future => {
                self.progress.count_invalid();
                return Ok(());
            }
            JoinedRecord::Filtered(event_time) => (event_time, None),
            JoinedRecord::Event(event) => (event.event_time, Some(event)),
        };
        let first_partition = self.order.stream_positions().len() as u32;
        let advanced = self.observe(first_partition + partition, event_time, append_time)?;
        let join = self.stream_join.as_mut().expect("a stream join");
        match event.map(|event| join.right_event_joined(*event, advanced)) {
            // It failed the filter: late or not, it joins nothing.
            None if join.is_late(event_time, advanced) => self.progress.count_late_dropped(),
            None => {}
            Some(Joined::Late(_)) => self.progress.count_late_dropped(),
            Some(Joined::Rows(rows)) => {
                for row in rows {
                    self.apply_event(row, advanced)?;
                }
            }
        }
        // The commit covers the records joined so far.
        self.order.processed_to(Side::Table, partition, offset + 1);
        if self.pending_entries() > self.options.pending_entries_max {
            self.commit()?;
        }
        Ok(())
    }

    /// Processes one record, read from the batch `buffer` and appended at
    /// `append_time` (its log time).
    fn process(
        &mut self,
        partition: u32,
        record: RecordRef<'_>,
        buffer: &bytes::Bytes,
        append_time: i64,
    ) -> Result<()> {
        if let Some(dedup) = &mut self.source_dedup {
            let source = record
                .headers
                .iter()
                .find(|h| h.name == crate::spread::repartition::SOURCE_HEADER)
                .map(|h| h.value);
            if !dedup.admit(source) {
                self.progress.count_duplicate();
                return Ok(());
            }
        }
        if self.table_rows.is_some() && is_tombstone(record.value) {
            return self.delete_table_row(partition, &record, append_time);
        }
        if let Some(project) = &mut self.located_projection {
            // The row is written to a buffer kept from record to record.
            let mut rows = std::mem::take(&mut self.projected_rows);
            rows.clear();
            let projected = project.project_located(&self.decoder, &record, append_time, &mut rows);
            let done = match projected {
                Some(Projected::Filtered(event_time)) => {
                    let prepared = Prepared::Filtered { event_time };
                    Some(self.process_prepared(partition, prepared, append_time))
                }
                Some(Projected::Row(row)) => {
                    let texts = row.texts(&rows, &mut 0);
                    Some(self.process_projected(partition, row, texts, append_time))
                }
                None => None,
            };
            self.projected_rows = rows;
            if let Some(done) = done {
                return done;
            }
        }
        let prepared = match self.decoder.decode(partition, record, buffer, append_time) {
            Decoded::Invalid => {
                self.progress.count_invalid();
                return Ok(());
            }
            Decoded::Future(event) => Prepared::Future(event),
            Decoded::Filtered { event_time } => Prepared::Filtered { event_time },
            Decoded::Valid {
                mut event,
                filtered,
            } => {
                if let Some(crate::plan::SpreadStage::AfterJoinedRepartition { alias }) =
                    &self.plan.spread_stage
                {
                    // The row the first stage joined the event with.
                    let row = record
                        .headers
                        .iter()
                        .find(|h| h.name == crate::spread::repartition::JOINED_HEADER)
                        .and_then(|h| serde_json::from_slice(h.value).ok())
                        .unwrap_or(Value::Null);
                    event.joined = vec![(alias.clone(), row)];
                }
                Prepared::Event { event, filtered }
            }
        };
        self.process_prepared(partition, prepared, append_time)
    }

    /// A declared table's record with a null value (`partition`, appended
    /// at `append_time`): its key's row is deleted. Its record timestamp
    /// moves the watermark (it has no value to read a time from).
    fn delete_table_row(
        &mut self,
        partition: u32,
        record: &RecordRef<'_>,
        append_time: i64,
    ) -> Result<()> {
        self.event_seq += 1;
        self.observe(partition, record.timestamp, append_time)?;
        let key = record
            .key
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default();
        if let Some(rows) = &mut self.table_rows {
            rows.upsert(key, None);
        }
        Ok(())
    }

    /// Processes one decoded record of `partition`, appended at
    /// `append_time`: the watermark, dedup, join, filter and the operation,
    /// in the version's processing order.
    pub(crate) fn process_prepared(
        &mut self,
        partition: u32,
        prepared: Prepared,
        append_time: i64,
    ) -> Result<()> {
        self.event_seq += 1;
        let (mut event, filtered) = match prepared {
            Prepared::Future(event) => {
                self.future_event(&event, append_time);
                return Ok(());
            }
            Prepared::Filtered { event_time } => {
                self.observe(partition, event_time, append_time)?;
                return Ok(());
            }
            Prepared::Event { event, filtered } => (event, filtered),
        };
        let advanced = self.observe(partition, event.event_time, append_time)?;
        if let Some(d) = &mut self.dedup {
            if d.is_duplicate(&event) {
                self.progress.count_duplicate();
                return Ok(());
            }
        }
        if self.stream_join.is_none() && !enrich(&self.tables, &mut event) {
            return Ok(());
        }
        if let Some(j) = &mut self.stream_join {
            match j.left_event(event, advanced) {
                Joined::Late(event) => self.late(&event),
                Joined::Rows(rows) => {
                    for row in rows {
                        self.apply_event(row, advanced)?;
                    }
                }
            }
            return Ok(());
        }
        if filtered {
            return self.apply_filtered(event, advanced);
        }
        self.apply_event(event, advanced)
    }

    /// Processes a projection's row made by the projection path, its
    /// record's key and value given: the watermark, and the record handed
    /// to its sequenced topic at once, when it is one and nothing may drop
    /// the record later (a lost run's records), after the outbox's records,
    /// which come before it; else put in the outbox.
    pub(crate) fn process_projected(
        &mut self,
        partition: u32,
        row: ProjectedRow,
        (key, value): (Option<&[u8]>, &[u8]),
        append_time: i64,
    ) -> Result<()> {
        self.event_seq += 1;
        self.observe(partition, row.event_time, append_time)?;
        let direct = self
            .projected_sequenced
            .filter(|_| self.written_by_lost_run.is_none());
        if let Some(topic) = direct {
            if !self.outbox.is_empty() {
                self.drain_sequenced()?;
            }
            return self.sequenced.push(topic, key, value, row.event_time);
        }
        let project = self.project.as_ref().expect("a projection's version");
        // The texts were written as UTF-8 ([`ProjectedRow`]): nothing is
        // replaced.
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        self.outbox.push(OutRecord {
            topic: project.topic.clone(),
            key: key.map(text),
            value: text(value),
            timestamp: row.event_time,
            source: None,
            joined: None,
            seq: self.event_seq,
        });
        Ok(())
    }

    /// Applies the filter and the operation to `event` (after dedup and
    /// join) at `advanced`, the watermark its record moved to.
    fn apply_event(&mut self, mut event: Event, advanced: i64) -> Result<()> {
        // A join of two streams' pairs meet the tables joined after it.
        if self.stream_join.is_some() && !enrich(&self.tables, &mut event) {
            return Ok(());
        }
        if let Some(filter) = &self.plan.filter {
            if !filter.is_true(&event) {
                return Ok(());
            }
        }
        self.apply_filtered(event, advanced)
    }

    /// Applies the operation to `event`, which passed the filter.
    fn apply_filtered(&mut self, event: Event, advanced: i64) -> Result<()> {
        if let (
            Some(crate::plan::SpreadStage::Repartition { topic, partition }),
            Operation::Aggregate(spec),
        ) = (&self.plan.spread_stage, &self.plan.operation)
        {
            // The first stage of a repartitioned view: re-key, nothing more.
            let grouped = crate::operator::aggregate::GroupedEvent::of(spec, &event);
            self.outbox.push(OutRecord {
                topic: Arc::from(topic.as_str()),
                key: Some(String::from_utf8_lossy(grouped.key_bytes()).into_owned()),
                value: String::from_utf8_lossy(&event.raw_value).into_owned(),
                timestamp: event.record_timestamp,
                source: Some((*partition, event.offset)),
                joined: event.joined.first().map(|(_, row)| row.to_string()),
                seq: self.event_seq,
            });
            return Ok(());
        }
        match &self.plan.operation {
            Operation::Project { columns } => {
                if let Some(rows) = &mut self.table_rows {
                    let row: serde_json::Map<String, Value> = columns
                        .iter()
                        .map(|(name, e)| (name.clone(), e.eval(&event)))
                        .collect();
                    let key = event.key_text().unwrap_or_default().to_string();
                    rows.upsert(key, Some(Value::Object(row)));
                } else if let Some(project) = &mut self.project {
                    self.outbox.push(OutRecord {
                        topic: project.topic.clone(),
                        key: match &self.plan.partition_by {
                            Some(by) => crate::expr::stringify(&by.eval(&event)),
                            None => event.key_text().map(str::to_string),
                        },
                        value: project.row.write_text(columns, &event),
                        timestamp: event.event_time,
                        source: None,
                        joined: None,
                        seq: self.event_seq,
                    });
                }
            }
            Operation::Aggregate(spec) => {
                let late_side_output = self.late_side_output();
                let late = match self
                    .aggregate
                    .as_mut()
                    .expect("aggregate plans have the operator")
                {
                    Aggregation::Local(op) => {
                        op.apply(&self.store, &event, advanced)? == Outcome::Late
                    }
                    Aggregation::Sharded(pool) => {
                        let event = ShardEvent::of(spec, &event, late_side_output);
                        let shard = event.shard(pool.count());
                        let mark = Mark {
                            watermark: advanced,
                            seq: self.event_seq,
                        };
                        pool.apply(shard, event, mark)?;
                        return Ok(());
                    }
                };
                if late {
                    self.late(&event);
                }
            }
        }
        Ok(())
    }

    /// Processes an event of `partition` (appended at `append_time`, at
    /// `event_time`) that a source worker grouped for a key shard: what
    /// [`Runtime::process_prepared`] does with it when no dedup or join
    /// comes before the aggregate and the filter was applied — the
    /// watermark. Returns how the shard applies it; the event goes to its
    /// shard with the others of its batch ([`Runtime::route_grouped`]).
    pub(crate) fn process_grouped(
        &mut self,
        partition: u32,
        event_time: i64,
        append_time: i64,
    ) -> Result<Mark> {
        self.event_seq += 1;
        let watermark = self.observe(partition, event_time, append_time)?;
        Ok(Mark {
            watermark,
            seq: self.event_seq,
        })
    }

    /// Sends each key shard its grouped events of a batch (`grouped[s]`
    /// for shard `s`) with their marks, in order.
    pub(crate) fn route_grouped(
        &mut self,
        grouped: Vec<Vec<ShardEvent>>,
        marks: Vec<Vec<Mark>>,
    ) -> Result<()> {
        if grouped.iter().all(Vec::is_empty) {
            return Ok(());
        }
        let Some(Aggregation::Sharded(pool)) = &mut self.aggregate else {
            unreachable!("source workers group events only for key shards")
        };
        for (shard, (events, marks)) in grouped.into_iter().zip(marks).enumerate() {
            pool.apply_run(shard, events, marks)?;
        }
        Ok(())
    }

    /// Processes `records` consecutive records of one batch of `partition`
    /// (appended at `append_time`) that failed the early filter, the
    /// largest of their event times being `max_event_time`: exactly what
    /// processing them one by one ([`Prepared::Filtered`]) does, with one
    /// watermark step instead of `records`.
    ///
    /// Why it is the same: a filtered record only moves the watermark. Its
    /// `observe` raises the partition's largest event time and sets the
    /// partition's last log time to `append_time` — the same for the whole
    /// run, as is the version's log time — so after the run's first record
    /// the set of active partitions no longer changes, and the candidate
    /// watermark (the minimum over active partitions, or the maximum when
    /// all are idle) only grows with the partition's maximum. The emitted
    /// watermark is the running maximum of the candidates, so after the run
    /// it is the candidate of the run's maximum: what this one `observe`
    /// gives. Moving the aggregate's watermark to `w1` and then to `w2`
    /// with nothing applied in between is moving it to `w2` (the shards
    /// close windows lazily, to the latest watermark; dedup and join never
    /// come with an early filter). The processing order (`event_seq`)
    /// still counts every record.
    pub(crate) fn process_filtered_run(
        &mut self,
        partition: u32,
        max_event_time: i64,
        records: u32,
        append_time: i64,
    ) -> Result<()> {
        self.event_seq += u64::from(records);
        self.observe(partition, max_event_time, append_time)?;
        Ok(())
    }

    /// Observes an event time of `partition` appended at `append_time`;
    /// returns the watermark including it, having applied what its advance
    /// closes. Lateness is judged against this watermark (which closed
    /// windows before the event is applied, so an event never lands in a
    /// window already closed — with several partitions, one event can move
    /// the watermark past its own windows). The event's own time never
    /// makes it late: its windows end after it. The watermark moves per
    /// record, so results do not depend on how records were batched into
    /// polls.
    fn observe(&mut self, partition: u32, event_time: i64, append_time: i64) -> Result<i64> {
        let watermark = self.watermark.current();
        self.watermark
            .observe(partition as usize, event_time, append_time);
        self.log_time = self.log_time.max(append_time);
        let advanced = self.watermark.watermark(self.log_time);
        if advanced > watermark {
            self.watermark_advanced(advanced)?;
        }
        Ok(advanced)
    }

    /// An event time beyond `MAX_FUTURE` of its append time: invalid,
    /// counted, and sent to the late topic if there is one. It never
    /// reaches the watermark or state.
    fn future_event(&mut self, event: &Event, append_time: i64) {
        tracing::debug!(
            processor = %self.scope.name,
            partition = event.partition,
            offset = event.offset,
            event_time = event.event_time,
            append_time,
            max_future_ms = self.plan.source.max_future_ms,
            "event time too far after the append time: invalid"
        );
        self.progress.count_invalid();
        if let LateHandling::SideOutput(topic) = &self.plan.late {
            let record = OutRecord::side_output(topic, event, self.event_seq);
            self.outbox.push(record);
        }
    }

    /// Late events go to a side output.
    fn late_side_output(&self) -> bool {
        matches!(self.plan.late, LateHandling::SideOutput(_))
    }

    fn late(&mut self, event: &Event) {
        match &self.plan.late {
            LateHandling::Drop => self.progress.count_late_dropped(),
            LateHandling::SideOutput(topic) => {
                self.progress.count_late_side_output();
                let record = OutRecord::side_output(topic, event, self.event_seq);
                self.outbox.push(record);
            }
        }
    }

    /// True when the last poll caught up with the input and records were
    /// applied since the last commit (and [`RunOptions::commit_when_caught_up`]).
    pub fn caught_up_with_work(&self) -> bool {
        self.options.commit_when_caught_up && self.caught_up && self.uncommitted_records > 0
    }

    /// True when the commit interval has passed since the last commit —
    /// or, while the version works through a backlog (its last poll did
    /// not catch up: a build, a replay, a restart after downtime), the
    /// longer [`RunOptions::catch_up_commit_interval_ms`].
    pub fn commit_due(&self) -> bool {
        let interval = match self.caught_up {
            true => self.options.commit_interval_ms,
            false => self
                .options
                .commit_interval_ms
                .max(self.options.catch_up_commit_interval_ms),
        };
        self.last_commit.elapsed() >= Duration::from_millis(interval)
    }

    /// The signal that ends [`Runtime::run`]: keep it before moving the
    /// runtime to its thread.
    pub fn stop_signal(&self) -> Arc<StopSignal> {
        self.signal.clone()
    }

    /// Processes until the [`StopSignal`] is set: polls, waits for new
    /// records without polling when caught up, and commits every interval.
    /// A final commit runs on a stop, none when the version is abandoned.
    pub fn run(mut self) -> Result<()> {
        while !self.signal.is_set() {
            let processed = self.poll_once()?;
            if self.signal.is_abandoned() {
                break;
            }
            if self.commit_due() || self.caught_up_with_work() {
                self.commit()?;
            }
            if processed == 0 && !self.signal.is_set() {
                let timeout = Duration::from_millis(
                    (self.options.commit_interval_ms).min(self.options.idle_wait_max_ms),
                );
                match self.order.held_back() {
                    // Input is there, the log is not yet complete up to it
                    // (the current millisecond, or an append in flight).
                    Some(t) => {
                        self.source
                            .wait_complete(t, &self.order.inputs(), timeout, &self.signal)
                    }
                    None => self
                        .source
                        .wait_for_input(&self.order.inputs(), timeout, &self.signal),
                }
            }
        }
        if self.signal.is_abandoned() {
            return Ok(());
        }
        self.commit()
    }

    /// Approximate bytes of this version's state and view rows.
    pub fn state_bytes(&self) -> u64 {
        let size = |cf: String| self.store.size(&cf).unwrap_or(0);
        size(self.scope.state_cf()) + size(self.scope.view_cf()) + size(self.scope.stage_cf())
    }

    /// The version's scope (name and version).
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Input offsets processed so far (committed or not).
    pub fn positions(&self) -> &[u64] {
        self.order.stream_positions()
    }

    /// Offsets of the joined table's (or joined stream's) topic processed
    /// so far; empty without a join.
    pub fn joined_positions(&self) -> &[u64] {
        self.order.table_positions()
    }
}

/// The aggregate operator of `plan` (`None` for a projection), holding at
/// most `cache` clean slots in memory.
fn aggregate_op(plan: &Plan, scope: &Scope, cache: usize) -> Option<AggregateOp> {
    match &plan.operation {
        // An aggregate whose rows another aggregates (`Plan::then`) keeps
        // them in the stage column family and always hands out changes; a
        // hopping window's final row, handed out once, is not kept (nothing
        // reads it again).
        Operation::Aggregate(spec) if plan.then.is_some() => Some(AggregateOp::new(
            spec.clone(),
            scope.state_cf(),
            scope.stage_cf(),
            cache,
            true,
            !RowsAggregate::inner_rows_are_final(spec),
        )),
        Operation::Aggregate(spec) => Some(AggregateOp::new(
            spec.clone(),
            scope.state_cf(),
            scope.view_cf(),
            cache,
            plan.sink != Sink::View,
            plan.sink == Sink::View,
        )),
        Operation::Project { .. } => None,
    }
}

/// Whether a table's record value is a deletion: empty, or JSON `null`.
fn is_tombstone(value: &[u8]) -> bool {
    let trimmed = value.trim_ascii();
    trimmed.is_empty() || trimmed == b"null"
}

/// Joins `event` with each table in turn (a table's key may read the rows
/// joined before it); false once an inner join finds no row.
fn enrich(tables: &[TableJoin], event: &mut Event) -> bool {
    tables.iter().all(|table| table.enrich(event))
}
