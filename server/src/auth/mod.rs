//! Authentication and authorization, for every protocol: who calls, and
//! whether they may.
//!
//! [`authorize`] is the one place that decides what a principal may do:
//! the HTTP API (`routes/authenticate.rs` maps a route to the [`Need`] it
//! has), the Kafka listener (each API maps its topics and groups to
//! [`Need`]s) and any later protocol ask it and only translate its answer
//! into their own (`401`/`403`; Kafka's `TOPIC_AUTHORIZATION_FAILED`, ...).
//! A frontend authenticates its own way (a bearer token; SASL/PLAIN) and
//! resolves the secret through the [`TokenStore`] into a [`Principal`].
//!
//! With `auth = "none"` the principal is `anonymous` with every grant.
//!
//! **Revocation** ends what a token opened ([`TokenStore::is_current`],
//! [`TokenStore::revoked`]): each frontend checks it where a request can
//! outlive its check (HTTP long-polls and change feeds, Kafka connections).
//!
//! **Consumer-group offsets** of a topic — committing, resetting, fetching
//! — need `group` on the group and `read` on the topic
//! ([`Principal::may_commit`]), over HTTP as over Kafka.
//!
//! **Produce rate limits** ([`Auth::admit_produce`], [`limits`]): HTTP
//! answers `429` with the wait, Kafka holds the request for it.
//!
//! **Audit** ([`audit`]): every admin action (and every SQL statement that
//! changes something) is logged at info on the `kappa::audit` target with
//! the token's name, the action and its status; every refusal at warn,
//! with the token's name when known. Secrets are never logged nor echoed.
//! Counters: `kappa_auth_denied_total{reason}` and
//! `kappa_admin_actions_total{action}`.

pub mod audit;
pub mod grants;
pub mod limits;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

use kappa_processor::sql::Statement;

pub use grants::{Grant, Need};
pub use store::{Principal, TokenStore};

use crate::config::{AuthMode, ServerConfig};

/// The server's authentication: the mode and the token store.
pub struct Auth {
    /// `none` or `tokens`.
    pub mode: AuthMode,
    /// The tokens of the data directory (managed in either mode).
    pub store: TokenStore,
    /// Produce rate limits of the tokens that have one.
    pub limiter: limits::ProduceLimiter,
}

impl Auth {
    /// Admits `records` produced by `principal` under its rate limit, or
    /// answers how long to wait (the refusal is audited as `rate_limited`).
    pub fn admit_produce(&self, principal: &Principal, records: usize) -> Result<(), Duration> {
        let Some(rate) = principal.produce_records_per_second else {
            return Ok(());
        };
        let now = std::time::Instant::now();
        self.limiter
            .admit(&principal.name, rate, records, now)
            .inspect_err(|_| audit::denied("rate_limited", Some(&principal.name), "produce"))
    }
}

/// Opens the token store of `config.data_dir` with the bootstrap token of
/// `KAPPA_BOOTSTRAP_TOKEN`, and says how to get in when nobody could.
pub fn open(config: &ServerConfig) -> anyhow::Result<Arc<Auth>> {
    std::fs::create_dir_all(&config.data_dir)?;
    let bootstrap = std::env::var(store::BOOTSTRAP_ENV).ok();
    let store = TokenStore::open(&config.data_dir, bootstrap.as_deref())?;
    if config.auth == AuthMode::Tokens && store.list().is_empty() {
        tracing::warn!(
            "auth = \"tokens\" and no token exists: every API call will be refused. Create one \
             with `kappa token create --admin --name NAME --data-dir {}` or set {}",
            config.data_dir.display(),
            store::BOOTSTRAP_ENV
        );
    }
    Ok(Arc::new(Auth {
        mode: config.auth,
        store,
        limiter: limits::ProduceLimiter::default(),
    }))
}

/// Why [`authorize`] said no.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nobody has logged in (a Kafka connection before its SASL login).
    Unauthenticated,
    /// The principal lacks this grant (for a group's offsets of a topic:
    /// the group's, else the topic's `read`).
    Missing(Need),
}

/// Whether `principal` (`None`: not logged in) may do what `need` names:
/// the one authorization decision of every protocol. `Need::Open` needs
/// nobody; everything else needs a principal whose grants allow it.
pub fn authorize(principal: Option<&Principal>, need: &Need) -> Result<(), Refusal> {
    if *need == Need::Open {
        return Ok(());
    }
    let Some(principal) = principal else {
        return Err(Refusal::Unauthenticated);
    };
    if need.allowed_by(&principal.grants) {
        return Ok(());
    }
    let missing = match need {
        Need::GroupRead { group, topic } => {
            let group = Need::Group(group.clone());
            if group.allowed_by(&principal.grants) {
                Need::Read(topic.clone())
            } else {
                group
            }
        }
        other => other.clone(),
    };
    Err(Refusal::Missing(missing))
}

