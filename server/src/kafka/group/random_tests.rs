//! Random schedules against the invariants: simulated consumers join,
//! sync, heartbeat, leave and crash while the clock moves; after every step
//! the groups' invariants hold and generations never go back, and once the
//! chaos stops the live consumers settle into one Stable generation, each
//! with the assignment the leader wrote for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::Poll;

use bytes::Bytes;

use super::*;

type Waiting<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A consumer as the coordinator sees it.
struct Consumer<'a> {
    member_id: String,
    generation: i32,
    v4: bool,
    /// Crashed: never acts again (its waiting calls are dropped).
    crashed: bool,
    join: Option<Waiting<'a, JoinResponse>>,
    sync: Option<Waiting<'a, SyncResponse>>,
    /// The generation and assignment of its last successful sync.
    synced: Option<(i32, Bytes)>,
}

impl Consumer<'_> {
    fn idle(&self) -> bool {
        !self.crashed && self.join.is_none() && self.sync.is_none()
    }
}

/// xorshift64*: deterministic per seed, no crate needed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn assignment_for(generation: i32, member_id: &str) -> Bytes {
    Bytes::from(format!("{generation}:{member_id}"))
}

struct Sim<'a> {
    coordinator: &'a Coordinator,
    consumers: Vec<Consumer<'a>>,
}

impl<'a> Sim<'a> {
    fn start_join(&mut self, i: usize) {
        let c = &mut self.consumers[i];
        let req = JoinRequest {
            group_id: "g".into(),
            member_id: c.member_id.clone(),
            group_instance_id: None,
            client_id: format!("c{i}"),
            client_host: "/127.0.0.1".into(),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            require_known_member_id: c.v4,
        };
        c.sync = None;
        c.join = Some(Box::pin(self.coordinator.join(req)));
    }

    fn start_sync(&mut self, i: usize, assignments: Vec<(String, Bytes)>) {
        let c = &mut self.consumers[i];
        let req = SyncRequest {
            group_id: "g".into(),
            generation_id: c.generation,
            member_id: c.member_id.clone(),
            group_instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments,
        };
        c.sync = Some(Box::pin(self.coordinator.sync(req)));
    }

    /// What a client does on an error: rejoin, forgetting its id if unknown.
    fn react(&mut self, i: usize, error: ErrorCode) {
        match error {
            NONE => {}
            UNKNOWN_MEMBER_ID => {
                self.consumers[i].member_id.clear();
                self.start_join(i);
            }
            REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION => self.start_join(i),
            other => panic!("consumer {i}: unexpected error {other}"),
        }
    }

    fn on_join(&mut self, i: usize, answer: JoinResponse) {
        match answer.error {
            NONE => {
                let c = &mut self.consumers[i];
                c.member_id = answer.member_id.clone();
                c.generation = answer.generation_id;
                let assignments = answer
                    .members
                    .iter()
                    .map(|m| {
                        let a = assignment_for(answer.generation_id, &m.member_id);
                        (m.member_id.clone(), a)
                    })
                    .collect();
                self.start_sync(i, assignments);
            }
            MEMBER_ID_REQUIRED => {
                self.consumers[i].member_id = answer.member_id;
                self.start_join(i);
            }
            error => self.react(i, error),
        }
    }

    fn on_sync(&mut self, i: usize, answer: SyncResponse) {
        if answer.error == NONE {
            let c = &mut self.consumers[i];
            c.synced = Some((c.generation, answer.assignment));
        } else {
            self.react(i, answer.error);
        }
    }

    /// Polls every waiting call until none is answered in a whole pass.
    async fn settle(&mut self) {
        loop {
            let mut progress = false;
            for i in 0..self.consumers.len() {
                if let Some(join) = self.consumers[i].join.as_mut() {
                    if let Poll::Ready(answer) = poll_once(join).await {
                        self.consumers[i].join = None;
                        self.on_join(i, answer);
                        progress = true;
                    }
                }
                if let Some(sync) = self.consumers[i].sync.as_mut() {
                    if let Poll::Ready(answer) = poll_once(sync).await {
                        self.consumers[i].sync = None;
                        self.on_sync(i, answer);
                        progress = true;
                    }
                }
            }
            if !progress {
                return;
            }
        }
    }

