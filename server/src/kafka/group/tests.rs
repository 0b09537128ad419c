//! The coordinator's behaviour, driven by a manual clock on a
//! current-thread runtime: waiting calls are polled once to register them,
//! then polled again after the event that must answer them; nothing sleeps.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;

use super::*;

const DELAY_MS: u64 = 300;
const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 30_000;

struct Fixture {
    coordinator: Coordinator,
    now: Arc<AtomicU64>,
}

impl Fixture {
    fn new() -> Self {
        Fixture::with(GroupConfig {
            initial_rebalance_delay_ms: DELAY_MS,
            ..GroupConfig::default()
        })
    }

    fn with(config: GroupConfig) -> Self {
        config.validate().unwrap();
        let (clock, now) = Clock::manual(1_000_000);
        Fixture {
            coordinator: Coordinator::new(config, clock),
            now,
        }
    }

    /// Moves the clock and runs the expiries.
    fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
        self.coordinator.tick();
    }

    fn state(&self) -> GroupState {
        self.coordinator.describe("g").state
    }
}

fn join_req(member_id: &str) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        require_known_member_id: false,
    }
}

fn sync_req(generation: i32, member_id: &str, assignments: &[(&str, &str)]) -> SyncRequest {
    SyncRequest {
        group_id: "g".into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: None,
        protocol_name: None,
        assignments: assignments
            .iter()
            .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
            .collect(),
    }
}

/// Polls `f` once, registering it if it has to wait. Unconstrained: tokio's cooperative budget would
/// otherwise make a ready answer look pending after many polls in one task.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let once = std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *f).poll(cx)));
    tokio::task::unconstrained(once).await
}

async fn waiting<F: Future + Unpin>(f: &mut F) {
    assert!(poll_once(f).await.is_pending(), "answered too early");
}

async fn ready<F: Future + Unpin>(f: &mut F) -> F::Output {
    match poll_once(f).await {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("still waiting"),
    }
}

/// The assignment the tests' leader writes for a member.
fn assigned(member_id: &str) -> String {
    format!("parts-of-{member_id}")
}

/// Brings `n` new members into group "g" and through sync; returns their
/// join answers (the first is the leader's).
async fn stable_group(fx: &Fixture, n: usize) -> Vec<JoinResponse> {
    let answers = join_together(fx, (0..n).map(|_| join_req("")).collect()).await;
    sync_all(fx, &answers).await;
    answers
}

/// Sends `requests` to a new group's join phase at once and lets its
/// initial delay pass (extended once when several arrive); returns their
/// answers in order.
async fn join_together(fx: &Fixture, requests: Vec<JoinRequest>) -> Vec<JoinResponse> {
    let several = requests.len() > 1;
    let mut joins: Vec<_> = requests
        .into_iter()
        .map(|r| Box::pin(fx.coordinator.join(r)))
        .collect();
    for join in &mut joins {
        waiting(join).await;
    }
    fx.advance(DELAY_MS);
    if several {
        // Members arrived during the initial delay: it is extended once.
        fx.advance(DELAY_MS);
    }
    let mut answers = Vec::new();
    for join in &mut joins {
        answers.push(ready(join).await);
    }
    answers
}

/// Syncs every member of a completed join phase (the leader assigns).
async fn sync_all(fx: &Fixture, answers: &[JoinResponse]) {
    let leader = answers[0].leader.clone();
    let assignments: Vec<(String, String)> = answers
        .iter()
        .map(|a| (a.member_id.clone(), assigned(&a.member_id)))
        .collect();
    let pairs: Vec<(&str, &str)> = assignments
        .iter()
        .map(|(m, a)| (m.as_str(), a.as_str()))
        .collect();
    let generation = answers[0].generation_id;
    let mut follower_syncs = Vec::new();
    for answer in answers.iter().filter(|a| a.member_id != leader) {
        let mut sync = Box::pin(
            fx.coordinator
                .sync(sync_req(generation, &answer.member_id, &[])),
        );
        waiting(&mut sync).await;
        follower_syncs.push((answer.member_id.clone(), sync));
    }
    let mine = fx
        .coordinator
        .sync(sync_req(generation, &leader, &pairs))
        .await;
    assert_eq!(mine.error, NONE);
    assert_eq!(mine.assignment, assigned(&leader));
    for (member_id, mut sync) in follower_syncs {
        let answer = ready(&mut sync).await;
        assert_eq!(answer.error, NONE);
        assert_eq!(answer.assignment, assigned(&member_id));
    }
    assert_eq!(fx.state(), GroupState::Stable);
}

