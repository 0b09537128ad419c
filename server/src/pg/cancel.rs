//! Cancel requests: a client gives up on a running statement (`psql`'s
//! Ctrl+C, a driver's `cancel()`), over a new connection that names the
//! one to cancel by the process id and secret key it was given at login
//! (`BackendKeyData`), as PostgreSQL does.
//!
//! The statement's connection answers at once with SQLSTATE `57014`
//! (`canceling statement due to user request`) and stays usable; the
//! statement's thread is told through [`kappa_processor::read_cancel`], so
//! a view scan it runs ends within [`kappa_processor::read_cancel::CHECK_EVERY`]
//! rows. A statement that changes something (`CREATE`, `DROP`, ..) is not
//! undone: once begun it finishes, and the client is told it was
//! cancelled only if it was still running when the request came.

use std::sync::Arc;

use futures::channel::oneshot;
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::{
    ClientInfo, ConnectionGuard, ConnectionHandle, ConnectionManager, PidSecretKeyGenerator,
    RandomPidSecretKeyGenerator,
};
use pgwire::error::ErrorInfo;

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
    /// the login) and makes it cancellable until the returned
    /// registration is dropped.
    pub fn register<C: ClientInfo>(&self, client: &mut C) -> Registration {
        let (pid, key) = self.keys.generate(client);
        client.set_pid_and_secret_key(pid, key.clone());
        let (handle, guard) = self.manager.register(pid, key);
        Registration {
            handle,
            _guard: guard,
        }
    }
}

/// One connection's place among the cancellable ones.
pub struct Registration {
    handle: Arc<ConnectionHandle>,
    _guard: ConnectionGuard,
}

impl Registration {
    /// Starts a statement: the returned watch resolves if a cancel request
    /// names this connection before the next statement starts.
    pub async fn start(&self) -> Watch {
        Watch(self.handle.start_query().await)
    }
}

/// A statement's watch for a cancel request.
pub struct Watch(oneshot::Receiver<()>);

impl Watch {
    /// Resolves when a cancel request for the statement arrives; never
    /// otherwise.
    pub async fn cancelled(self) {
        if self.0.await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The error a cancelled statement answers.
pub fn cancelled() -> ErrorInfo {
    ErrorInfo::new(
        "ERROR".into(),
        "57014".into(),
        "canceling statement due to user request".into(),
    )
}