    fn heartbeat_all(&mut self) {
        for i in 0..self.consumers.len() {
            let c = &self.consumers[i];
            if c.idle() && !c.member_id.is_empty() {
                let error = self
                    .coordinator
                    .heartbeat("g", c.generation, &c.member_id, None);
                self.react(i, error);
            }
        }
    }
}

/// Polls `f` once. Unconstrained: tokio's cooperative budget would
/// otherwise make a ready answer look pending after many polls in one task.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let once = std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *f).poll(cx)));
    tokio::task::unconstrained(once).await
}

async fn run(seed: u64) {
    let (clock, now) = Clock::manual(0);
    let config = GroupConfig {
        initial_rebalance_delay_ms: 300,
        ..GroupConfig::default()
    };
    let coordinator = Coordinator::new(config, clock);
    let mut sim = Sim {
        coordinator: &coordinator,
        consumers: Vec::new(),
    };
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut generation = 0;
    for _ in 0..300 {
        let live = sim.consumers.iter().filter(|c| !c.crashed).count();
        match rng.below(20) {
            0..=2 if live < 6 => {
                sim.consumers.push(Consumer {
                    member_id: String::new(),
                    generation: -1,
                    v4: rng.below(2) == 0,
                    crashed: false,
                    join: None,
                    sync: None,
                    synced: None,
                });
                sim.start_join(sim.consumers.len() - 1);
            }
            3 => {
                let i = rng.below(sim.consumers.len().max(1) as u64) as usize;
                if let Some(c) = sim.consumers.get_mut(i) {
                    c.crashed = true;
                    c.join = None;
                    c.sync = None;
                }
            }
            4 => {
                let i = rng.below(sim.consumers.len().max(1) as u64) as usize;
                if sim
                    .consumers
                    .get(i)
                    .is_some_and(|c| c.idle() && !c.member_id.is_empty())
                {
                    let id = sim.consumers[i].member_id.clone();
                    coordinator.leave("g", &[(id, None)]);
                    sim.consumers[i].crashed = true;
                }
            }
            5 | 6 => {
                // A rejoin with the same metadata (a leader's starts a rebalance).
                let i = rng.below(sim.consumers.len().max(1) as u64) as usize;
                if sim.consumers.get(i).is_some_and(|c| c.idle()) {
                    sim.start_join(i);
                }
            }
            _ => {
                sim.heartbeat_all();
                now.fetch_add(rng.below(4_000), Ordering::SeqCst);
                coordinator.tick();
            }
        }
        sim.settle().await;
        let current = coordinator.check_invariants("g").unwrap_or(0);
        assert!(current >= generation, "seed {seed}: generation went back");
        generation = current;
    }

    // No more chaos: the live consumers settle into one Stable generation.
    for _ in 0..200 {
        sim.heartbeat_all();
        now.fetch_add(1_000, Ordering::SeqCst);
        coordinator.tick();
        sim.settle().await;
        coordinator.check_invariants("g");
    }
    let described = coordinator.describe("g");
    let mut live: Vec<&Consumer> = sim.consumers.iter().filter(|c| !c.crashed).collect();
    if live.is_empty() {
        assert!(
            matches!(described.state, GroupState::Empty | GroupState::Dead),
            "seed {seed}: {described:?}"
        );
        return;
    }
    assert_eq!(described.state, GroupState::Stable, "seed {seed}");
    let generation = coordinator.check_invariants("g").unwrap();
    let mut members: Vec<&str> = described
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    members.sort_unstable();
    live.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    let live_ids: Vec<&str> = live.iter().map(|c| c.member_id.as_str()).collect();
    assert_eq!(members, live_ids, "seed {seed}");
    for c in live {
        assert!(c.idle(), "seed {seed}: {} still waiting", c.member_id);
        assert_eq!(
            c.synced,
            Some((generation, assignment_for(generation, &c.member_id))),
            "seed {seed}"
        );
    }
}

#[tokio::test]
async fn random_schedules_keep_invariants_and_settle() {
    for seed in 1..=60 {
        run(seed).await;
    }
}
