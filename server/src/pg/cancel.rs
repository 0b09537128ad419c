//! Cancel requests: a client gives up on a running statement (`psql`'s
//! Ctrl+C, a driver's `cancel()`), over a new connection that names the
//! one to cancel by the process id and secret key it was given at login
//! (`BackendKeyData`), as PostgreSQL does.
//!
//! pgwire does the protocol's part: a connection whose
//! [`ConnectionHandle`] is in its session extensions has each query raced
//! against a cancel request naming it, and answers `57014` (`canceling
//! statement due to user request`) at once, dropping the query. Kappa's
//! part is [`Running`]: a statement dropped before it finished sets the
//! flag its thread reads through [`kappa_processor::read_cancel`], so a
//! view scan it runs ends within
//! [`kappa_processor::read_cancel::CHECK_EVERY`] rows. The connection stays
//! usable. A statement that changes something (`CREATE`, `DROP`, ..) is
//! not undone: once begun it finishes. A client that disconnects mid-scan
//! stops its scan the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::{
    ClientInfo, ConnectionManager, PidSecretKeyGenerator, RandomPidSecretKeyGenerator,
};

/// The listener's connections that may be cancelled, by process id and
/// secret key.
pub struct Cancels {
    manager: Arc<ConnectionManager>,
    keys: RandomPidSecretKeyGenerator,
    handler: Arc<DefaultCancelHandler>,
}

impl Cancels {
    /// No connections yet.
    pub fn new() -> Arc<Cancels> {
        let manager = Arc::new(ConnectionManager::new());
        Arc::new(Cancels {
            handler: Arc::new(DefaultCancelHandler::new(manager.clone())),
            manager,
            keys: RandomPidSecretKeyGenerator::default(),
        })
    }

    /// What answers cancel requests (pgwire calls it).
    pub fn handler(&self) -> Arc<DefaultCancelHandler> {
        self.handler.clone()
    }

    /// Gives `client` its process id and secret key (sent at the end of
    /// the login) and makes its queries cancellable while it lives: its
    /// handle (which pgwire races each query against) and the guard
    /// unregistering it go into its session extensions.
    pub fn register<C: ClientInfo>(&self, client: &mut C) {
        let (pid, key) = self.keys.generate(client);
        client.set_pid_and_secret_key(pid, key.clone());
        let (handle, guard) = self.manager.register(pid, key);
        client.session_extensions().insert(handle);
        client.session_extensions().insert(guard);
    }
}

/// A statement's work until it finishes: dropped before [`Running::done`]
/// (pgwire dropped the query for a cancel request, or the connection
/// ended), it tells the statement's thread to stop its reads and counts
/// the statement cancelled.
pub struct Running {
    flag: Arc<AtomicBool>,
    finished: bool,
}

impl Running {
    /// A statement starts.
    pub fn new() -> Running {
        Running {
            flag: Arc::new(AtomicBool::new(false)),
            finished: false,
        }
    }

    /// The flag its thread reads ([`kappa_processor::read_cancel::scoped`]).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// The statement finished.
    pub fn done(mut self) {
        self.finished = true;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.finished {
            self.flag.store(true, Ordering::Release);
            crate::metrics::count_pg_statement("cancelled");
        }
    }
}
