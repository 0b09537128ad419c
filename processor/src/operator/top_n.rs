//! Top-N per partition of a subquery's rows: `SELECT .. FROM (SELECT ..
//! GROUP BY ..) q QUALIFY ROW_NUMBER() OVER (PARTITION BY p ORDER BY o
//! DESC) <= n` (or `RANK()`, which keeps ties) — Nexmark's hot items and
//! highest bids.
//!
//! Its input is the inner aggregate's row changes at each commit, as for
//! [`super::table_aggregate`] (the previous version of a row is the one
//! the last commit stored). Each partition holds all of its inner rows,
//! ranked by the order value (then by the row's key, so ranks are
//! deterministic); a change moves one row, and the commit writes the
//! partition's kept rows that came, went or changed. The view's rows are
//! the kept rows, keyed by the inner row's key (with its window, for a
//! windowed subquery), stored as every view row is (a slot whose
//! accumulators hold the columns' values), so reads, pull queries and
//! change feeds work as for any view.
//!
//! State: each partition's rows in the version's state, namespace
//! [`key::ns::TOP_N`] (partition key, then the row's view key → the inner
//! row as JSON), written with the commit; in memory, the partitions
//! touched recently (clean ones beyond the cache bound are dropped and read
//! back when touched again). A partition holds every row of its partition,
//! kept or not: a kept row that leaves is replaced by the next — unless the
//! inner rows are windows' final rows, which never leave: then a row not
//! kept never will be, and only the kept rows are held.
//!
//! Final rows are many (Nexmark q5: every auction's count in every window)
//! and few are kept, so they are sifted as they come
//! ([`TopN::apply_final`]): once a partition holds `limit` rows, a row
//! ranked after its last kept one is dropped at once, without a key, a
//! place in the partition or a state entry; the rows it holds are cut back
//! to the kept ones whenever they double; and only the rows kept at the
//! commit are written to state. What is kept, written and handed out is
//! what keeping every row until the commit gives.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::aggregate::{corrupt, view_key};
use super::each_row::{passes, row_of, values_changes, write_values_rows};
use super::table_rows::InnerStage;
use super::RowChange;
use crate::accumulators::total_order;
use crate::error::{ProcessorError, Result};
use crate::expr::Expr;
use crate::plan::{AggregateSpec, InnerRows, RowsAggregate, TopSpec};
use crate::state::key;
use crate::state::store::{Batch, Store};

/// One row of a partition: its order value and the inner row.
#[derive(Debug, Clone)]
struct Ranked {
    /// The order value.
    order: Value,
    /// The inner row.
    row: Value,
    /// In the store, or written by this commit: taking it out of the
    /// partition must delete it. Final rows only ([`TopN::apply_final`]);
    /// other rows are written as they come.
    stored: bool,
}

/// A partition's rows by view key (the inner row's key, and window), and
/// the kept ones in rank order as of the last commit.
#[derive(Debug, Default)]
struct Partition {
    rows: HashMap<String, Ranked>,
    kept: Vec<(String, Value)>,
    /// Changed since the last flush.
    dirty: bool,
    /// Final rows: the order value of the last row kept, once `limit`
    /// rows are held — a row ranked after it is never kept.
    cutoff: Option<Value>,
    /// Final rows: the rows held beyond which they are cut back to the
    /// kept ones.
    cut_at: usize,
}

/// Orders order values: largest first when `descending`.
fn by_order(descending: bool, a: &Value, b: &Value) -> Ordering {
    let o = total_order(a, b);
    if descending {
        o.reverse()
    } else {
        o
    }
}

/// Notes the cutoff of final rows' partition `p`, which holds only kept
/// rows: the order of its last, once it holds `top.limit` rows; and the
/// number of rows at which it is next cut back.
fn note_cutoff(top: &TopSpec, p: &mut Partition) {
    let limit = top.limit as usize;
    p.cutoff = (p.rows.len() >= limit)
        .then(|| {
            p.rows
                .values()
                .map(|r| &r.order)
                .max_by(|a, b| by_order(top.descending, a, b))
                .cloned()
        })
        .flatten();
    p.cut_at = 2 * p.rows.len().max(limit);
}

