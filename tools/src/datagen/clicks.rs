//! The `clicks` stream: a clickstream of page views grouped in sessions.
//!
//! A pool of up to [`ACTIVE_SESSIONS`] sessions browses at the same time;
//! each event is the next page view of a session chosen at random, so a
//! user's views come in bursts. A session ends after a geometric number of
//! views (mean [`MEAN_VIEWS`]) and is replaced by a session of a user drawn
//! from the key distribution whose last view is at least `session_gap_ms`
//! old. If no such user turns up after a few draws, the clock jumps forward
//! until the last one drawn is eligible (an idle period). So two sessions
//! of one user are always separated by at least `session_gap_ms` of event
//! time (before disorder is applied), which makes SESSION windows with a
//! smaller gap find them.
//!
//! Pages follow a small site map: home -> category -> product -> cart ->
//! checkout, with the previous page as `referrer`.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::source::{Ctx, Source};
use super::{Arrival, Event};

/// Sessions browsing at the same time (fewer with fewer keys).
pub const ACTIVE_SESSIONS: usize = 8;
/// Mean page views per session.
pub const MEAN_VIEWS: f64 = 6.0;
/// Draws of an eligible user before the clock jumps.
const DRAWS: usize = 16;
const CATEGORIES: [&str; 6] = ["books", "music", "garden", "toys", "sports", "kitchen"];

#[derive(Debug)]
struct Session {
    user: u64,
    id: String,
    page: String,
    views_left: u32,
}

/// Generates `clicks` events.
#[derive(Debug)]
pub struct Clicks {
    gap_ms: i64,
    slots: usize,
    active: Vec<Session>,
    /// Per user: event time of their last view, and sessions started.
    users: HashMap<u64, (i64, u64)>,
}

impl Clicks {
    /// A generator over `keys` users with sessions `session_gap_ms` apart.
    pub fn new(keys: u64, session_gap_ms: u64) -> Clicks {
        Clicks {
            gap_ms: session_gap_ms as i64,
            slots: ACTIVE_SESSIONS.min(keys as usize),
            active: Vec::new(),
            users: HashMap::new(),
        }
    }

    /// Starts a session for an eligible user, jumping the clock if needed.
    fn start_session(&mut self, ctx: &mut Ctx) {
        let busy = |active: &[Session], u: u64| active.iter().any(|s| s.user == u);
        let mut user = ctx.keys.next_rank();
        for _ in 1..DRAWS {
            let rested = self
                .users
                .get(&user)
                .is_none_or(|(last, _)| ctx.now_ms().saturating_sub(*last) >= self.gap_ms);
            if rested && !busy(&self.active, user) {
                break;
            }
            user = ctx.keys.next_rank();
        }
        if busy(&self.active, user) {
            return; // Try again at the next event.
        }
        let entry = self.users.entry(user).or_insert((i64::MIN, 0));
        if entry.0 != i64::MIN {
            ctx.advance_to(entry.0.saturating_add(self.gap_ms));
        }
        entry.1 += 1;
        // Geometric number of views, at least 1.
        let u = 1.0 - ctx.rng.next_f64();
        let views = 1 + (u.ln() / (1.0 - 1.0 / MEAN_VIEWS).ln()).floor() as u32;
        self.active.push(Session {
            user,
            id: format!("s-{user}-{}", entry.1),
            page: String::new(),
            views_left: views.min(200),
        });
    }

    fn next_page(ctx: &mut Ctx, from: &str) -> String {
        let category = || CATEGORIES.iter().map(|c| format!("/c/{c}"));
        match from {
            "" => {
                if ctx.chance(0.5) {
                    "/".into()
                } else {
                    format!("/c/{}", ctx.pick(&CATEGORIES))
                }
            }
            "/" => format!("/c/{}", ctx.pick(&CATEGORIES)),
            p if category().any(|c| c == p) => {
                format!("/p/{}", ctx.rng.below(2000))
            }
            p if p.starts_with("/p/") => {
                let r = ctx.rng.next_f64();
                if r < 0.25 {
                    "/cart".into()
                } else if r < 0.6 {
                    format!("/p/{}", ctx.rng.below(2000))
                } else {
                    format!("/c/{}", ctx.pick(&CATEGORIES))
                }
            }
            "/cart" => {
                if ctx.chance(0.5) {
                    "/checkout".into()
                } else {
                    "/".into()
                }
            }
            _ => "/".into(),
        }
    }
}

impl Source for Clicks {
    fn next_event(&mut self, ctx: &mut Ctx) -> Event {
        ctx.tick();
        while self.active.len() < self.slots {
            let before = self.active.len();
            self.start_session(ctx);
            if self.active.len() == before {
                break;
            }
        }
        // With no active session nobody is busy, so a session started.
        debug_assert!(!self.active.is_empty());
        let i = ctx.rng.below(self.active.len() as u64) as usize;
        let time = ctx.now_ms();
        let referrer = self.active[i].page.clone();
        let page = Self::next_page(ctx, &referrer);
        let session = &mut self.active[i];
        session.page = page.clone();
        session.views_left -= 1;
        let (user, session_id) = (session.user, session.id.clone());
        if session.views_left == 0 {
            self.active.swap_remove(i);
        }
        self.users.entry(user).or_insert((i64::MIN, 0)).0 = time;
        let user_id = format!("user-{user}");
        let fields: Vec<(&'static str, Value)> = vec![
            ("user_id", json!(user_id)),
            ("session_id", json!(session_id)),
            ("event_type", json!("page_view")),
            ("page", json!(page)),
            (
                "referrer",
                if referrer.is_empty() {
                    Value::Null
                } else {
                    json!(referrer)
                },
            ),
        ];
        Event {
            event_id: ctx.next_event_id(),
            key: user_id,
            event_time_ms: time,
            fields,
            arrival: Arrival::OnTime,
        }
    }
}