#[tokio::test]
async fn single_member_joins_as_leader_and_syncs_to_stable() {
    let fx = Fixture::new();
    let mut join = Box::pin(fx.coordinator.join(join_req("")));
    waiting(&mut join).await;
    assert_eq!(fx.state(), GroupState::PreparingRebalance);
    fx.advance(DELAY_MS - 1);
    waiting(&mut join).await;
    fx.advance(1);
    let answer = ready(&mut join).await;
    assert_eq!(answer.error, NONE);
    assert_eq!(answer.generation_id, 1);
    assert!(
        answer.member_id.starts_with("client-"),
        "{}",
        answer.member_id
    );
    assert_eq!(answer.leader, answer.member_id);
    assert_eq!(answer.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(answer.protocol_name.as_deref(), Some("range"));
    assert_eq!(answer.members.len(), 1);
    assert_eq!(answer.members[0].metadata, "meta");
    assert_eq!(fx.state(), GroupState::CompletingRebalance);

    let me = answer.member_id.clone();
    let sync = fx
        .coordinator
        .sync(sync_req(1, &me, &[(&me, "mine")]))
        .await;
    assert_eq!(sync.error, NONE);
    assert_eq!(sync.assignment, "mine");
    assert_eq!(sync.protocol_name.as_deref(), Some("range"));

    let described = fx.coordinator.describe("g");
    assert_eq!(described.state, GroupState::Stable);
    assert_eq!(described.protocol_type, "consumer");
    assert_eq!(described.protocol, "range");
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_id, me);
    assert_eq!(described.members[0].client_host, "/127.0.0.1");
    assert_eq!(described.members[0].metadata, "meta");
    assert_eq!(described.members[0].assignment, "mine");
    let listed = fx.coordinator.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state.as_str(), "Stable");
    assert_eq!(listed[0].protocol_type, "consumer");
    assert_eq!(fx.coordinator.heartbeat("g", 1, &me, None), NONE);
}

#[tokio::test]
async fn three_members_joining_together_share_one_generation() {
    let fx = Fixture::new();
    let mut joins: Vec<_> = (0..3)
        .map(|_| Box::pin(fx.coordinator.join(join_req(""))))
        .collect();
    for join in &mut joins {
        waiting(join).await;
    }
    fx.advance(DELAY_MS);
    for join in &mut joins {
        waiting(join).await;
    }
    fx.advance(DELAY_MS);
    let mut answers = Vec::new();
    for join in &mut joins {
        answers.push(ready(join).await);
    }
    let leader = answers[0].leader.clone();
    assert_eq!(leader, answers[0].member_id);
    for answer in &answers {
        assert_eq!(answer.error, NONE);
        assert_eq!(answer.generation_id, 1);
        assert_eq!(answer.leader, leader);
        let expected = if answer.member_id == leader { 3 } else { 0 };
        assert_eq!(answer.members.len(), expected);
    }
    sync_all(&fx, &answers).await;
    let described = fx.coordinator.describe("g");
    assert_eq!(described.members.len(), 3);
    for member in &described.members {
        assert_eq!(member.assignment, assigned(&member.member_id));
    }
}

#[tokio::test]
async fn a_leaving_member_makes_the_others_rejoin() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 3).await;
    let (a, b, c) = (
        &answers[0].member_id,
        &answers[1].member_id,
        &answers[2].member_id,
    );

    let left = fx.coordinator.leave("g", &[(c.clone(), None)]);
    assert_eq!(left.error, NONE);
    assert_eq!(left.members, vec![(c.clone(), NONE)]);
    assert_eq!(fx.state(), GroupState::PreparingRebalance);
    assert_eq!(
        fx.coordinator.heartbeat("g", 1, a, None),
        REBALANCE_IN_PROGRESS
    );
    assert_eq!(
        fx.coordinator.heartbeat("g", 1, b, None),
        REBALANCE_IN_PROGRESS
    );

    let mut join_a = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut join_a).await;
    let answer_b = fx.coordinator.join(join_req(b)).await;
    let answer_a = ready(&mut join_a).await;
    assert_eq!(answer_a.generation_id, 2);
    assert_eq!(answer_b.generation_id, 2);
    assert_eq!(answer_a.leader, *a);
    assert_eq!(answer_a.members.len(), 2);
    assert!(answer_b.members.is_empty());
    sync_all(&fx, &[answer_a, answer_b]).await;
    assert_eq!(fx.coordinator.heartbeat("g", 2, c, None), UNKNOWN_MEMBER_ID);
}

