//! The coordinator's settings, with Kafka's broker setting names beside
//! each field and the defaults chosen for a single-node server.

use anyhow::bail;

/// Settings of the group coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// How long a new (Empty) group waits for more members before its first
    /// generation, extended by the same again (up to the rebalance timeout)
    /// while members keep arriving (`group.initial.rebalance.delay.ms`).
    /// Default 300 ms, not Kafka's 3,000: long enough for consumers started
    /// together to land in one generation, short enough that a lone consumer
    /// starts at once. 0 completes the first join as soon as everyone known
    /// has joined.
    pub initial_rebalance_delay_ms: u64,
    /// Smallest session timeout a member may ask for
    /// (`group.min.session.timeout.ms`, default 6,000 ms as Kafka).
    pub session_timeout_min_ms: u64,
    /// Largest session timeout a member may ask for
    /// (`group.max.session.timeout.ms`, default 1,800,000 ms as Kafka).
    pub session_timeout_max_ms: u64,
    /// Members per group, counting members waiting for a member id
    /// separately (`group.max.size`; default 1,000, Kafka has no limit).
    pub members_max: usize,
    /// Groups kept; when a new group would pass it, an Empty group is
    /// forgotten (its committed offsets live elsewhere) and, if none is
    /// Empty, the join answers COORDINATOR_NOT_AVAILABLE (default 10,000).
    pub groups_max: usize,
    /// How long a new member's first JoinGroup may wait before the member
    /// is dropped (Kafka's fixed `NewMemberJoinTimeoutMs`, 300,000 ms).
    pub new_member_join_timeout_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 300,
            session_timeout_min_ms: 6_000,
            session_timeout_max_ms: 1_800_000,
            members_max: 1_000,
            groups_max: 10_000,
            new_member_join_timeout_ms: 300_000,
        }
    }
}

impl GroupConfig {
    /// Checks every range.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.initial_rebalance_delay_ms > 300_000 {
            bail!("initial_rebalance_delay_ms must be at most 300000");
        }
        if self.session_timeout_min_ms == 0
            || self.session_timeout_min_ms > self.session_timeout_max_ms
        {
            bail!("session_timeout_min_ms must be positive and at most session_timeout_max_ms");
        }
        if self.session_timeout_max_ms > i32::MAX as u64 {
            bail!("session_timeout_max_ms must fit a Kafka int32");
        }
        if self.members_max == 0 || self.groups_max == 0 {
            bail!("members_max and groups_max must be positive");
        }
        if self.new_member_join_timeout_ms == 0 {
            bail!("new_member_join_timeout_ms must be positive");
        }
        Ok(())
    }
}