/// The view key of `change`'s row: the inner row's key, with its window
/// (as a JSON array) for a windowed row.
fn view_of(change: &RowChange) -> String {
    match change.window {
        Some((start, end)) => {
            Value::Array(vec![change.key.clone().into(), start.into(), end.into()]).to_string()
        }
        None => change.key.clone(),
    }
}

/// The top-N operator.
#[derive(Debug)]
pub struct TopN {
    top: TopSpec,
    /// The view's columns: a `LATEST_BY_OFFSET` of each one's expression.
    columns: AggregateSpec,
    filter: Option<Expr>,
    /// Where an inner row's previous version is found.
    inner: InnerStage,
    view_cf: String,
    state_cf: String,
    partitions: HashMap<String, Partition>,
    /// The kept rows (view key → row) of each partition changed this
    /// commit, as they were before it.
    before: BTreeMap<String, Vec<(String, Value)>>,
    /// State entries to write at the flush (`None`: delete).
    state_writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// View rows to write at the flush (`None`: delete), and the changes
    /// handed out.
    view_writes: BTreeMap<String, Option<Value>>,
    emit_changes: bool,
    cache_limit: usize,
}

impl TopN {
    /// The operator keeping `rows.top` of the rows `inner` (stored in
    /// `inner_cf`), in the view's `view_cf`, its
    /// partitions in `state_cf`; after a commit, partitions holding at
    /// most `cache_limit` rows in all stay in memory.
    pub fn new(
        rows: &RowsAggregate,
        inner: InnerRows<'_>,
        inner_cf: String,
        view_cf: String,
        state_cf: String,
        cache_limit: usize,
    ) -> Result<TopN> {
        rows.validate(inner).map_err(ProcessorError::InvalidPlan)?;
        let top = rows
            .top
            .clone()
            .ok_or_else(|| ProcessorError::InvalidPlan("not a top-N".into()))?;
        Ok(TopN {
            top,
            columns: rows.aggregate.clone(),
            filter: rows.filter.clone(),
            inner: InnerStage::new(inner, inner_cf, rows.join.as_ref(), state_cf.clone()),
            view_cf,
            state_cf,
            partitions: HashMap::new(),
            before: BTreeMap::new(),
            state_writes: BTreeMap::new(),
            view_writes: BTreeMap::new(),
            emit_changes: false,
            cache_limit,
        })
    }

    /// Starts (or stops) handing out row changes.
    pub fn set_emit_changes(&mut self, on: bool) {
        self.emit_changes = on;
    }

    /// Entries waiting for the next commit.
    pub fn pending_entries(&self) -> usize {
        self.state_writes.len() + self.view_writes.len()
    }

    /// Rows held in memory.
    pub fn memory_entries(&self) -> usize {
        self.partitions
            .values()
            .map(|p| p.rows.len())
            .sum::<usize>()
            + self.pending_entries()
    }

    /// Orders order values: largest first when descending.
    fn by_order(&self, a: &Value, b: &Value) -> Ordering {
        by_order(self.top.descending, a, b)
    }