#[tokio::test]
async fn a_silent_member_expires_after_its_session_timeout() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 2).await;
    let (a, b) = (&answers[0].member_id, &answers[1].member_id);

    fx.advance(6_000);
    assert_eq!(fx.coordinator.heartbeat("g", 1, a, None), NONE);
    fx.advance(3_999);
    assert_eq!(fx.coordinator.describe("g").members.len(), 2);
    assert_eq!(fx.state(), GroupState::Stable);
    fx.advance(1);
    assert_eq!(fx.state(), GroupState::PreparingRebalance);
    assert_eq!(fx.coordinator.describe("g").members.len(), 1);
    assert_eq!(fx.coordinator.heartbeat("g", 1, b, None), UNKNOWN_MEMBER_ID);
    assert_eq!(
        fx.coordinator.heartbeat("g", 1, a, None),
        REBALANCE_IN_PROGRESS
    );
    let again = fx.coordinator.join(join_req(a)).await;
    assert_eq!(again.generation_id, 2);
    assert_eq!(again.members.len(), 1);
}

#[tokio::test]
async fn a_member_that_does_not_rejoin_in_time_is_dropped() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 2).await;
    let (a, b) = (&answers[0].member_id, &answers[1].member_id);

    // The leader's rejoin starts a rebalance; b keeps heartbeating but never rejoins.
    let mut join_a = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut join_a).await;
    for _ in 0..5 {
        fx.advance(5_000);
        assert_eq!(
            fx.coordinator.heartbeat("g", 1, b, None),
            REBALANCE_IN_PROGRESS
        );
    }
    fx.advance(4_999);
    waiting(&mut join_a).await;
    fx.advance(1);
    let answer = ready(&mut join_a).await;
    assert_eq!(answer.generation_id, 2);
    assert_eq!(answer.members.len(), 1);
    assert_eq!(answer.members[0].member_id, *a);
    assert_eq!(fx.coordinator.heartbeat("g", 2, b, None), UNKNOWN_MEMBER_ID);
}

#[tokio::test]
async fn waiting_in_a_join_phase_keeps_a_member_alive() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 2).await;
    let (a, b) = (&answers[0].member_id, &answers[1].member_id);
    let mut join_a = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut join_a).await;
    for _ in 0..4 {
        fx.advance(5_000);
        assert_eq!(
            fx.coordinator.heartbeat("g", 1, b, None),
            REBALANCE_IN_PROGRESS
        );
    }
    // 20 s without a heartbeat from a, twice its session timeout.
    assert_eq!(fx.coordinator.describe("g").members.len(), 2);
    let answer_b = fx.coordinator.join(join_req(b)).await;
    assert_eq!(answer_b.generation_id, 2);
    assert_eq!(ready(&mut join_a).await.members.len(), 2);
}

#[tokio::test]
async fn a_stale_generation_is_illegal() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 2).await;
    let (a, b) = (&answers[0].member_id, &answers[1].member_id);
    let mut join_a = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut join_a).await;
    let answer_b = fx.coordinator.join(join_req(b)).await;
    let answer_a = ready(&mut join_a).await;
    assert_eq!(answer_a.generation_id, 2);
    assert_eq!(
        fx.coordinator.sync(sync_req(1, b, &[])).await.error,
        ILLEGAL_GENERATION
    );
    sync_all(&fx, &[answer_a, answer_b]).await;
    assert_eq!(
        fx.coordinator.heartbeat("g", 1, b, None),
        ILLEGAL_GENERATION
    );
    assert_eq!(
        fx.coordinator.check_commit("g", 1, b, None),
        ILLEGAL_GENERATION
    );
    assert_eq!(
        fx.coordinator.sync(sync_req(1, b, &[])).await.error,
        ILLEGAL_GENERATION
    );
    assert_eq!(fx.coordinator.check_commit("g", 2, b, None), NONE);
    assert_eq!(fx.coordinator.heartbeat("g", 2, b, None), NONE);
}

