//! The SQL statement executor: runs one parsed statement (a declaration,
//! `CREATE [OR REPLACE] .. AS SELECT`, `DROP`, `SHOW`, `DESCRIBE` or a pull
//! query) against the log and the views and answers its typed result
//! ([`crate::dto::statements`]). `POST /v1/statements` parses the request,
//! calls [`Executor::execute`] per statement and serializes the results.
//!
//! Everything here blocks (the catalog, RocksDB, creating topics): it runs
//! on the route's statement thread, never on an async worker.
//!
//! Topics a statement creates (a declaration's, a derived stream's output)
//! get the server's topic defaults ([`crate::ServerConfig::topic_defaults`]),
//! the same as `POST /v1/topics` and the processors' own output topics.

pub(crate) mod dependents;
mod describe;

/// A view's output columns, their SQL types and which are its key.
pub(crate) use describe::columns as view_columns;
mod pull;
pub mod run;
mod sources;
pub mod versions;

use kappa_log::{Log, LogError, TopicConfig};
use kappa_processor::plan::{Operation, Plan, Sink};
use kappa_processor::sql::{
    self, CreateAs, ObjectKind, ShowWhat, SourceDecl, SqlError, Statement, VersionChange,
};

use crate::dto::statements::{
    CreatedOut, DeclaredOut, DescribedOut, DroppedOut, ExplainedOut, OperatorOut, SettingsOut,
    ShowRow, ShownOut, StatementOut, VersionChangedOut,
};
use crate::dto::IntoWire;
use crate::views::manager::{Change, Swap, ViewSettings};
use crate::views::{ViewError, ViewManager};
use sources::Sources;

/// Why a statement failed; `crate::error` maps each to a status.
#[derive(Debug, thiserror::Error)]
pub enum StatementError {
    /// The statement does not plan (an unknown column, a type error).
    #[error(transparent)]
    Sql(#[from] SqlError),
    /// The log refused (a topic name, a full disk).
    #[error(transparent)]
    Log(Box<LogError>),
    /// The views refused (unknown, exists, has dependents).
    #[error(transparent)]
    View(Box<ViewError>),
    /// The statement makes no sense for its object (`DROP STREAM` of a
    /// table, a pull query by a column that is not the key).
    #[error("{0}")]
    BadRequest(String),
    /// The Kappa cluster could not run it now (its control topic did not
    /// answer, or this node has not read that far yet).
    #[error("{0}")]
    Unavailable(String),
    /// A replay's start offsets are not in its input (more offsets than
    /// partitions, or one beyond a partition's end).
    #[error("{0}")]
    OffsetOutOfRange(String),
}

/// What running a request's statements did: each one's result up to the
/// first that failed, and that one's index and error.
#[derive(Debug, Default)]
pub struct Applied {
    /// The results of the statements that ran, in order.
    pub results: Vec<StatementOut>,
    /// The statement that failed (the ones after it did not run).
    pub failed: Option<(usize, StatementError)>,
}

/// True for a statement that changes the catalog: in a Kappa cluster it
/// runs on every node ([`crate::nodes::Nodes::submit`]).
pub fn changes_catalog(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::CreateSource(_) | Statement::CreateAs(_) | Statement::Drop { .. }
    )
}

/// Parses and runs `sql` on this node with every right (a statement of
/// the Kappa cluster's control topic, checked where it was taken).
pub fn apply_text(state: &crate::AppState, sql: &str) -> Applied {
    let statements = match sql::parse(sql) {
        Ok(s) => s,
        Err(e) => {
            return Applied {
                results: Vec::new(),
                failed: Some((0, e.into())),
            }
        }
    };
    Executor::of(state).execute_all(statements)
}

impl From<LogError> for StatementError {
    fn from(e: LogError) -> Self {
        StatementError::Log(Box::new(e))
    }
}

impl From<ViewError> for StatementError {
    fn from(e: ViewError) -> Self {
        StatementError::View(Box::new(e))
    }
}

