//! The supervisor: one thread that watches the live versions and moves
//! them along — swaps a build in once it has reached the input's end as it
//! was when the build started and its lag is at most `swap_max_lag`;
//! records a build or served version whose thread ended with an error; and
//! stops and drops versions whose grace has passed.
//!
//! It sleeps on a condition variable: woken by every change of the
//! manager, and otherwise after [`BUILD_TICK`] while a build runs (its lag
//! only shrinks by commits, which are at least that far apart in practice)
//! or after [`IDLE_TICK`] / the next grace deadline.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kappa_processor::host::{RunningVersion, Scope};

use super::catalog::{Catalog, Failure, GraceEntry};
use super::manager::{lock, scope, ViewManager};
use super::retry::Retry;

/// How often a running build's lag is checked.
pub const BUILD_TICK: Duration = Duration::from_millis(100);
/// How often versions are checked when nothing is building.
pub const IDLE_TICK: Duration = Duration::from_secs(1);
/// Window of the build rate.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);

/// What one look at a version found.
enum Seen {
    /// The thread ended; the error (or that it stopped without one).
    Ended(Box<RunningVersion>),
    /// Running, with this total lag, records done since the start, and
    /// whether every partition reached its target.
    Lag { lag: u64, done: u64, reached: bool },
    /// Not running (failed earlier) or the input is gone.
    Unknown,
}

fn look(
    running: &mut std::collections::HashMap<Scope, RunningVersion>,
    s: &Scope,
    start: &[u64],
    target: &[u64],
) -> Seen {
    let finished = match running.get(s) {
        None => return Seen::Unknown,
        Some(p) => p.is_finished(),
    };
    if finished {
        return Seen::Ended(Box::new(running.remove(s).expect("present")));
    }
    // A version spread over nodes answers the partitions it owns here.
    let at = |list: &[u64], p: u32| list.get(p as usize).copied().unwrap_or(0);
    match running.get(s).map(RunningVersion::lag) {
        Some(Ok(lags)) => Seen::Lag {
            lag: lags.iter().map(|l| l.lag).sum(),
            done: lags
                .iter()
                .map(|l| l.committed.saturating_sub(at(start, l.partition)))
                .sum(),
            reached: lags.iter().all(|l| l.committed >= at(target, l.partition)),
        },
        _ => Seen::Unknown,
    }
}

/// Why a processor ended, and whether its state is damaged (then it is
/// not retried: starting it again would read the same damage).
fn reason(p: Box<RunningVersion>) -> (String, bool) {
    let name = p.scope().name.clone();
    match p.stop() {
        Ok(()) => ("the processor stopped".to_string(), false),
        Err(e) if e.is_corruption() => (super::damaged_reason(&name, &e), true),
        Err(e) => (e.to_string(), false),
    }
}

impl ViewManager {
    /// Starts the supervisor thread.
    pub fn spawn_supervisor(self: &Arc<Self>) -> std::io::Result<()> {
        let manager = self.clone();
        let handle = std::thread::Builder::new()
            .name("kappa-views".into())
            .spawn(move || manager.supervise())?;
        *lock(&self.supervisor) = Some(handle);
        Ok(())
    }

    fn supervise(&self) {
        while !self.stopping.load(Ordering::Acquire) {
            let seen = lock(&self.state).changes;
            let wait = self.tick();
            let st = lock(&self.state);
            if st.changes == seen && !self.stopping.load(Ordering::Acquire) {
                let _ = self.wake.wait_timeout(st, wait);
            }
        }
    }

    /// One round: failures, swaps, grace expiry, rate samples and gauges.
    /// Returns how long to wait before the next round.
    pub fn tick(&self) -> Duration {
        let _ops = lock(&self.ops);
        if self.stopping.load(Ordering::Acquire) {
            return IDLE_TICK;
        }
        let mut catalog = self.catalog();
        let mut retire = Vec::new();
        let mut changed = self.observe(&mut catalog, &mut retire);
        changed |= self.retry_failed(&mut catalog);
        let now = kappa_log::now_ms();
        for view in catalog.views.values_mut() {
            let (expired, kept): (Vec<GraceEntry>, Vec<GraceEntry>) = view
                .grace
                .drain(..)
                .partition(|g| g.readable_until_ms <= now);
            view.grace = kept;
            retire.extend(expired.iter().map(|g| scope(&view.name, g.entry.version)));
        }
        if changed || !retire.is_empty() {
            if let Err(e) = self.save(&catalog) {
                // Nothing moves until the catalog can be written; the
                // ended processors are gone either way.
                tracing::error!(error = %e, "cannot persist the catalog");
                return IDLE_TICK;
            }
            self.install(catalog.clone(), Vec::new());
        }
        // Stop and drop after the catalog stopped naming them.
        self.retire(retire);
        let next_retry = lock(&self.state)
            .retries
            .values()
            .map(|r| r.next_attempt_ms)
            .min();
        let wait = next_wait(&catalog, now);
        match next_retry {
            Some(at) => {
                let left = at.saturating_sub(self.config.clock.now_ms()).max(1) as u64;
                wait.min(Duration::from_millis(left))
            }
            None => wait,
        }
    }