#[tokio::test]
async fn an_unknown_member_is_refused() {
    let fx = Fixture::new();
    stable_group(&fx, 1).await;
    let c = &fx.coordinator;
    assert_eq!(c.heartbeat("g", 1, "nobody", None), UNKNOWN_MEMBER_ID);
    assert_eq!(
        c.sync(sync_req(1, "nobody", &[])).await.error,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(c.check_commit("g", 1, "nobody", None), UNKNOWN_MEMBER_ID);
    assert_eq!(c.join(join_req("nobody")).await.error, UNKNOWN_MEMBER_ID);
    let left = c.leave("g", &[("nobody".to_string(), None)]);
    assert_eq!(
        left.members,
        vec![("nobody".to_string(), UNKNOWN_MEMBER_ID)]
    );
    assert_eq!(left.single_error(), UNKNOWN_MEMBER_ID);
    // An unknown group has no members either.
    assert_eq!(c.heartbeat("other", 1, "m", None), UNKNOWN_MEMBER_ID);
    let mut sync = sync_req(1, "m", &[]);
    sync.group_id = "other".into();
    assert_eq!(c.sync(sync).await.error, UNKNOWN_MEMBER_ID);
    let mut join = join_req("m");
    join.group_id = "other".into();
    assert_eq!(c.join(join).await.error, UNKNOWN_MEMBER_ID);
    let left = c.leave("other", &[("m".to_string(), None)]);
    assert_eq!((left.error, left.single_error()), (NONE, UNKNOWN_MEMBER_ID));
}

#[tokio::test]
async fn member_id_required_then_rejoin_with_it() {
    let fx = Fixture::new();
    let mut first = join_req("");
    first.require_known_member_id = true;
    let answer = fx.coordinator.join(first).await;
    assert_eq!(answer.error, MEMBER_ID_REQUIRED);
    assert!(answer.member_id.starts_with("client-"));
    assert_eq!(fx.state(), GroupState::Empty);
    assert!(fx.coordinator.describe("g").members.is_empty());

    let mut again = join_req(&answer.member_id);
    again.require_known_member_id = true;
    let mut join = Box::pin(fx.coordinator.join(again));
    waiting(&mut join).await;
    fx.advance(DELAY_MS);
    let joined = ready(&mut join).await;
    assert_eq!(joined.error, NONE);
    assert_eq!(joined.member_id, answer.member_id);
    assert_eq!(joined.leader, answer.member_id);
    assert_eq!(joined.generation_id, 1);
}

#[tokio::test]
async fn a_handed_out_member_id_holds_the_join_phase_until_it_expires() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 1).await;
    let a = &answers[0].member_id;
    let mut asks = join_req("");
    asks.require_known_member_id = true;
    assert_eq!(fx.coordinator.join(asks).await.error, MEMBER_ID_REQUIRED);
    assert_eq!(fx.state(), GroupState::Stable);

    // Another member joins directly (JoinGroup v3): a rebalance starts.
    let mut join_b = Box::pin(fx.coordinator.join(join_req("")));
    waiting(&mut join_b).await;
    assert_eq!(
        fx.coordinator.heartbeat("g", 1, a, None),
        REBALANCE_IN_PROGRESS
    );
    let mut join_a = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut join_a).await;
    // Everyone joined, but the handed-out id is expected until its session times out.
    fx.advance(SESSION_MS as u64 - 1);
    waiting(&mut join_a).await;
    fx.advance(1);
    let answer = ready(&mut join_a).await;
    assert_eq!(answer.generation_id, 2);
    assert_eq!(answer.members.len(), 2);
    assert_eq!(ready(&mut join_b).await.generation_id, 2);
}

#[tokio::test]
async fn a_handed_out_member_id_completes_the_join_phase_when_used() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 1).await;
    let a = &answers[0].member_id;
    let mut asks = join_req("");
    asks.require_known_member_id = true;
    let new_id = fx.coordinator.join(asks).await.member_id;
    let mut join_a = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut join_a).await;
    let mut join_c = Box::pin(fx.coordinator.join(join_req(&new_id)));
    let answer_c = ready(&mut join_c).await;
    assert_eq!(answer_c.generation_id, 2);
    assert_eq!(answer_c.member_id, new_id);
    assert_eq!(ready(&mut join_a).await.members.len(), 2);
}