/// Runs statements against one server's log and views.
pub struct Executor<'a> {
    /// The log (topics are created here).
    pub log: &'a Log,
    /// The views and their catalog.
    pub views: &'a ViewManager,
    /// The Kafka clusters the server knows (`SHOW CLUSTERS`).
    pub clusters: &'a crate::clusters::Clusters,
    /// What a topic created by a statement gets.
    pub topic_defaults: TopicConfig,
    /// In a Kappa cluster, how a pull query reads the rows other nodes
    /// hold (`None`: this node's rows only).
    pub across: Option<AcrossNodes<'a>>,
}

/// A pull query's reach over a Kappa cluster's nodes.
pub struct AcrossNodes<'a> {
    /// The cluster's nodes.
    pub nodes: &'a crate::nodes::Nodes,
    /// The caller's `Authorization` header, passed on to the nodes asked.
    pub authorization: Option<String>,
}

impl<'a> Executor<'a> {
    /// The executor of the node `state`.
    pub fn of(state: &'a crate::AppState) -> Executor<'a> {
        Executor {
            log: &state.log,
            views: &state.views,
            clusters: &state.clusters,
            topic_defaults: state.config.topic_defaults(),
            across: None,
        }
    }

    /// The executor of the node `state` whose pull queries read every
    /// node of its Kappa cluster (when it is in one), asking them as the
    /// caller (`authorization`).
    pub fn across_nodes(state: &'a crate::AppState, authorization: Option<String>) -> Self {
        Executor {
            across: state.nodes.as_ref().map(|nodes| AcrossNodes {
                nodes,
                authorization,
            }),
            ..Executor::of(state)
        }
    }

    /// Runs `statements` in order until one fails.
    pub fn execute_all(&self, statements: Vec<Statement>) -> Applied {
        let mut applied = Applied::default();
        for (i, statement) in statements.into_iter().enumerate() {
            match self.execute(statement) {
                Ok(out) => applied.results.push(out),
                Err(e) => {
                    applied.failed = Some((i, e));
                    break;
                }
            }
        }
        applied
    }
}

impl Executor<'_> {
    /// Runs one statement.
    pub fn execute(&self, statement: Statement) -> Result<StatementOut, StatementError> {
        Ok(match statement {
            Statement::CreateSource(decl) => StatementOut::Declared(self.declare(decl)?),
            Statement::CreateAs(create) => StatementOut::Created(self.create_as(create)?),
            Statement::Drop {
                kind,
                name,
                if_exists,
            } => StatementOut::Dropped(self.drop_object(kind, &name, if_exists)?),
            Statement::Show(what) => StatementOut::Shown(self.show(what)),
            Statement::Describe(name) => StatementOut::Described(Box::new(self.describe(&name)?)),
            Statement::Select(query) => StatementOut::Selected(self.select(&query)?),
            Statement::Explain(what) => StatementOut::Explained(self.explain(what)?),
            Statement::InsertInto(insert) => StatementOut::Created(self.insert_into(insert)?),
            Statement::ChangeVersion(change) => {
                StatementOut::VersionChanged(self.change_version(change)?)
            }
        })
    }

