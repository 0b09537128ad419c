//! The source workers' results on their way to the coordinator, with fewer
//! wake-ups than a channel per worker.
//!
//! A channel wakes a waiting receiver at every send. The coordinator waits
//! for the oldest batch in flight at nearly every batch (source workers are
//! the slower side), so with channels each prepared batch cost a wake-up:
//! a context switch on a core a source worker was using, and the caches it
//! warmed, for a few microseconds of the coordinator's work — about two
//! thousand per two-worker build of 2 M events. [`Results`] wakes the
//! coordinator waiting for a worker's next batch once [`WAKE_READY`] of
//! that worker's batches are ready — or as soon as one is and some worker
//! ran out of work (it waits for the coordinator to hand it more, and at
//! low load a lone batch is handed on at once) — or when the worker ends.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// Ready results of the awaited worker that wake the coordinator even
/// while every worker has work.
pub(crate) const WAKE_READY: usize = 4;

/// Each worker's results, in the order it made them.
#[derive(Debug)]
pub(crate) struct Results<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

#[derive(Debug)]
struct State<T> {
    /// Per worker: its results not yet taken, whether it is out of work,
    /// whether it ended.
    workers: Vec<Worker<T>>,
    /// The worker whose next result the coordinator waits for.
    awaited: Option<usize>,
}

#[derive(Debug)]
struct Worker<T> {
    results: VecDeque<T>,
    idle: bool,
    ended: bool,
}

impl<T> Results<T> {
    /// No results yet, from `workers` workers (none of them idle).
    pub(crate) fn new(workers: usize) -> Results<T> {
        Results {
            state: Mutex::new(State {
                workers: (0..workers)
                    .map(|_| Worker {
                        results: VecDeque::new(),
                        idle: false,
                        ended: false,
                    })
                    .collect(),
                awaited: None,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A worker that panicked holding the lock left consistent queues.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the coordinator if it waits for a result that is ready, and
    /// either enough are or some worker is out of work.
    fn wake_if_due(&self, state: &mut State<T>) {
        let Some(awaited) = state.awaited else {
            return;
        };
        let worker = &state.workers[awaited];
        let ready = worker.results.len();
        let due = worker.ended
            || ready >= WAKE_READY
            || (ready > 0 && state.workers.iter().any(|w| w.idle));
        if due {
            state.awaited = None;
            self.ready.notify_one();
        }
    }

    /// Worker `worker` puts its next result; `idle`: it has no more work
    /// for now.
    pub(crate) fn put(&self, worker: usize, result: T, idle: bool) {
        let mut state = self.lock();
        state.workers[worker].results.push_back(result);
        state.workers[worker].idle = idle;
        self.wake_if_due(&mut state);
    }

    /// Worker `worker` was given work (it is not idle).
    pub(crate) fn given_work(&self, worker: usize) {
        self.lock().workers[worker].idle = false;
    }

    /// Marks worker `worker` ended (also when it panics: [`EndOnDrop`]).
    pub(crate) fn end(&self, worker: usize) {
        let mut state = self.lock();
        state.workers[worker].ended = true;
        self.wake_if_due(&mut state);
    }

    /// Worker `worker`'s oldest result, waiting for it; `None` once the
    /// worker ended without putting it.
    pub(crate) fn take(&self, worker: usize) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(result) = state.workers[worker].results.pop_front() {
                return Some(result);
            }
            if state.workers[worker].ended {
                return None;
            }
            state.awaited = Some(worker);
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Marks a worker ended in its [`Results`] when dropped: a worker holds
/// one, so that the coordinator learns of its end however it ends.
pub(crate) struct EndOnDrop<'a, T> {
    /// The results the worker puts into.
    pub(crate) results: &'a Results<T>,
    /// The worker.
    pub(crate) worker: usize,
}

impl<T> Drop for EndOnDrop<'_, T> {
    fn drop(&mut self) {
        self.results.end(self.worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn results_come_in_order_and_the_end_is_seen() {
        let results = Arc::new(Results::new(2));
        let workers: Vec<_> = (0..2)
            .map(|worker| {
                let results = results.clone();
                std::thread::spawn(move || {
                    let _end = EndOnDrop {
                        results: &*results,
                        worker,
                    };
                    for i in 0..100 {
                        // Idle now and then, as a worker whose queue ran dry.
                        results.put(worker, i, i % 7 == 0);
                    }
                })
            })
            .collect();
        for worker in [1, 0] {
            let taken: Vec<i32> = std::iter::from_fn(|| results.take(worker)).collect();
            assert_eq!(taken, (0..100).collect::<Vec<_>>(), "worker {worker}");
        }
        for w in workers {
            w.join().unwrap();
        }
    }

    #[test]
    fn the_coordinator_is_woken_by_one_result_when_a_worker_is_idle() {
        // Below WAKE_READY results of the awaited worker, which has work
        // left: the other worker's idleness wakes the coordinator.
        let results = Arc::new(Results::new(2));
        let coordinator = {
            let results = results.clone();
            std::thread::spawn(move || results.take(0))
        };
        results.put(0, 7, false);
        results.put(1, 8, true);
        assert_eq!(coordinator.join().unwrap(), Some(7));
        // The awaited worker's own idleness wakes it too.
        let coordinator = {
            let results = results.clone();
            std::thread::spawn(move || results.take(0))
        };
        results.given_work(1);
        results.put(0, 9, true);
        assert_eq!(coordinator.join().unwrap(), Some(9));
    }

    #[test]
    fn a_worker_that_panics_ends_its_results() {
        let results = Arc::new(Results::<i32>::new(1));
        let worker = {
            let results = results.clone();
            std::thread::spawn(move || {
                let _end = EndOnDrop {
                    results: &*results,
                    worker: 0,
                };
                panic!("a worker's bug");
            })
        };
        assert!(worker.join().is_err());
        assert_eq!(results.take(0), None);
    }
}
