//! Audit lines and counters: admin actions and refusals, for every
//! protocol.

use super::Principal;

/// Logs and counts an admin action (`action` = method and route
/// template, or the SQL statement kind) on `target` (the request path,
/// or the object a statement names) and its outcome (`status`: the HTTP
/// status, or the one a Kafka request's outcome would have over HTTP).
pub fn admin_action(principal: &Principal, action: &str, target: &str, status: u16) {
    tracing::info!(
        target: "kappa::audit",
        token = %principal.name,
        action,
        on = target,
        status,
        "admin action"
    );
    crate::metrics::count_admin_action(action);
}

/// Logs and counts a refused request (401 or 403).
pub fn denied(reason: &'static str, token: Option<&str>, action: &str) {
    tracing::warn!(
        target: "kappa::audit",
        token = token.unwrap_or("-"),
        reason,
        action,
        "request denied"
    );
    crate::metrics::count_auth_denied(reason);
}