#[tokio::test]
async fn inconsistent_protocols_are_refused() {
    let fx = Fixture::new();
    stable_group(&fx, 1).await;
    let mut other_protocol = join_req("");
    other_protocol.protocols = vec![("roundrobin".into(), Bytes::new())];
    let answer = fx.coordinator.join(other_protocol).await;
    assert_eq!(answer.error, INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(answer.member_id, "");
    let mut other_type = join_req("");
    other_type.protocol_type = "connect".into();
    assert_eq!(
        fx.coordinator.join(other_type).await.error,
        INCONSISTENT_GROUP_PROTOCOL
    );

    let mut no_protocols = join_req("");
    no_protocols.group_id = "h".into();
    no_protocols.protocols.clear();
    assert_eq!(
        fx.coordinator.join(no_protocols).await.error,
        INCONSISTENT_GROUP_PROTOCOL
    );
    let mut no_type = join_req("");
    no_type.group_id = "h".into();
    no_type.protocol_type.clear();
    assert_eq!(
        fx.coordinator.join(no_type).await.error,
        INCONSISTENT_GROUP_PROTOCOL
    );
    assert_eq!(fx.state(), GroupState::Stable);
}

#[tokio::test]
async fn the_protocol_is_chosen_by_vote_among_common_ones() {
    let fx = Fixture::new();
    let with = |protocols: &[&str]| {
        let mut req = join_req("");
        req.protocols = protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("{p}-meta"))))
            .collect();
        req
    };
    let mut joins = vec![
        Box::pin(
            fx.coordinator
                .join(with(&["cooperative-sticky", "roundrobin", "range"])),
        ),
        Box::pin(fx.coordinator.join(with(&["range", "roundrobin"]))),
        Box::pin(fx.coordinator.join(with(&["range", "roundrobin"]))),
    ];
    for join in &mut joins {
        waiting(join).await;
    }
    fx.advance(DELAY_MS);
    fx.advance(DELAY_MS);
    let leader = ready(&mut joins[0]).await;
    assert_eq!(leader.protocol_name.as_deref(), Some("range"));
    for member in &leader.members {
        assert_eq!(member.metadata, "range-meta");
    }
}

#[tokio::test]
async fn commits_are_checked_against_the_group() {
    let fx = Fixture::new();
    // A commit from outside group management to an unknown group creates it Empty.
    assert_eq!(fx.coordinator.check_commit("plain", -1, "", None), NONE);
    let listed = fx.coordinator.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].group_id.as_str(), listed[0].state),
        ("plain", GroupState::Empty)
    );
    assert_eq!(fx.coordinator.check_commit("plain", -1, "", None), NONE);
    assert_eq!(
        fx.coordinator.check_commit("gone", 3, "m", None),
        ILLEGAL_GENERATION
    );
    assert_eq!(
        fx.coordinator.check_commit("plain", 0, "m", None),
        UNKNOWN_MEMBER_ID
    );

    let mut answers = join_together(&fx, vec![join_req(""), join_req("")]).await;
    let b = answers.pop().unwrap();
    let a = answers.pop().unwrap();
    // Between join and sync, members must not commit yet.
    assert_eq!(
        fx.coordinator.check_commit("g", 1, &a.member_id, None),
        REBALANCE_IN_PROGRESS
    );
    sync_all(&fx, &[a.clone(), b.clone()]).await;
    assert_eq!(
        fx.coordinator.check_commit("g", 1, &a.member_id, None),
        NONE
    );
    assert_eq!(
        fx.coordinator.check_commit("g", -1, "", None),
        UNKNOWN_MEMBER_ID
    );
    // While preparing a rebalance, members may still commit.
    fx.coordinator.leave("g", &[(b.member_id.clone(), None)]);
    assert_eq!(
        fx.coordinator.check_commit("g", 1, &a.member_id, None),
        NONE
    );
    fx.coordinator.leave("g", &[(a.member_id.clone(), None)]);
    assert_eq!(fx.state(), GroupState::Empty);
    assert_eq!(fx.coordinator.check_commit("g", -1, "", None), NONE);
}

#[tokio::test]
async fn the_last_member_leaving_empties_the_group() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 1).await;
    let left = fx
        .coordinator
        .leave("g", &[(answers[0].member_id.clone(), None)]);
    assert_eq!(left.single_error(), NONE);
    let described = fx.coordinator.describe("g");
    assert_eq!(described.state, GroupState::Empty);
    assert_eq!(described.protocol_type, "consumer");
    assert!(described.members.is_empty());
    // The next generation follows the one the group emptied at (2).
    let mut join = Box::pin(fx.coordinator.join(join_req("")));
    waiting(&mut join).await;
    fx.advance(DELAY_MS);
    assert_eq!(ready(&mut join).await.generation_id, 3);

    let unknown = fx.coordinator.describe("nope");
    assert_eq!(unknown.state, GroupState::Dead);
    assert_eq!(unknown.state.as_str(), "Dead");
    assert!(unknown.members.is_empty());
}