    /// The kept rows of `rows`, in rank order (by order value, then by
    /// key): the first `limit`, and with ties those equal in order to the
    /// last of them. One pass selects them; only the kept are sorted.
    fn kept(&self, rows: &HashMap<String, Ranked>) -> Vec<(String, Value)> {
        let mut all: Vec<(&String, &Ranked)> = rows.iter().collect();
        let rank = |a: &(&String, &Ranked), b: &(&String, &Ranked)| {
            self.by_order(&a.1.order, &b.1.order)
                .then_with(|| a.0.cmp(b.0))
        };
        let limit = (self.top.limit as usize).min(all.len());
        if limit == 0 {
            return Vec::new();
        }
        if limit < all.len() {
            all.select_nth_unstable_by(limit - 1, rank);
            let (first, rest) = all.split_at(limit);
            // The last kept row is the worst of the first `limit`.
            let last = &first[limit - 1].1.order;
            let mut kept = first.to_vec();
            if self.top.ties {
                kept.extend(
                    rest.iter()
                        .filter(|r| total_order(&r.1.order, last) == Ordering::Equal),
                );
            }
            all = kept;
        }
        all.sort_by(rank);
        all.into_iter()
            .map(|(k, r)| (k.clone(), r.row.clone()))
            .collect()
    }

    /// The state key prefix of partition `part`.
    fn prefix(part: &str) -> Vec<u8> {
        let mut k = vec![key::ns::TOP_N];
        key::encode_group_key(&mut k, part.as_bytes());
        k
    }

    /// The state key of view row `view` in the partition whose key prefix
    /// is `prefix` ([`TopN::prefix`]).
    fn row_key(prefix: &[u8], view: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(prefix.len() + view.len());
        k.extend_from_slice(prefix);
        k.extend_from_slice(view.as_bytes());
        k
    }

    /// Loads partition `part` into memory if it is not there.
    fn load(&mut self, store: &Store, part: &str) -> Result<()> {
        if self.partitions.contains_key(part) {
            return Ok(());
        }
        let lower = Self::prefix(part);
        let mut upper = lower.clone();
        *upper.last_mut().expect("terminated") += 1;
        let mut rows = HashMap::new();
        store.for_each_entry(&self.state_cf, &lower, Some(&upper), |k, v| {
            let view = String::from_utf8_lossy(&k[lower.len()..]).into_owned();
            let row: Value = serde_json::from_slice(v)
                .map_err(|e| corrupt(&self.state_cf, format!("bad top-N row: {e}")))?;
            let order = self.top.order_by.eval(&row_of(&row));
            let stored = true;
            rows.insert(view, Ranked { order, row, stored });
            Ok(())
        })?;
        let kept = self.kept(&rows);
        let mut partition = Partition {
            rows,
            kept,
            ..Partition::default()
        };
        if self.inner.rows_are_final() {
            note_cutoff(&self.top, &mut partition);
        }
        self.partitions.insert(part.to_string(), partition);
        Ok(())
    }

    fn passes(&self, row: &Value) -> bool {
        passes(self.filter.as_ref(), row)
    }

    /// Applies the inner aggregate's row changes of one commit, before the
    /// commit writes them.
    pub fn apply(&mut self, store: &Store, changes: Vec<RowChange>) -> Result<()> {
        if self.inner.rows_are_final() {
            return self.apply_final(store, changes);
        }
        for change in changes {
            let view = view_of(&change);
            let old = self.inner.previous(store, &change)?;
            if let Some(old) = old.filter(|r| self.passes(r)) {
                self.remove(store, &old, &view)?;
            }
            if let Some(new) = change.row.filter(|r| self.passes(r)) {
                self.insert(store, new, view)?;
            }
        }
        Ok(())
    }

    /// [`TopN::apply`] for final rows, which only come: a row ranked after
    /// its partition's cutoff is dropped as it comes; the others are held,
    /// unwritten, until the commit ([`TopN::take_changes`]) writes those
    /// kept. A partition holding twice its kept rows is cut back to them.
    fn apply_final(&mut self, store: &Store, changes: Vec<RowChange>) -> Result<()> {
        let descending = self.top.descending;
        for change in changes {
            let Some(row) = change.row.as_ref().filter(|r| self.passes(r)) else {
                continue;
            };
            let part = self.partition_of(store, row)?;
            let order = self.top.order_by.eval(&row_of(row));
            let p = self.partitions.get_mut(&part).expect("loaded");
            let after_cutoff = p
                .cutoff
                .as_ref()
                .is_some_and(|cutoff| by_order(descending, &order, cutoff) == Ordering::Greater);
            if after_cutoff {
                continue;
            }
            let view = view_of(&change);
            let row = change.row.expect("a row passed");
            let stored = false;
            p.rows.insert(view, Ranked { order, row, stored });
            p.dirty = true;
            if p.rows.len() > p.cut_at {
                self.cut_to_kept(&part);
            }
        }
        Ok(())
    }