    /// `REPLAY`, `PROMOTE` or `ROLLBACK`: as the HTTP routes run them, on
    /// every node of a Kappa cluster when this executor reaches across
    /// nodes ([`versions`]).
    fn change_version(&self, change: VersionChange) -> Result<VersionChangedOut, StatementError> {
        let versions = versions::Versions {
            log: self.log,
            views: self.views,
            nodes: self.across.as_ref().map(|a| a.nodes),
        };
        let statement = change.keyword().to_string();
        let served = |name: String, out: crate::dto::ServedOut| VersionChangedOut {
            statement: statement.clone(),
            name,
            building_version: None,
            served_version: Some(out.served_version),
            previous_version: Some(out.previous_version),
            from: None,
        };
        Ok(match change {
            VersionChange::Replay {
                name,
                from,
                swap_manual,
                allow_truncated,
            } => {
                let request = crate::dto::ReplayRequest {
                    from: from.into_wire(),
                    allow_truncated,
                    swap: if swap_manual {
                        crate::dto::SwapMode::Manual
                    } else {
                        crate::dto::SwapMode::Auto
                    },
                };
                let out = versions.replay(&name, request)?;
                VersionChangedOut {
                    statement: statement.clone(),
                    name,
                    building_version: out.building_version,
                    served_version: out.served_version,
                    previous_version: None,
                    from: Some(out.from),
                }
            }
            VersionChange::Promote { name } => served(name.clone(), versions.promote(&name)?),
            VersionChange::Rollback { name } => served(name.clone(), versions.rollback(&name)?),
        })
    }

    /// `INSERT INTO target SELECT ..`: a derived stream appending to the
    /// topic of stream `target` (declared, or made by a query), named by
    /// its `QUERY_ID`. Refused into a table, into a stream on a Kafka
    /// cluster, from the target itself (it would read what it writes), and
    /// with columns the target does not declare.
    fn insert_into(&self, insert: sql::InsertInto) -> Result<CreatedOut, StatementError> {
        let catalog = self.views.catalog();
        let target = &insert.target;
        let bad = |reason: String| Err(StatementError::BadRequest(reason));
        let (topic, columns): (String, Option<Vec<String>>) = if let Some(decl) =
            catalog.sources.get(target)
        {
            if decl.kind == ObjectKind::Table {
                return bad(format!(
                    "INSERT INTO writes a stream; '{target}' is a table"
                ));
            }
            if let Some(cluster) = &decl.cluster {
                return bad(format!(
                        "INSERT INTO a stream on a Kafka cluster is not supported; '{target}' lives on cluster '{cluster}'"
                    ));
            }
            let declared: Vec<String> = decl.columns.iter().map(|c| c.name.clone()).collect();
            (
                decl.topic.clone(),
                (!declared.is_empty()).then_some(declared),
            )
        } else if let Some(view) = catalog.views.get(target) {
            let Some(topic) = view.output_topic() else {
                return bad(format!(
                    "INSERT INTO writes a stream; '{target}' is a table"
                ));
            };
            if view.served.plan.sink_cluster.is_some() {
                return bad(format!(
                        "INSERT INTO a stream on a Kafka cluster is not supported; '{target}' writes to one"
                    ));
            }
            let columns = match &view.served.plan.operation {
                Operation::Project { columns } => {
                    Some(columns.iter().map(|(n, _)| n.clone()).collect())
                }
                Operation::Aggregate(_) => None,
            };
            (topic.to_string(), columns)
        } else {
            return Err(ViewError::UnknownView(target.clone()).into());
        };
        let create = sql::insert_create(&insert, &topic)?;
        let plan = sql::plan(&create, &Sources(catalog.clone()))?;
        let reads_target =
            plan.source.topic == topic || plan.joined_topics().contains(&topic.as_str());
        if reads_target {
            return bad(format!(
                "INSERT INTO '{target}' reads '{target}' itself: it would read what it writes, without end"
            ));
        }
        if let (Some(columns), Operation::Project { columns: selected }) =
            (&columns, &plan.operation)
        {
            if let Some((name, _)) = selected.iter().find(|(n, _)| !columns.contains(n)) {
                return bad(format!(
                    "INSERT INTO '{target}': column '{name}' is not a column of '{target}' ({})",
                    columns.join(", ")
                ));
            }
        }
        let created = self.create_as(create)?;
        Ok(CreatedOut {
            statement: "INSERT INTO".to_string(),
            ..created
        })
    }