    /// Starts again the served versions whose retry is due (from their
    /// last commit); a failed attempt waits longer before the next.
    /// Returns whether `catalog` changed (a recovered view's failure is
    /// cleared).
    fn retry_failed(&self, catalog: &mut Catalog) -> bool {
        let now = self.config.clock.now_ms();
        let due: Vec<(String, Retry)> = lock(&self.state)
            .retries
            .iter()
            .filter(|(_, r)| r.next_attempt_ms <= now)
            .map(|(name, r)| (name.clone(), r.clone()))
            .collect();
        let mut changed = false;
        for (name, mut retry) in due {
            let s = scope(&name, retry.version);
            let current = catalog
                .views
                .get(&name)
                .is_some_and(|v| v.served.version == retry.version);
            let running = lock(&self.state)
                .running
                .get(&s)
                .is_some_and(|p| !p.is_finished());
            if !current || running {
                lock(&self.state).retries.remove(&name);
                continue;
            }
            let view = catalog.views.get_mut(&name).expect("checked above");
            // A new handle of its store if a write of the old one failed
            // (RocksDB's sticky background error), else the open store.
            match self.restart(&name, &view.served) {
                Ok(p) => {
                    tracing::info!(view = %name, version = retry.version, attempts = retry.attempts + 1, "view recovered: its processor runs again");
                    let mut st = lock(&self.state);
                    st.running.insert(s, p);
                    st.retries.remove(&name);
                    if view.failure.as_ref().is_some_and(|f| !f.during_build) {
                        view.failure = None;
                        changed = true;
                    }
                }
                Err(e) if matches!(&e, super::ViewError::Processor(p) if p.is_corruption()) => {
                    // Reopening found damage (the store is kept aside): not
                    // retried, it would read the same damage.
                    let why = super::damaged_reason(&name, &e);
                    tracing::error!(view = %name, version = retry.version, error = %why, "view state damaged: no more retries");
                    lock(&self.state).retries.remove(&name);
                    if let Some(f) = view.failure.as_mut() {
                        f.reason = why;
                        changed = true;
                    }
                }
                Err(e) => {
                    retry.failed_again(e.to_string(), now);
                    tracing::warn!(view = %name, version = retry.version, attempts = retry.attempts, error = %e, next_attempt_ms = retry.next_attempt_ms, "view still failing");
                    lock(&self.state).retries.insert(name, retry);
                }
            }
        }
        changed
    }

