//! One PostgreSQL connection: its startup and its simple queries.
//!
//! Startup: without tokens (`--auth none`) every client is let in as the
//! anonymous principal, as over HTTP. With tokens, the client's password
//! is a token (`PGPASSWORD=kp_..`; the user name is not checked), sent in
//! cleartext, which is taken only over TLS (`sslmode=require`) or from a
//! loopback address, so it never crosses a network in the clear. The
//! token's grants decide what each statement may do, and a token revoked
//! while the connection is open fails its next statement.

use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::{Sink, SinkExt};
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
    DefaultServerParameterProvider, StartupHandler,
};
use pgwire::api::cancel::CancelHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::Response;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::startup::Authentication;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::answer::{self, Answer};
use super::cancel::{Cancels, Running};
use kappa_processor::read_cancel;

use crate::auth::Principal;
use crate::config::AuthMode;
use crate::statements::run::{on_sql_thread, run_as};
use crate::AppState;

/// The PostgreSQL version reported to clients (`server_version`): the
/// protocol and catalog behaviour they may assume.
pub const SERVER_VERSION: &str = "15.0 (Kappa)";

/// One connection's handler factory (pgwire asks it for each handler).
pub struct Session {
    connection: Arc<Connection>,
}

impl Session {
    /// A connection from `peer` to the server `app`.
    pub fn new(app: AppState, peer: SocketAddr, cancels: Arc<Cancels>) -> Session {
        Session {
            connection: Arc::new(Connection {
                app,
                peer,
                principal: Mutex::new(None),
                described: Mutex::new(None),
                cancels,
                offsets: Mutex::new(None),
            }),
        }
    }
}

impl PgWireServerHandlers for Session {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.connection.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.connection.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.connection.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.connection.cancels.handler()
    }
}

/// One connection: its server and who it is.
pub struct Connection {
    app: AppState,
    peer: SocketAddr,
    /// Set by the startup.
    principal: Mutex<Option<Principal>>,
    /// The answer a `Describe` ran for, and its SQL text, kept for the
    /// `Execute` of the same text that follows (`super::extended`).
    pub(super) described: Mutex<Option<(String, Answer)>>,
    /// The listener's cancellable connections.
    cancels: Arc<Cancels>,
    /// What its last pull query answer reflected (`kappa_offsets()`).
    offsets: Mutex<Option<answer::Offsets>>,
}

impl Connection {
    fn principal(&self) -> Option<Principal> {
        self.principal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Who runs this connection's statements: its principal while its
    /// token is valid.
    pub(super) fn current_principal(&self) -> Result<Principal, Box<ErrorInfo>> {
        let Some(principal) = self.principal() else {
            return Err(Box::new(answer::not_logged_in()));
        };
        if !self.app.auth.store.is_current(&principal) {
            return Err(Box::new(answer::revoked()));
        }
        Ok(principal)
    }

    /// Runs `query` (its statements in order, or a session statement) as
    /// `principal`: the answers, or the error that stopped them.
    pub(super) async fn run(
        &self,
        principal: Principal,
        query: &str,
    ) -> Result<Vec<Answer>, Box<ErrorInfo>> {
        if let Some(answered) = answer::session_statement(query) {
            return answered.map(|a| vec![a]).map_err(Box::new);
        }
        if answer::asks_offsets(query) {
            let last = self.offsets.lock().unwrap_or_else(PoisonError::into_inner);
            return Ok(vec![answer::offsets_rows(last.as_ref())]);
        }
        let app = self.app.clone();
        let text = query.to_string();
        let running = Running::new();
        let flag = running.flag();
        let catalog = super::catalog::reads_catalog(query);
        let ran = on_sql_thread(move || {
            let _running = crate::metrics::pg_statement_running();
            read_cancel::scoped(flag, || match catalog {
                true => super::catalog::answer(&app, &principal, &text).map(|a| (a, None)),
                false => run_as(&app, &principal, &text, None)
                    .map(|results| {
                        let offsets = answer::offsets_of(&results);
                        (answer::results(&app, results), offsets)
                    })
                    .map_err(|e| Box::new(answer::run_error(e, &principal, &text))),
            })
        })
        .await;
        running.done();
        let ran = ran.map_err(|e| Box::new(answer::internal(e)))?;
        crate::metrics::count_pg_statement(match ran {
            Ok(_) => "ok",
            Err(_) => "error",
        });
        self.keep_offsets(ran)
    }

    /// The answers of a run, keeping the offsets its last pull query
    /// reflected for `kappa_offsets()`.
    fn keep_offsets(
        &self,
        ran: Result<(Vec<Answer>, Option<answer::Offsets>), Box<ErrorInfo>>,
    ) -> Result<Vec<Answer>, Box<ErrorInfo>> {
        let (answers, offsets) = ran?;
        if let Some(offsets) = offsets {
            *self.offsets.lock().unwrap_or_else(PoisonError::into_inner) = Some(offsets);
        }
        Ok(answers)
    }

    fn admit(&self, principal: Principal) {
        *self
            .principal
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(principal);
    }

    fn parameters() -> DefaultServerParameterProvider {
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = SERVER_VERSION.to_string();
        parameters
    }

    /// The principal a token sent as the password stands for, or why the
    /// login is refused.
    fn login(&self, secure: bool, password: &str) -> Result<Principal, Box<ErrorInfo>> {
        if !secure && !self.peer.ip().is_loopback() {
            return Err(Box::new(ErrorInfo::new(
                "FATAL".into(),
                "28000".into(),
                "a token is taken as the password only over TLS: connect with sslmode=require"
                    .into(),
            )));
        }
        self.app.auth.store.authenticate(password).ok_or_else(|| {
            crate::auth::audit::denied("invalid_token", None, "PostgreSQL login");
            Box::new(ErrorInfo::new(
                "FATAL".into(),
                "28P01".into(),
                "password authentication failed: the password must be a valid token".into(),
            ))
        })
    }
}

#[async_trait]
impl StartupHandler for Connection {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                self.cancels.register(client);
                if self.app.auth.mode == AuthMode::None {
                    self.admit(Principal::anonymous());
                    finish_authentication(client, &Self::parameters()).await?;
                } else {
                    client.set_state(PgWireConnectionState::AuthenticationInProgress);
                    client
                        .send(PgWireBackendMessage::Authentication(
                            Authentication::CleartextPassword,
                        ))
                        .await?;
                }
            }
            PgWireFrontendMessage::PasswordMessageFamily(pwd) => {
                let pwd = pwd.into_password()?;
                match self.login(client.is_secure(), &pwd.password) {
                    Ok(principal) => {
                        self.admit(principal);
                        finish_authentication(client, &Self::parameters()).await?;
                    }
                    Err(refused) => return Err(PgWireError::UserError(refused)),
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: pgwire::api::store::PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let principal = match self.current_principal() {
            Ok(p) => p,
            Err(e) => return Ok(vec![answer::error(*e)]),
        };
        // `SET ..; SELECT ..`: the session statements answered here, the
        // others run, in order; the first error ends the query.
        let parts = super::split::parts_with_session_statements(query)
            .unwrap_or_else(|| vec![query.to_string()]);
        let mut responses = Vec::new();
        for part in parts {
            match self.run(principal.clone(), &part).await {
                Ok(answers) => responses.extend(answers.into_iter().map(|a| a.into_response(&[]))),
                Err(e) => {
                    responses.push(answer::error(*e));
                    break;
                }
            }
        }
        Ok(responses)
    }
}
