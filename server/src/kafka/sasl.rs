//! SASL/PLAIN: a Kafka client logs in with a Kappa token as its password
//! (the user name is free; the token's own name is what audit logs show).
//! With `auth = "none"` any login is accepted and grants everything, as
//! every HTTP call is. The login is `SaslHandshake` then
//! `SaslAuthenticate` (what librdkafka and the Java client do); raw SASL
//! frames after a v0 handshake are not understood, but v0 is listed
//! because librdkafka requires it before it logs in.
//!
//! A failed login closes the connection (as a Kafka broker does) after its
//! answer, which is held back by [`FAILED_LOGIN_DELAY`] so one connection
//! cannot try passwords at network speed; every failure is logged at warn
//! with the peer and how many logins its address has failed
//! ([`FailedLogins`]), and counted in `kappa_auth_denied_total`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::conn::Session;
use super::{errors, Broker};
use crate::auth::audit;
use crate::auth::Principal;
use crate::config::AuthMode;

/// The one mechanism served.
const PLAIN: &str = "PLAIN";

/// How long the answer to a failed login is held back before the
/// connection is closed (Kafka's `connection.failed.authentication.delay.ms`
/// defaults to 100 ms too).
pub const FAILED_LOGIN_DELAY: Duration = Duration::from_millis(100);

/// Addresses whose failed logins are counted; past this the counts start
/// over (the log lines keep what was counted).
const FAILED_LOGIN_ADDRESSES_MAX: usize = 4096;

/// Failed SASL logins per client address, for the warn line of each
/// failure (a brute-force attempt shows as a growing count).
#[derive(Debug, Default)]
pub struct FailedLogins {
    by_address: Mutex<HashMap<IpAddr, u64>>,
}

impl FailedLogins {
    /// Counts a failure from `address`; returns its failures so far.
    pub fn count(&self, address: IpAddr) -> u64 {
        let mut by_address = self.by_address.lock().expect("failed logins");
        if by_address.len() >= FAILED_LOGIN_ADDRESSES_MAX && !by_address.contains_key(&address) {
            by_address.clear();
        }
        let failures = by_address.entry(address).or_insert(0);
        *failures += 1;
        *failures
    }
}

/// Answers `SaslHandshake`: PLAIN is accepted, anything else refused with
/// the list.
pub fn handshake(session: &mut Session, request: SaslHandshakeRequest) -> SaslHandshakeResponse {
    let mut response = SaslHandshakeResponse::default();
    response.mechanisms = vec![StrBytes::from_static_str(PLAIN)];
    if request.mechanism.as_str() == PLAIN {
        session.sasl_started = true;
    } else {
        response.error_code = errors::UNSUPPORTED_SASL_MECHANISM;
    }
    response
}

/// Answers `SaslAuthenticate` with PLAIN's `authzid NUL user NUL password`.
pub fn authenticate(
    broker: &Broker,
    session: &mut Session,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    let mut response = SaslAuthenticateResponse::default();
    response.auth_bytes = Bytes::new();
    if !session.sasl_started {
        response.error_code = errors::SASL_AUTHENTICATION_FAILED;
        response.error_message = Some(StrBytes::from_static_str(
            "SaslHandshake with mechanism PLAIN comes first",
        ));
        session.login_failed = true;
        return response;
    }
    let password = plain_password(&request.auth_bytes);
    let principal = match broker.app.auth.mode {
        AuthMode::None => Some(Principal::anonymous()),
        AuthMode::Tokens => password.and_then(|p| broker.app.auth.store.authenticate(p)),
    };
    match principal {
        Some(p) => {
            tracing::debug!(token = %p.name, peer = %session.peer, "Kafka client authenticated");
            session.principal = Some(p);
        }
        None => {
            audit::denied("unauthorized", None, "kafka sasl login");
            session.login_failed = true;
            response.error_code = errors::SASL_AUTHENTICATION_FAILED;
            response.error_message = Some(StrBytes::from_static_str(
                "authentication failed: the password must be a valid Kappa token",
            ));
        }
    }
    response
}

/// The password of a PLAIN message (`[authzid] NUL authcid NUL passwd`).
fn plain_password(bytes: &[u8]) -> Option<&str> {
    let mut parts = bytes.splitn(3, |b| *b == 0);
    let (_authzid, _user, password) = (parts.next()?, parts.next()?, parts.next()?);
    std::str::from_utf8(password).ok().filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::plain_password;

    #[test]
    fn the_password_is_the_third_part_of_a_plain_message() {
        assert_eq!(plain_password(b"\0alice\0kp_secret"), Some("kp_secret"));
        assert_eq!(plain_password(b"admin\0alice\0kp_x"), Some("kp_x"));
        assert_eq!(plain_password(b"\0alice\0"), None);
        assert_eq!(plain_password(b"no separators"), None);
    }
}