    /// Looks at every build and served version; updates `catalog` for
    /// failures and swaps. Returns whether it changed.
    fn observe(&self, catalog: &mut Catalog, retire: &mut Vec<Scope>) -> bool {
        let now = kappa_log::now_ms();
        let clock_now = self.config.clock.now_ms();
        let threshold = self.config.swap_max_lag;
        let mut changed = false;
        let mut finished = Vec::new();
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        for view in catalog.views.values_mut() {
            let served = scope(&view.name, view.served.version);
            let mut served_behind = false;
            match look(&mut st.running, &served, &[], &[]) {
                Seen::Ended(p) => finished.push((served.clone(), p, false)),
                Seen::Lag { lag, done, .. } => {
                    let catch_up = st.catch_up.entry(served.clone()).or_default();
                    catch_up.observe(clock_now, lag, lag <= threshold);
                    let behind = !catch_up.caught_up();
                    served_behind = catch_up.not_keeping_up(clock_now);
                    crate::metrics::set_view_not_keeping_up(&view.name, served_behind);
                    if behind {
                        // A first build: its rate, like a rebuild's.
                        sample(st.samples.entry(served.clone()).or_default(), done);
                        if view.building.is_none() {
                            crate::metrics::set_view_build(&view.name, done, done + lag);
                        }
                    } else if st.samples.remove(&served).is_some() && view.building.is_none() {
                        crate::metrics::set_view_build(&view.name, 0, 0);
                    }
                }
                Seen::Unknown => {}
            }
            let Some(build) = &view.building else {
                continue;
            };
            let b = scope(&view.name, build.entry.version);
            match look(
                &mut st.running,
                &b,
                &build.start_offsets,
                &build.target_offsets,
            ) {
                Seen::Ended(p) => finished.push((b, p, true)),
                Seen::Lag { lag, done, reached } => {
                    sample(st.samples.entry(b.clone()).or_default(), done);
                    let catch_up = st.catch_up.entry(b.clone()).or_default();
                    // A build has caught up once it is ready to be swapped in.
                    catch_up.observe(clock_now, lag, reached && lag <= threshold);
                    let build_behind = catch_up.not_keeping_up(clock_now);
                    crate::metrics::set_view_not_keeping_up(
                        &view.name,
                        served_behind || build_behind,
                    );
                    crate::metrics::set_view_build(&view.name, done, done + lag);
                    let ready = reached
                        && lag <= self.config.swap_max_lag
                        && super::review::behind(&st.running, &served, &b).is_empty();
                    // Spread over nodes: the cluster swaps it in once every
                    // node's partitions are ready (crate::nodes).
                    if let Some(spread) = st.running.get(&b).and_then(|p| p.as_spread()) {
                        let partitions = if ready { spread.owned() } else { Vec::new() };
                        st.spread_ready.insert(b.clone(), partitions);
                        continue;
                    }
                    // A manual build keeps following its input until promoted;
                    // an automatic one is swapped in once caught up and not
                    // behind the served version on any partition (served rows
                    // never step backwards).
                    if reached
                        && lag <= self.config.swap_max_lag
                        && !build.manual
                        && super::review::behind(&st.running, &served, &b).is_empty()
                    {
                        let build = view.building.take().expect("present");
                        let from = view.served.version;
                        let keeping = self.keeping(view);
                        for old in view.serve(build.entry, keeping, now) {
                            retire.push(scope(&view.name, old.version));
                        }
                        tracing::info!(view = %view.name, from, to = view.served.version, lag, "swapped in the new version");
                        crate::metrics::count_view_swap(&view.name);
                        crate::metrics::set_view_build(&view.name, 0, 0);
                        st.samples.remove(&b);
                        changed = true;
                    }
                }
                Seen::Unknown => {}
            }
        }
        drop(guard);
        for (s, p, during_build) in finished {
            let (why, damaged) = reason(p);
            tracing::error!(view = %s.name, version = s.version, reason = %why, during_build, "processor ended");
            crate::metrics::count_view_failure(&s.name);
            if during_build {
                crate::metrics::set_view_build(&s.name, 0, 0);
            }
            if let Some(view) = catalog.views.get_mut(&s.name) {
                if during_build {
                    view.building = None;
                    retire.push(s.clone());
                } else if !damaged {
                    let now = self.config.clock.now_ms();
                    lock(&self.state)
                        .retries
                        .insert(s.name.clone(), Retry::new(s.version, why.clone(), now));
                }
                view.failure = Some(Failure {
                    version: s.version,
                    reason: why,
                    at_ms: now,
                    during_build,
                });
                changed = true;
            }
        }
        changed
    }
}

/// Adds a (now, records done) sample, keeping [`RATE_WINDOW`] of them.
fn sample(samples: &mut std::collections::VecDeque<(Instant, u64)>, done: u64) {
    samples.push_back((Instant::now(), done));
    while samples.len() > 2 && samples[0].0.elapsed() > RATE_WINDOW {
        samples.pop_front();
    }
}

/// Until the next grace deadline, or a tick.
fn next_wait(catalog: &Catalog, now: i64) -> Duration {
    let building = catalog.views.values().any(|v| v.building.is_some());
    let mut wait = if building { BUILD_TICK } else { IDLE_TICK };
    for g in catalog.views.values().flat_map(|v| &v.grace) {
        let left = Duration::from_millis(g.readable_until_ms.saturating_sub(now).max(0) as u64);
        wait = wait.min(left.max(Duration::from_millis(1)));
    }
    wait
}
