//! Running a request's SQL as a principal: the one flow of every frontend
//! that takes statements (`POST /v1/statements`, the PostgreSQL
//! listener).
//!
//! The whole text is parsed, and every statement checked against the
//! principal's grants, before anything runs: a syntax error or a statement
//! it may not run changes nothing. Statements then run in order; the
//! first that fails stops the run (the ones before it stay applied). In a
//! Kappa cluster, a request that changes the catalog runs on every node,
//! in the control topic's order. Administrative statements are audited.
//!
//! Everything here blocks: run it on a statement thread
//! ([`on_sql_thread`]).

use kappa_processor::sql::{self, SqlError};

use super::{changes_catalog, Executor, StatementError};
use crate::auth::{self, Principal, Refusal};
use crate::dto::statements::{ShowRow, StatementOut};
use crate::AppState;

/// Most statements in one request.
pub const MAX_STATEMENTS: usize = 100;

/// Most statement requests handled at once (one statement thread each);
/// more wait.
pub const MAX_SQL_THREADS: usize = 8;

/// Why a request's statements did not all run.
#[derive(Debug)]
pub enum RunError {
    /// The text does not parse; nothing ran.
    Sql(SqlError),
    /// The text holds no statement.
    Empty,
    /// More than [`MAX_STATEMENTS`] statements.
    TooMany,
    /// Statement `index` needs what the principal lacks; nothing ran.
    Refused {
        /// Its index in the request.
        index: usize,
        /// What it lacks.
        refusal: Refusal,
    },
    /// The Kappa cluster did not take the request.
    Cluster(StatementError),
    /// Statement `index` failed; the ones before it ran.
    Failed {
        /// Its index in the request.
        index: usize,
        /// Why.
        error: StatementError,
        /// The request's administrative statements, to audit once the
        /// caller knows the failure's status.
        audit: Audit,
    },
}

/// The administrative statements of a request, audited with their outcome.
#[derive(Debug)]
pub struct Audit {
    actions: Vec<Option<(&'static str, String)>>,
}

impl Audit {
    /// Writes the audit line of each administrative statement that ran:
    /// status 200, and `failed`'s status for the one that failed (those
    /// after it did not run).
    pub fn record(self, principal: &Principal, failed: Option<(usize, u16)>) {
        for (i, action) in self.actions.into_iter().enumerate() {
            let status = match failed {
                Some((f, status)) if f == i => status,
                Some((f, _)) if f < i => break,
                _ => 200,
            };
            if let Some((kind, object)) = action {
                auth::audit::admin_action(principal, kind, &object, status);
            }
        }
    }
}

/// Runs the statements of `text` as `principal`; answers their results as
/// `principal` may see them. `authorization` is passed on with a pull
/// query's reads to the other nodes of a Kappa cluster.
pub fn run_as(
    state: &AppState,
    principal: &Principal,
    text: &str,
    authorization: Option<String>,
) -> Result<Vec<StatementOut>, RunError> {
    let statements = sql::parse(text).map_err(RunError::Sql)?;
    if statements.is_empty() {
        return Err(RunError::Empty);
    }
    if statements.len() > MAX_STATEMENTS {
        return Err(RunError::TooMany);
    }
    for (index, statement) in statements.iter().enumerate() {
        let need = auth::statement_need(statement);
        auth::authorize(Some(principal), &need)
            .map_err(|refusal| RunError::Refused { index, refusal })?;
    }
    let audit = Audit {
        actions: statements
            .iter()
            .map(|s| {
                (auth::statement_need(s) == auth::Need::Admin)
                    .then(|| (statement_kind(s), statement_object(s)))
            })
            .collect(),
    };
    let applied = match &state.nodes {
        // A version change runs on every node as its own operation
        // (`versions`), not as a statement of the control topic.
        Some(_)
            if statements.iter().any(changes_catalog)
                && statements
                    .iter()
                    .any(|s| matches!(s, sql::Statement::ChangeVersion(_))) =>
        {
            return Err(RunError::Cluster(StatementError::BadRequest(
                "in a Kappa cluster, REPLAY, PROMOTE and ROLLBACK run in a request of their own, \
                 not with CREATE, DROP or INSERT INTO"
                    .to_string(),
            )))
        }
        Some(nodes) if statements.iter().any(changes_catalog) => {
            nodes.submit(text).map_err(RunError::Cluster)?
        }
        _ => Executor::across_nodes(state, authorization).execute_all(statements),
    };
    if let Some((index, error)) = applied.failed {
        return Err(RunError::Failed {
            index,
            error,
            audit,
        });
    }
    audit.record(principal, None);
    Ok(applied
        .results
        .into_iter()
        .map(|r| visible(r, principal))
        .collect())
}

/// The kind of a statement that changes the catalog, for the audit line.
fn statement_kind(statement: &sql::Statement) -> &'static str {
    match statement {
        sql::Statement::CreateSource(_) => "SQL CREATE (declaration)",
        sql::Statement::CreateAs(_) => "SQL CREATE AS SELECT",
        sql::Statement::Drop { .. } => "SQL DROP",
        sql::Statement::InsertInto(_) => "SQL INSERT INTO",
        sql::Statement::ChangeVersion(sql::VersionChange::Replay { .. }) => "SQL REPLAY",
        sql::Statement::ChangeVersion(sql::VersionChange::Promote { .. }) => "SQL PROMOTE",
        sql::Statement::ChangeVersion(sql::VersionChange::Rollback { .. }) => "SQL ROLLBACK",
        _ => "SQL",
    }
}