    /// Cuts final rows' partition `part` back to its kept rows (deleting
    /// those stored) and notes its cutoff; the kept rows, in rank order.
    fn cut_to_kept(&mut self, part: &str) -> Vec<(String, Value)> {
        let kept = self.kept(&self.partitions[part].rows);
        let keep: std::collections::HashSet<&str> = kept.iter().map(|(k, _)| k.as_str()).collect();
        let prefix = Self::prefix(part);
        let p = self.partitions.get_mut(part).expect("loaded");
        let state_writes = &mut self.state_writes;
        p.rows.retain(|k, ranked| {
            let kept = keep.contains(k.as_str());
            if !kept && ranked.stored {
                state_writes.insert(Self::row_key(&prefix, k), None);
            }
            kept
        });
        note_cutoff(&self.top, p);
        kept
    }

    /// The partition of `row`, loaded, its kept rows noted as they were
    /// before this commit.
    fn partition_of(&mut self, store: &Store, row: &Value) -> Result<String> {
        let r = row_of(row);
        let values: Vec<Value> = self.top.partition_by.iter().map(|e| e.eval(&r)).collect();
        let part = view_key(&values);
        self.load(store, &part)?;
        if !self.before.contains_key(&part) {
            let kept = self.partitions[&part].kept.clone();
            self.before.insert(part.clone(), kept);
        }
        Ok(part)
    }

    fn remove(&mut self, store: &Store, row: &Value, view: &str) -> Result<()> {
        let part = self.partition_of(store, row)?;
        let p = self.partitions.get_mut(&part).expect("loaded");
        p.rows.remove(view);
        p.dirty = true;
        self.state_writes
            .insert(Self::row_key(&Self::prefix(&part), view), None);
        Ok(())
    }

    fn insert(&mut self, store: &Store, row: Value, view: String) -> Result<()> {
        let part = self.partition_of(store, &row)?;
        self.state_writes.insert(
            Self::row_key(&Self::prefix(&part), &view),
            Some(serde_json::to_vec(&row).expect("rows serialize")),
        );
        let order = self.top.order_by.eval(&row_of(&row));
        let p = self.partitions.get_mut(&part).expect("loaded");
        let stored = true;
        p.rows.insert(view, Ranked { order, row, stored });
        p.dirty = true;
        Ok(())
    }

    /// Works out which kept rows came, went or changed in the partitions
    /// this commit touched; hands them out (in key order) when changes are
    /// emitted. Call before [`TopN::flush`].
    pub fn take_changes(&mut self) -> Result<Vec<RowChange>> {
        let mut gone: Vec<String> = Vec::new();
        let mut came: Vec<(String, Value)> = Vec::new();
        for (part, before) in std::mem::take(&mut self.before) {
            let kept = match self.inner.rows_are_final() {
                // Rows only come (none is taken back): a row not kept now
                // never will be, and is forgotten; a kept row that came
                // this commit is written.
                true => {
                    let kept = self.cut_to_kept(&part);
                    let prefix = Self::prefix(&part);
                    let p = self.partitions.get_mut(&part).expect("touched");
                    for (k, ranked) in p.rows.iter_mut().filter(|(_, r)| !r.stored) {
                        let row = serde_json::to_vec(&ranked.row).expect("rows serialize");
                        self.state_writes
                            .insert(Self::row_key(&prefix, k), Some(row));
                        ranked.stored = true;
                    }
                    kept
                }
                false => self.kept(&self.partitions[&part].rows),
            };
            let p = self.partitions.get_mut(&part).expect("touched");
            p.kept = kept;
            let now: HashMap<&str, &Value> = p.kept.iter().map(|(k, v)| (k.as_str(), v)).collect();
            for (k, _) in &before {
                if !now.contains_key(k.as_str()) {
                    gone.push(k.clone());
                }
            }
            let was: HashMap<&str, &Value> = before.iter().map(|(k, v)| (k.as_str(), v)).collect();
            for (k, row) in now {
                if was.get(k) != Some(&row) {
                    came.push((k.to_string(), row.clone()));
                }
            }
        }
        // A row that left one partition and came to another is written.
        for k in gone {
            self.view_writes.insert(k, None);
        }
        for (k, row) in came {
            self.view_writes.insert(k, Some(row));
        }
        if !self.emit_changes {
            return Ok(Vec::new());
        }
        Ok(values_changes(&self.columns, &self.view_writes))
    }