    /// `EXPLAIN`: the operators of the plan a `CREATE .. AS` would run
    /// (planned, not created), or of the plan a view serves with the state
    /// each keeps now.
    fn explain(&self, what: sql::Explain) -> Result<ExplainedOut, StatementError> {
        use kappa_processor::sql::explain;
        let (name, plan, live, state_bytes) = match what {
            sql::Explain::Select(query) => return self.explain_select(&query),
            sql::Explain::Create(create) => {
                let plan = sql::plan(&create, &Sources(self.views.catalog()))?;
                (create.name, plan, Default::default(), None)
            }
            sql::Explain::View(name) => {
                let catalog = self.views.catalog();
                let view = catalog
                    .views
                    .get(&name)
                    .ok_or_else(|| ViewError::UnknownView(name.clone()))?;
                let described = self.views.describe(&name)?;
                let live = self.views.operator_state(&name, view.served.version);
                (
                    name,
                    view.served.plan.clone(),
                    live,
                    Some(described.served_version.state_bytes),
                )
            }
        };
        let operators = explain::operators(&plan);
        let text = explain::render(&operators, &live, state_bytes);
        Ok(ExplainedOut {
            statement: "EXPLAIN".to_string(),
            name,
            operators: operators
                .into_iter()
                .map(|o| OperatorOut {
                    state_entries: o.gauge.and_then(|g| live.get(g).copied()),
                    operator: o.operator.to_string(),
                    detail: o.detail,
                    runs_on: o.runs_on.to_string(),
                    state: o.state,
                })
                .collect(),
            state_bytes,
            text,
        })
    }