#[tokio::test]
async fn a_new_rebalance_answers_waiting_syncs() {
    let fx = Fixture::new();
    let mut answers = join_together(&fx, vec![join_req(""), join_req("")]).await;
    let b = answers.pop().unwrap();
    let a = answers.pop().unwrap();
    let mut sync_b = Box::pin(fx.coordinator.sync(sync_req(1, &b.member_id, &[])));
    waiting(&mut sync_b).await;
    let mut join_c = Box::pin(fx.coordinator.join(join_req("")));
    waiting(&mut join_c).await;
    assert_eq!(ready(&mut sync_b).await.error, REBALANCE_IN_PROGRESS);
    let leader_sync = fx
        .coordinator
        .sync(sync_req(1, &a.member_id, &[(&a.member_id, "x")]))
        .await;
    assert_eq!(leader_sync.error, REBALANCE_IN_PROGRESS);
}

#[tokio::test]
async fn members_that_do_not_sync_in_time_are_removed() {
    let fx = Fixture::new();
    let short = |member_id: &str| {
        let mut req = join_req(member_id);
        req.rebalance_timeout_ms = 8_000;
        req
    };
    let mut answers = join_together(&fx, vec![short(""), short("")]).await;
    let b = answers.pop().unwrap();
    let a = answers.pop().unwrap();
    assert_eq!(a.leader, a.member_id);
    let mut sync_b = Box::pin(fx.coordinator.sync(sync_req(1, &b.member_id, &[])));
    waiting(&mut sync_b).await;
    fx.advance(5_000);
    assert_eq!(fx.coordinator.heartbeat("g", 1, &a.member_id, None), NONE);
    fx.advance(2_999);
    waiting(&mut sync_b).await;
    // The leader never sends its assignment.
    fx.advance(1);
    assert_eq!(ready(&mut sync_b).await.error, REBALANCE_IN_PROGRESS);
    let described = fx.coordinator.describe("g");
    assert_eq!(described.state, GroupState::PreparingRebalance);
    assert_eq!(described.members.len(), 1);
    let answer = fx.coordinator.join(short(&b.member_id)).await;
    assert_eq!(answer.generation_id, 2);
    assert_eq!(answer.leader, b.member_id);
}

#[tokio::test]
async fn a_new_member_that_waits_too_long_is_dropped() {
    let fx = Fixture::with(GroupConfig {
        initial_rebalance_delay_ms: DELAY_MS,
        new_member_join_timeout_ms: 20_000,
        ..GroupConfig::default()
    });
    let answers = stable_group(&fx, 1).await;
    let a = &answers[0].member_id;
    let mut join_b = Box::pin(fx.coordinator.join(join_req("")));
    waiting(&mut join_b).await;
    for _ in 0..4 {
        fx.advance(5_000);
        assert_eq!(
            fx.coordinator.heartbeat("g", 1, a, None),
            REBALANCE_IN_PROGRESS
        );
    }
    let answer = ready(&mut join_b).await;
    assert_eq!(
        (answer.error, answer.member_id.as_str()),
        (UNKNOWN_MEMBER_ID, "")
    );
    assert_eq!(fx.coordinator.describe("g").members.len(), 1);
}

#[tokio::test]
async fn a_second_join_from_a_member_replaces_the_first() {
    let fx = Fixture::new();
    let answers = stable_group(&fx, 2).await;
    let (a, b) = (&answers[0].member_id, &answers[1].member_id);
    let mut first = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut first).await;
    let mut second = Box::pin(fx.coordinator.join(join_req(a)));
    waiting(&mut second).await;
    assert_eq!(ready(&mut first).await.error, REBALANCE_IN_PROGRESS);
    fx.coordinator.join(join_req(b)).await;
    assert_eq!(ready(&mut second).await.generation_id, 2);
}

