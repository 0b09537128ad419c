//! A read's cancellation: a client that gave up on a statement (a
//! PostgreSQL cancel request) stops the view scan it started.
//!
//! The statement runs on its own thread; [`scoped`] lends that thread the
//! flag the canceller sets, and a view read checks [`requested`] every
//! [`CHECK_EVERY`] rows examined, ending its page early (as the scan cap
//! does) once it is set. A thread-local rather than a field of every read
//! request: the flag belongs to whoever runs the statement, not to the
//! statement's text, and reads deep inside the executor need no new
//! parameter to honour it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Rows a read examines between two checks of the flag.
pub const CHECK_EVERY: usize = 1024;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `f` with `flag` as this thread's cancellation: reads inside it end
/// early once `flag` is set.
pub fn scoped<T>(flag: Arc<AtomicBool>, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Arc<AtomicBool>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            FLAG.with(|f| *f.borrow_mut() = previous);
        }
    }
    let _reset = Reset(FLAG.with(|f| f.borrow_mut().replace(flag)));
    f()
}

/// Whether the statement this thread runs was cancelled.
pub fn requested() -> bool {
    FLAG.with(|f| {
        f.borrow()
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Acquire))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_seen_inside_its_scope_only() {
        let flag = Arc::new(AtomicBool::new(false));
        assert!(!requested());
        scoped(flag.clone(), || {
            assert!(!requested());
            flag.store(true, Ordering::Release);
            assert!(requested());
        });
        assert!(!requested());
    }
}