    /// Adds the view rows and partition entries changed to `batch`, and
    /// drops clean partitions beyond the cache bound; returns the view rows
    /// written.
    pub fn flush(&mut self, batch: &mut Batch) -> u64 {
        let written = write_values_rows(
            batch,
            &self.view_cf,
            &self.columns,
            std::mem::take(&mut self.view_writes),
        );
        for (k, v) in std::mem::take(&mut self.state_writes) {
            match v {
                Some(v) => batch.put(&self.state_cf, &k, &v),
                None => batch.delete(&self.state_cf, &k),
            }
        }
        for p in self.partitions.values_mut() {
            p.dirty = false;
        }
        // The bound is on rows: a partition holds all of its rows.
        let mut held: usize = self.partitions.values().map(|p| p.rows.len()).sum();
        if held > self.cache_limit {
            self.partitions.retain(|_, p| {
                if held > self.cache_limit {
                    held -= p.rows.len();
                    false
                } else {
                    true
                }
            });
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{InnerRows, Plan};
    use crate::sql::{parse, plan, SourceDecl, Statement};
    use serde_json::json;

    /// A top-N of `qualify` over the final rows of a hopping aggregate:
    /// each auction's bids per window.
    fn final_rows_plan(qualify: &str) -> Plan {
        let sql = format!(
            "CREATE STREAM bids (auction BIGINT, ts BIGINT) WITH (TOPIC='bids', TIMESTAMP='ts');
             CREATE TABLE hot AS SELECT auction, n, ws FROM (
               SELECT auction, WINDOWSTART AS ws, COUNT(*) AS n FROM bids
               WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 2 SECONDS) GROUP BY auction) q
             {qualify};"
        );
        let mut statements = parse(&sql).unwrap();
        let Statement::CreateAs(create) = statements.remove(1) else {
            panic!("not CREATE AS")
        };
        let Statement::CreateSource(bids) = statements.remove(0) else {
            panic!("not a source")
        };
        let catalog: Vec<SourceDecl> = vec![bids];
        plan(&create, &catalog).unwrap()
    }

    /// The view keys each window keeps, recomputed from all of its rows:
    /// sorted by count (largest first), then key; the first `limit`, and
    /// with `ties` those tied with the last.
    fn naive(
        rows: &BTreeMap<i64, Vec<(String, i64)>>,
        limit: usize,
        ties: bool,
    ) -> BTreeMap<i64, Vec<String>> {
        rows.iter()
            .map(|(&ws, members)| {
                let mut members = members.clone();
                members.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let mut kept = limit.min(members.len());
                while ties && kept < members.len() && members[kept].1 == members[limit - 1].1 {
                    kept += 1;
                }
                (ws, members[..kept].iter().map(|(k, _)| k.clone()).collect())
            })
            .collect()
    }

    /// Final rows come in many commits, a window's over several of them,
    /// most of each window's counts tied: what each window keeps — in the
    /// operator and in its state, also after a restart from the state
    /// alone — is what ranking all of its rows gives, with `RANK` (ties
    /// kept) and `ROW_NUMBER` (ties broken by key).
    #[test]
    fn final_rows_dropped_as_they_come_keep_what_ranking_them_all_keeps() {
        for (qualify, limit, ties) in [
            (
                "QUALIFY RANK() OVER (PARTITION BY ws ORDER BY n DESC) <= 1",
                1,
                true,
            ),
            (
                "QUALIFY RANK() OVER (PARTITION BY ws ORDER BY n DESC) <= 3",
                3,
                true,
            ),
            (
                "QUALIFY ROW_NUMBER() OVER (PARTITION BY ws ORDER BY n DESC) <= 2",
                2,
                false,
            ),
        ] {
            let plan = final_rows_plan(qualify);
            let rows_plan = plan.then.as_ref().expect("a query over rows");
            let inner = InnerRows::of(&plan).expect("inner rows");
            assert!(inner.are_final());
            let (_dir, store, scope) = crate::state::store::temp_store("hot");
            let new_top = || {
                let mut top = TopN::new(
                    rows_plan,
                    inner,
                    scope.view_cf(),
                    scope.view_cf(),
                    scope.state_cf(),
                    1_000_000,
                )
                .unwrap();
                top.set_emit_changes(true);
                top
            };
            let mut top = new_top();
            let mut all: BTreeMap<i64, Vec<(String, i64)>> = BTreeMap::new();
            // A small generator, the same every run.
            let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
            let mut next = |n: u64| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed % n
            };
            for commit in 0..12 {
                let mut changes = Vec::new();
                // Three windows per commit, each over two commits.
                for ws in [commit, commit + 1, commit + 2].map(|w| w as i64 * 2_000) {
                    for _ in 0..next(40) {
                        let auction = next(1_000_000);
                        let n = 1 + next(4) as i64;
                        let key = auction.to_string();
                        let window = (ws, ws + 10_000);
                        let view = view_of(&RowChange {
                            key: key.clone(),
                            window: Some(window),
                            row: None,
                        });
                        let members = all.entry(ws).or_default();
                        if members.iter().any(|(k, _)| *k == view) {
                            continue;
                        }
                        members.push((view, n));
                        changes.push(RowChange {
                            key,
                            window: Some(window),
                            row: Some(json!({"auction": auction, "n": n, "ws": ws})),
                        });
                    }
                }
                top.apply(&store, changes).unwrap();
                top.take_changes().unwrap();
                let mut batch = Batch::default();
                top.flush(&mut batch);
                store.write(batch).unwrap();
                if commit % 4 == 3 {
                    // A restart: the partitions are read back from state.
                    top = new_top();
                }
                let expected = naive(&all, limit, ties);
                for (ws, keys) in &expected {
                    let part = ws.to_string();
                    let lower = TopN::prefix(&part);
                    let mut upper = lower.clone();
                    *upper.last_mut().unwrap() += 1;
                    let mut stored = Vec::new();
                    store
                        .for_each_entry(&scope.state_cf(), &lower, Some(&upper), |k, _| {
                            stored.push(String::from_utf8(k[lower.len()..].to_vec()).unwrap());
                            Ok(())
                        })
                        .unwrap();
                    let mut sorted = keys.clone();
                    sorted.sort();
                    assert_eq!(
                        stored, sorted,
                        "{qualify}: window {ws}'s state after commit {commit}"
                    );
                    if let Some(p) = top.partitions.get(&part) {
                        let kept: Vec<&String> = p.kept.iter().map(|(k, _)| k).collect();
                        assert_eq!(
                            kept,
                            keys.iter().collect::<Vec<_>>(),
                            "{qualify}: window {ws}"
                        );
                    }
                }
            }
        }
    }
}