#[tokio::test]
async fn bad_requests_are_refused() {
    let fx = Fixture::with(GroupConfig {
        initial_rebalance_delay_ms: 0,
        members_max: 1,
        ..GroupConfig::default()
    });
    let mut short = join_req("");
    short.session_timeout_ms = 1_000;
    assert_eq!(
        fx.coordinator.join(short).await.error,
        INVALID_SESSION_TIMEOUT
    );
    let mut no_group = join_req("");
    no_group.group_id.clear();
    assert_eq!(fx.coordinator.join(no_group).await.error, INVALID_GROUP_ID);
    assert_eq!(fx.coordinator.heartbeat("", 1, "m", None), INVALID_GROUP_ID);
    assert_eq!(fx.coordinator.leave("", &[]).error, INVALID_GROUP_ID);
    // With no initial delay a lone member's join completes at once.
    let answer = fx.coordinator.join(join_req("")).await;
    assert_eq!(answer.generation_id, 1);
    assert_eq!(
        fx.coordinator.join(join_req("")).await.error,
        GROUP_MAX_SIZE_REACHED
    );
}

#[tokio::test]
async fn an_empty_group_makes_room_for_a_new_one() {
    let fx = Fixture::with(GroupConfig {
        initial_rebalance_delay_ms: DELAY_MS,
        groups_max: 2,
        ..GroupConfig::default()
    });
    assert_eq!(fx.coordinator.check_commit("old", -1, "", None), NONE);
    let in_group = |group: &str| {
        let mut req = join_req("");
        req.group_id = group.into();
        req
    };
    let mut one = Box::pin(fx.coordinator.join(in_group("one")));
    waiting(&mut one).await;
    let mut two = Box::pin(fx.coordinator.join(in_group("two")));
    waiting(&mut two).await;
    let ids: Vec<String> = fx
        .coordinator
        .list()
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    assert_eq!(ids, ["one", "two"]);
    assert_eq!(
        fx.coordinator.join(in_group("three")).await.error,
        COORDINATOR_NOT_AVAILABLE
    );
}

#[tokio::test]
async fn closing_answers_every_waiter() {
    let fx = Fixture::new();
    let mut join = Box::pin(fx.coordinator.join(join_req("")));
    waiting(&mut join).await;
    fx.coordinator.close();
    assert_eq!(ready(&mut join).await.error, COORDINATOR_NOT_AVAILABLE);
    assert_eq!(
        fx.coordinator.heartbeat("g", 0, "m", None),
        COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(
        fx.coordinator.join(join_req("")).await.error,
        COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(
        fx.coordinator.check_commit("g", -1, "", None),
        COORDINATOR_NOT_AVAILABLE
    );
}

#[test]
fn the_coordinator_can_be_shared_between_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Coordinator>();
    fn sendable<T: Send>(_: &T) {}
    let coordinator = Coordinator::new(GroupConfig::default(), Clock::System);
    sendable(&coordinator.join(join_req("")));
    sendable(&coordinator.sync(sync_req(1, "m", &[])));
}

/// A JoinGroup of the static member `instance` (no member id).
fn static_join_req(instance: &str) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some(instance.into()),
        ..join_req("")
    }
}