    /// Creates `topic` with the server's topic defaults as `adjust`
    /// changes them, if missing; true if it did.
    fn ensure_topic(
        &self,
        topic: &str,
        adjust: impl FnOnce(&mut TopicConfig),
    ) -> Result<bool, StatementError> {
        if self.log.topic(topic).is_ok() {
            return Ok(false);
        }
        let mut config = self.topic_defaults.clone();
        adjust(&mut config);
        match self.log.create_topic(topic, config) {
            Ok(_) => Ok(true),
            Err(LogError::TopicExists(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Partitions of the topic `plan` reads as its stream, when it is on
    /// the built-in log: a derived stream's output topic gets as many
    /// unless `PARTITIONS` says otherwise (as ksqlDB's does), so that its
    /// appends are written by as many partition writers as its input's.
    fn source_partitions(&self, plan: &Plan) -> Option<u32> {
        if plan.source.cluster.is_some() {
            return None;
        }
        let topic = self.log.topic(&plan.source.topic).ok()?;
        Some(topic.partition_count())
    }

    fn declare(&self, decl: SourceDecl) -> Result<DeclaredOut, StatementError> {
        let (name, kind, topic) = (decl.name.clone(), decl.kind, decl.topic.clone());
        kappa_log::validate_topic_name(&topic)?;
        if let Some(existing) = self.views.catalog().sources.get(&name) {
            if *existing != decl {
                return Err(ViewError::Exists(name).into());
            }
        }
        let topic_created = match &decl.cluster {
            // The cluster's topic is the cluster's to create.
            Some(cluster) if self.clusters.get(cluster).is_some() => false,
            Some(cluster) => {
                return Err(StatementError::BadRequest(
                    self.clusters.not_configured(cluster),
                ))
            }
            None => self.ensure_topic(&topic, |config| {
                if let Some(p) = decl.partitions {
                    config.partitions = p;
                }
            })?,
        };
        let created = self.views.declare_source(decl, false)?;
        Ok(DeclaredOut {
            statement: format!("CREATE {}", kind.to_string().to_uppercase()),
            name,
            kind: kind.into_wire(),
            topic,
            status: if created { "created" } else { "unchanged" }.to_string(),
            topic_created,
        })
    }

    fn create_as(&self, create: CreateAs) -> Result<CreatedOut, StatementError> {
        let catalog = self.views.catalog();
        let mut plan = sql::plan(&create, &Sources(catalog.clone()))?;
        plan.name = create.name.clone();
        if let Sink::Topic(topic) = &plan.sink {
            kappa_log::validate_topic_name(topic)?;
            match &plan.sink_cluster {
                // The cluster's topic is the cluster's to create.
                Some(cluster) if self.clusters.get(cluster).is_some() => {}
                Some(cluster) => {
                    return Err(StatementError::BadRequest(
                        self.clusters.not_configured(cluster),
                    ))
                }
                None => {
                    let partitions = create.partitions.or_else(|| self.source_partitions(&plan));
                    self.ensure_topic(topic, |config| {
                        if let Some(p) = partitions {
                            config.partitions = p;
                        }
                        if let Some(codec) = create.compression {
                            config.compression = codec;
                        }
                        // Written once and read at its tail: the older
                        // bytes leave the page cache.
                        config.cached_tail_bytes = Some(kappa_log::DERIVED_CACHED_TAIL_BYTES);
                    })?;
                }
            }
        }
        let name = create.name.clone();
        let statement = format!("CREATE {} AS", create.kind.to_string().to_uppercase());
        let settings = ViewSettings {
            keep_versions: create.keep_versions,
            version_grace_ms: create.version_grace_ms.map(|ms| ms as u64),
            parallelism: create.parallelism,
        };
        let exists = catalog.views.contains_key(&name) || catalog.sources.contains_key(&name);
        let (status, version) = if exists && !create.or_replace {
            return Err(ViewError::Exists(name).into());
        } else if exists {
            let swap = if create.swap_manual {
                Swap::Manual
            } else {
                Swap::Auto
            };
            match self
                .views
                .replace(&name, plan, Some(create.sql), swap, settings)?
            {
                Change::Unchanged => ("unchanged", catalog.views[&name].latest().version),
                Change::Building(v) => ("building", v),
                Change::Served(v) => ("replaced", v),
            }
        } else {
            let version = self.views.create(&name, plan, Some(create.sql), settings)?;
            ("created", version)
        };
        Ok(CreatedOut {
            statement,
            name,
            kind: create.kind.into_wire(),
            status: status.to_string(),
            version,
        })
    }

    fn drop_object(
        &self,
        kind: ObjectKind,
        name: &str,
        if_exists: bool,
    ) -> Result<DroppedOut, StatementError> {
        let catalog = self.views.catalog();
        let found = match (catalog.views.get(name), catalog.sources.get(name)) {
            (Some(view), _) => Some((kind_of(view.is_table()), true)),
            (None, Some(decl)) => Some((decl.kind, false)),
            (None, None) => None,
        };
        let statement = format!("DROP {}", kind.to_string().to_uppercase());
        let answer = |status: &str| DroppedOut {
            statement: statement.clone(),
            name: name.to_string(),
            status: status.to_string(),
        };
        let Some((actual, is_view)) = found else {
            if if_exists {
                return Ok(answer("not_found"));
            }
            return Err(ViewError::UnknownView(name.to_string()).into());
        };
        if actual != kind {
            return Err(StatementError::BadRequest(format!(
                "{name:?} is a {actual}: use DROP {}",
                actual.to_string().to_uppercase()
            )));
        }
        let dropped = if is_view {
            self.views.drop_view(name)
        } else {
            self.views.drop_source(name)
        };
        dropped.map_err(|e| {
            dependents::explain(e, &self.views.catalog(), &format!("{actual} {name:?}"))
        })?;
        Ok(answer("dropped"))
    }

    fn show(&self, what: ShowWhat) -> ShownOut {
        if what == ShowWhat::Clusters {
            let rows = self
                .clusters
                .all()
                .map(|c| {
                    let status = c.status();
                    let metadata = status.metadata.as_ref();
                    ShowRow::Cluster {
                        name: c.name.clone(),
                        bootstrap_servers: c.config.bootstrap_servers.clone(),
                        reachable: status.checked_at_ms.map(|_| metadata.is_some()),
                        brokers: metadata.map_or(0, |m| m.brokers.len() as u32),
                        topics: metadata.map_or(0, |m| m.topics.len() as u32),
                        error: status.error,
                    }
                })
                .collect();
            return ShownOut {
                statement: "SHOW CLUSTERS".to_string(),
                rows,
            };
        }
        if what == ShowWhat::Topics {
            let rows = self
                .log
                .topics()
                .iter()
                .map(|t| ShowRow::Topic {
                    name: t.name().to_string(),
                    partitions: t.partition_count(),
                })
                .collect();
            return ShownOut {
                statement: "SHOW TOPICS".to_string(),
                rows,
            };
        }
        let catalog = self.views.catalog();
        let (wanted, statement) = match what {
            ShowWhat::Streams => (Some(ObjectKind::Stream), "SHOW STREAMS"),
            ShowWhat::Tables => (Some(ObjectKind::Table), "SHOW TABLES"),
            ShowWhat::Views | ShowWhat::Topics | ShowWhat::Clusters => (None, "SHOW VIEWS"),
        };
        let mut rows = Vec::new();
        if let Some(kind) = wanted {
            for decl in catalog.sources.values().filter(|d| d.kind == kind) {
                rows.push(ShowRow::Declared {
                    name: decl.name.clone(),
                    kind: decl.kind.into_wire(),
                    topic: decl.topic.clone(),
                    defined_by: "declaration".to_string(),
                });
            }
        }
        for view in catalog.views.values() {
            let kind = kind_of(view.is_table());
            // SHOW VIEWS lists the tables a query defines.
            if wanted.is_none_or(|w| w == kind) && (wanted.is_some() || view.is_table()) {
                rows.push(ShowRow::Query {
                    name: view.name.clone(),
                    kind: kind.into_wire(),
                    topic: view.output_topic().map(str::to_string),
                    source_topic: view.served.plan.source.topic.clone(),
                    defined_by: "query".to_string(),
                    version: view.served.version,
                });
            }
        }
        rows.sort_by(|a, b| a.name().cmp(b.name()));
        ShownOut {
            statement: statement.to_string(),
            rows,
        }
    }

    fn describe(&self, name: &str) -> Result<DescribedOut, StatementError> {
        let catalog = self.views.catalog();
        let defaults = sql::defaults::table()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        if let Some(view) = catalog.views.get(name) {
            return Ok(DescribedOut {
                statement: "DESCRIBE".to_string(),
                name: name.to_string(),
                view: Some(self.views.describe(name)?),
                columns: Some(describe::columns(&view.served.plan)),
                settings: Some(settings(&view.served.plan)),
                source: None,
                defaults,
            });
        }
        let decl = catalog
            .sources
            .get(name)
            .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
        Ok(DescribedOut {
            statement: "DESCRIBE".to_string(),
            name: name.to_string(),
            view: None,
            columns: None,
            settings: None,
            source: Some(decl.clone().into_wire()),
            defaults,
        })
    }
}

fn kind_of(is_table: bool) -> ObjectKind {
    if is_table {
        ObjectKind::Table
    } else {
        ObjectKind::Stream
    }
}

/// The settings a plan runs with: watermark delay, idle timeout, window
/// grace, emit mode, late events, deduplication.
fn settings(plan: &Plan) -> SettingsOut {
    let window = match &plan.operation {
        Operation::Aggregate(a) => a.window.as_ref(),
        Operation::Project { .. } => None,
    };
    SettingsOut {
        watermark_delay_ms: plan.source.out_of_orderness_ms,
        idle_timeout_ms: plan.source.idle_timeout_ms,
        max_future_ms: plan.source.max_future_ms,
        window: window.map(|w| w.window.into_wire()),
        grace_ms: window.map(|w| w.grace_ms),
        emit: window.map(|w| w.emit.into_wire()),
        late_events: plan.late.clone().into_wire(),
        dedup_ttl_ms: plan.dedup.as_ref().map(|d| d.ttl_ms),
    }
}
