//! One member of a group: what it joined with, its assignment, its
//! session deadline, and the answers it is waiting for.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::types::{JoinResponse, SyncResponse};

/// A member of a group.
#[derive(Debug)]
pub(super) struct Member {
    /// Its id (`{client_id}-{uuid}`; `{group_instance_id}-{uuid}` for a
    /// static member).
    pub id: String,
    /// Its static id (`group.instance.id`), if it has one.
    pub instance_id: Option<String>,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// Protocols in the member's order of preference, with its metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Its session timeout.
    pub session_timeout_ms: u64,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: u64,
    /// Its part of the current generation's assignment.
    pub assignment: Bytes,
    /// When it expires unless it heartbeats (or is waiting in a join or
    /// sync, which counts as a heartbeat, except for a new member).
    pub heartbeat_deadline_ms: u64,
    /// Joined but no join phase completed since: its deadline is the
    /// new-member join timeout and waiting does not keep it alive.
    pub is_new: bool,
    /// Where its JoinGroup answer goes while it waits in a join phase.
    pub join_waiter: Option<oneshot::Sender<JoinResponse>>,
    /// Where its SyncGroup answer goes while it waits for the leader's sync.
    pub sync_waiter: Option<oneshot::Sender<SyncResponse>>,
}

impl Member {
    /// Whether it supports protocol `name`.
    pub fn supports(&self, name: &str) -> bool {
        self.protocols.iter().any(|(n, _)| n == name)
    }

    /// Its metadata for protocol `name` (empty if it does not support it).
    pub fn metadata(&self, name: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Its first choice among `candidates`.
    pub fn vote<'a>(&self, candidates: &[&'a str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .find_map(|(n, _)| candidates.iter().find(|c| **c == n.as_str()).copied())
    }

    /// Waiting counts as heartbeating, except for a member that never
    /// completed a join (Kafka's `hasSatisfiedHeartbeat`).
    pub fn waiting_keeps_alive(&self) -> bool {
        !self.is_new && (self.join_waiter.is_some() || self.sync_waiter.is_some())
    }

    /// Answers a waiting JoinGroup, if any.
    pub fn answer_join(&mut self, response: JoinResponse) {
        if let Some(waiter) = self.join_waiter.take() {
            // The receiver is gone if the client disconnected: nothing to do.
            let _ = waiter.send(response);
        }
    }

    /// Answers a waiting SyncGroup, if any. Returns whether one waited.
    pub fn answer_sync(&mut self, response: SyncResponse) -> bool {
        match self.sync_waiter.take() {
            Some(waiter) => {
                let _ = waiter.send(response);
                true
            }
            None => false,
        }
    }
}

/// A new member id: `{client_id}-{uuid v4}`, as Kafka makes them.
pub(super) fn new_member_id(client_id: &str) -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Ids need to be unique, not secret: fall back to a counter and the time.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        bytes[..8].copy_from_slice(&count.to_be_bytes());
        bytes[8..].copy_from_slice(&nanos.to_be_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{client_id}-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