#[tokio::test]
async fn a_restarted_static_member_takes_its_place_without_a_rebalance() {
    let fx = Fixture::new();
    let answers = join_together(&fx, vec![static_join_req("a"), static_join_req("b")]).await;
    sync_all(&fx, &answers).await;
    let (old_a, b) = (answers[0].member_id.clone(), answers[1].member_id.clone());
    assert!(old_a.starts_with("a-"), "{old_a}");
    assert_eq!(fx.coordinator.check_invariants("g"), Some(1));
    let listed: Vec<_> = answers[0]
        .members
        .iter()
        .map(|m| m.group_instance_id.clone())
        .collect();
    assert_eq!(listed, vec![Some("a".to_string()), Some("b".to_string())]);

    // "a" restarts: it joins with its static id and no member id, and is
    // answered at once, in the same generation.
    let mut rejoin = Box::pin(fx.coordinator.join(static_join_req("a")));
    let rejoined = ready(&mut rejoin).await;
    assert_eq!(rejoined.error, NONE);
    assert_eq!(rejoined.generation_id, 1);
    let new_a = rejoined.member_id.clone();
    assert_ne!(new_a, old_a);
    assert_eq!(rejoined.leader, new_a, "the leader's place passes on");
    assert_eq!(fx.state(), GroupState::Stable);
    assert_eq!(fx.coordinator.check_invariants("g"), Some(1));
    // Its sync returns the assignment its earlier self had.
    let sync = fx.coordinator.sync(sync_req(1, &new_a, &[])).await;
    assert_eq!(sync.error, NONE);
    assert_eq!(sync.assignment, assigned(&old_a));
    // The other member notices nothing.
    assert_eq!(fx.coordinator.heartbeat("g", 1, &b, Some("b")), NONE);
    // The earlier self is fenced wherever it names its static id.
    assert_eq!(
        fx.coordinator.heartbeat("g", 1, &old_a, Some("a")),
        FENCED_INSTANCE_ID
    );
    assert_eq!(
        fx.coordinator.check_commit("g", 1, &old_a, Some("a")),
        FENCED_INSTANCE_ID
    );
    let mut old_sync = sync_req(1, &old_a, &[]);
    old_sync.group_instance_id = Some("a".into());
    assert_eq!(
        fx.coordinator.sync(old_sync).await.error,
        FENCED_INSTANCE_ID
    );
    let old_join = JoinRequest {
        member_id: old_a.clone(),
        ..static_join_req("a")
    };
    assert_eq!(
        fx.coordinator.join(old_join).await.error,
        FENCED_INSTANCE_ID
    );
    assert_eq!(
        fx.coordinator.heartbeat("g", 1, &old_a, None),
        UNKNOWN_MEMBER_ID
    );
    let described = fx.coordinator.describe("g");
    let members: Vec<_> = described
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
        .collect();
    assert!(
        members.contains(&(new_a.clone(), Some("a".into()))),
        "{members:?}"
    );
    assert_eq!(fx.coordinator.heartbeat("g", 1, &new_a, Some("a")), NONE);
    assert_eq!(fx.coordinator.check_invariants("g"), Some(1));
}

#[tokio::test]
async fn a_static_member_replaced_while_syncing_rebalances_and_its_old_sync_is_fenced() {
    let fx = Fixture::new();
    let answers = join_together(&fx, vec![static_join_req("a"), static_join_req("b")]).await;
    let (a, b) = (&answers[0].member_id, &answers[1].member_id);
    assert_eq!(answers[0].leader, *a);
    // "b" waits for the leader's assignment, then restarts.
    let mut b_sync = Box::pin(fx.coordinator.sync(sync_req(1, b, &[])));
    waiting(&mut b_sync).await;
    let mut b_rejoin = Box::pin(fx.coordinator.join(static_join_req("b")));
    waiting(&mut b_rejoin).await;
    assert_eq!(ready(&mut b_sync).await.error, FENCED_INSTANCE_ID);
    assert_eq!(fx.state(), GroupState::PreparingRebalance);
    // "a" rejoins; the new generation has "a" and the new "b".
    let mut a_rejoin = Box::pin(fx.coordinator.join(join_req(a)));
    let a_answer = ready(&mut a_rejoin).await;
    let b_answer = ready(&mut b_rejoin).await;
    assert_eq!(a_answer.generation_id, 2);
    assert_eq!(b_answer.generation_id, 2);
    assert_ne!(b_answer.member_id, *b);
    assert_eq!(a_answer.members.len(), 2);
    assert_eq!(fx.coordinator.check_invariants("g"), Some(2));
}

#[tokio::test]
async fn a_static_member_needs_no_member_id_round_trip_and_leaves_by_its_static_id() {
    let fx = Fixture::new();
    let first = JoinRequest {
        require_known_member_id: true,
        ..static_join_req("s")
    };
    let answers = join_together(&fx, vec![first]).await;
    assert_eq!(answers[0].error, NONE, "no MEMBER_ID_REQUIRED");
    sync_all(&fx, &answers).await;
    let id = answers[0].member_id.clone();

    // Another member id with the static id is fenced; the static id alone
    // removes the member that holds it.
    let left = fx
        .coordinator
        .leave("g", &[("someone-else".into(), Some("s".into()))]);
    assert_eq!(
        left.members,
        vec![("someone-else".to_string(), FENCED_INSTANCE_ID)]
    );
    let left = fx
        .coordinator
        .leave("g", &[("".into(), Some("nobody".into()))]);
    assert_eq!(left.members, vec![(String::new(), UNKNOWN_MEMBER_ID)]);
    let left = fx.coordinator.leave("g", &[("".into(), Some("s".into()))]);
    assert_eq!(left.members, vec![(id, NONE)]);
    assert_eq!(fx.state(), GroupState::Empty);
    // The rebalance the leave started completed with no member: Empty.
    assert_eq!(fx.coordinator.check_invariants("g"), Some(2));
}