/// What running `statement` needs: `admin` for anything that changes the
/// catalog, `read-view` on the view a `SELECT` or `DESCRIBE` reads; `SHOW`
/// needs a token and is filtered (`Principal::may_see_topic`, `may_see_view`).
pub fn statement_need(statement: &Statement) -> Need {
    match statement {
        Statement::CreateSource(_) | Statement::CreateAs(_) | Statement::Drop { .. } => Need::Admin,
        Statement::Show(_) => Need::Token,
        Statement::Describe(name) => Need::ReadView(name.clone()),
        Statement::Select(query) => Need::ReadView(query.view.clone()),
        // Explaining a statement shows what creating it would run.
        Statement::Explain(kappa_processor::sql::Explain::Create(_)) => Need::Admin,
        Statement::InsertInto(_) | Statement::ChangeVersion(_) => Need::Admin,
        Statement::Explain(kappa_processor::sql::Explain::View(name)) => {
            Need::ReadView(name.clone())
        }
        Statement::Explain(kappa_processor::sql::Explain::Select(query)) => {
            Need::ReadView(query.view.clone())
        }
    }
}

impl Principal {
    /// Whether this principal may do what `need` names ([`authorize`]).
    pub fn may(&self, need: &Need) -> bool {
        authorize(Some(self), need).is_ok()
    }

    /// Whether this principal has the `admin` grant.
    pub fn is_admin(&self) -> bool {
        self.grants.contains(&Grant::Admin)
    }

    /// Whether a topic shows in this principal's lists (it may read or
    /// produce to it).
    pub fn may_see_topic(&self, topic: &str) -> bool {
        self.may(&Need::ReadOrProduce(topic.to_string()))
    }

    /// Whether a view, table or stream shows in this principal's lists.
    pub fn may_see_view(&self, view: &str) -> bool {
        self.may(&Need::ReadView(view.to_string()))
    }

    /// Whether a consumer group shows in this principal's lists.
    pub fn may_see_group(&self, group: &str) -> bool {
        self.may(&Need::Group(group.to_string()))
    }

    /// Whether this principal may commit, reset or fetch `group`'s offsets
    /// of `topic`: it needs `group` on the group and `read` on the topic —
    /// the one rule for HTTP (`/v1/groups/{group}/offsets`, `…/reset`) and
    /// Kafka (`OffsetCommit`, `OffsetFetch`).
    pub fn may_commit(&self, group: &str, topic: &str) -> bool {
        self.may(&Need::GroupRead {
            group: group.to_string(),
            topic: topic.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(grants: &[&str]) -> Principal {
        let mut p = Principal::anonymous();
        p.name = "t".into();
        p.grants = grants.iter().map(|g| Grant::parse(g).unwrap()).collect();
        p
    }

    #[test]
    fn committing_a_groups_offsets_needs_the_group_and_read_on_the_topic() {
        let consumer = principal(&["group:g1", "read:orders.*"]);
        assert!(consumer.may_commit("g1", "orders.a"));
        assert!(!consumer.may_commit("g1", "secret"));
        assert!(!consumer.may_commit("g2", "orders.a"));
        let need = |group: &str, topic: &str| Need::GroupRead {
            group: group.into(),
            topic: topic.into(),
        };
        assert_eq!(
            authorize(Some(&consumer), &need("g1", "secret")),
            Err(Refusal::Missing(Need::Read("secret".into())))
        );
        assert_eq!(
            authorize(Some(&principal(&["read:*"])), &need("g1", "secret")),
            Err(Refusal::Missing(Need::Group("g1".into())))
        );
        assert!(principal(&["admin"]).may_commit("g", "t"));
    }

    #[test]
    fn nobody_logged_in_may_do_anything_but_what_is_open() {
        assert_eq!(authorize(None, &Need::Open), Ok(()));
        for need in [Need::Token, Need::Admin, Need::Read("t".into())] {
            assert_eq!(authorize(None, &need), Err(Refusal::Unauthenticated));
        }
        assert_eq!(
            authorize(Some(&Principal::anonymous()), &Need::Admin),
            Ok(())
        );
        assert_eq!(
            authorize(Some(&principal(&["read:a"])), &Need::Produce("a".into())),
            Err(Refusal::Missing(Need::Produce("a".into())))
        );
    }

    #[test]
    fn statements_that_change_the_catalog_need_admin() {
        let parsed = kappa_processor::sql::parse(
            "CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON'); \
             DROP TABLE x; SHOW TABLES; DESCRIBE v; SELECT * FROM v2;",
        )
        .unwrap();
        let needs: Vec<Need> = parsed.iter().map(statement_need).collect();
        assert_eq!(
            needs,
            vec![
                Need::Admin,
                Need::Admin,
                Need::Token,
                Need::ReadView("v".into()),
                Need::ReadView("v2".into()),
            ]
        );
    }
}
