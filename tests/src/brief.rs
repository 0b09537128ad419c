//! The product brief's statements, as the end-to-end tests send them. This
//! crate talks to the binary over HTTP only and does not depend on the
//! product crates, so it compiles the processor's `sql/brief.rs` in by path:
//! the same `brief.sql`, one copy.

#[path = "../../processor/src/sql/brief.rs"]
mod shared;

pub use shared::{HIGH_VALUE_ALERTS, PURCHASE_STATS, SQL, USER_EVENTS};

/// The brief's stream declared as `events_<topic>` over the topic `topic`,
/// and its `purchase_stats` over that stream as the view `stats_<topic>`:
/// one request's statements, for a test that builds the brief's view over
/// several topics side by side.
pub fn purchase_stats_over(topic: &str) -> String {
    let declare = USER_EVENTS
        .replace("user_events", &format!("events_{topic}"))
        .replace(
            &format!("KAFKA_TOPIC='events_{topic}'"),
            &format!("KAFKA_TOPIC='{topic}'"),
        );
    let stats = PURCHASE_STATS
        .replace("purchase_stats", &format!("stats_{topic}"))
        .replace("FROM user_events", &format!("FROM events_{topic}"));
    format!("{declare}\n{stats}")
}