/// The object a statement names, for the audit line.
fn statement_object(statement: &sql::Statement) -> String {
    match statement {
        sql::Statement::CreateSource(decl) => decl.name.clone(),
        sql::Statement::CreateAs(create) => create.name.clone(),
        sql::Statement::Drop { name, .. } | sql::Statement::Describe(name) => name.clone(),
        sql::Statement::Select(query) => query.view.clone(),
        sql::Statement::Explain(sql::Explain::Create(create)) => create.name.clone(),
        sql::Statement::Explain(sql::Explain::View(name)) => name.clone(),
        sql::Statement::Explain(sql::Explain::Select(query)) => query.view.clone(),
        sql::Statement::InsertInto(insert) => insert.target.clone(),
        sql::Statement::ChangeVersion(change) => change.name().to_string(),
        sql::Statement::Show(_) => String::new(),
    }
}

/// A statement's result as `principal` may see it: `SHOW` lists only the
/// objects it may read (clusters only to administrators).
fn visible(result: StatementOut, principal: &Principal) -> StatementOut {
    match result {
        StatementOut::Shown(mut shown) if !principal.is_admin() => {
            shown.rows.retain(|row| match row {
                ShowRow::Topic { name, .. } => principal.may_see_topic(name),
                // Brokers and their topics: for administrators.
                ShowRow::Cluster { .. } => false,
                ShowRow::Declared { name, .. } | ShowRow::Query { name, .. } => {
                    principal.may_see_view(name)
                }
            });
            StatementOut::Shown(shown)
        }
        other => other,
    }
}

/// A job for a statement thread.
type Job = Box<dyn FnOnce() + Send>;

/// The statement threads: [`MAX_SQL_THREADS`] threads with a
/// [`sql::SQL_STACK_BYTES`] stack, started on first use, taking jobs from
/// one queue (a request beyond them waits its turn). Kept, not spawned per
/// statement: a point lookup costs about as much as starting a thread.
fn statement_threads() -> &'static crossbeam_channel::Sender<Job> {
    static QUEUE: std::sync::OnceLock<crossbeam_channel::Sender<Job>> = std::sync::OnceLock::new();
    QUEUE.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        for i in 0..MAX_SQL_THREADS {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("kappa-sql-{i}"))
                .stack_size(sql::SQL_STACK_BYTES)
                .spawn(move || {
                    for job in rx {
                        // A panicking statement ends its job (its caller
                        // hears no answer), not the thread.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "starting a statement thread");
            }
        }
        tx
    })
}

/// Runs `f` (parsing, planning, blocking calls into the views) on a
/// statement thread ([`statement_threads`]): a stack the SQL front end
/// bounds its recursion well inside, never an async worker whose stack
/// size is not ours to know. `Err` says why it could not run.
pub async fn on_sql_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    statement_threads()
        .send(job)
        .map_err(|_| "the statement threads are gone".to_string())?;
    rx.await
        .map_err(|_| "the statement thread ended without an answer".to_string())
}
