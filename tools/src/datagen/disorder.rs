//! The disorder layer: from fresh events in event-time order to the stream
//! a real feed delivers.
//!
//! For each emitted event one draw `u` decides:
//!
//! * `u < duplicate_fraction`: a copy of one of the last [`RECENT`] emitted
//!   events (same `event_id`, fields and event time);
//! * else `u < duplicate_fraction + late_fraction`: a fresh event placed
//!   *late*: its event time is `newest - lateness_ms - 1 - d`, with `newest`
//!   the largest event time emitted so far (the fresh time for the first
//!   event) and `d` uniform in `0..lateness_ms`;
//! * else a fresh event moved back by a uniform `0..=out_of_order_ms`.
//!
//! Invariants (tested): an on-time event is at most `out_of_order_ms`
//! behind the largest event time emitted before it, because every earlier
//! time is at most the current fresh time; a late event is more than
//! `lateness_ms` behind it.

use std::collections::VecDeque;

use super::clicks::Clicks;
use super::iot::Iot;
use super::purchases::Purchases;
use super::source::{Ctx, Source};
use super::{Arrival, Config, Event, StreamKind};

/// How many recent events a duplicate may copy.
pub const RECENT: usize = 1024;

/// The event generator: an iterator over the events of a [`Config`].
pub struct Generator {
    config: Config,
    ctx: Ctx,
    source: Box<dyn Source>,
    recent: VecDeque<Event>,
    /// Largest event time emitted so far.
    newest_ms: i64,
    emitted: u64,
    done: bool,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("config", &self.config)
            .field("emitted", &self.emitted)
            .finish_non_exhaustive()
    }
}

impl Generator {
    /// A generator for `config`; fails if the config is invalid.
    pub fn new(config: Config) -> anyhow::Result<Generator> {
        config.validate()?;
        let source: Box<dyn Source> = match config.stream {
            StreamKind::Purchases => Box::new(Purchases::new(config.high_value_fraction)),
            StreamKind::Clicks => Box::new(Clicks::new(config.keys, config.session_gap_ms)),
            StreamKind::Iot => Box::new(Iot::new()),
            StreamKind::Nexmark => {
                anyhow::bail!("nexmark has three kinds of event: use datagen::nexmark::Nexmark")
            }
        };
        Ok(Generator {
            ctx: Ctx::new(&config),
            source,
            recent: VecDeque::with_capacity(RECENT),
            newest_ms: i64::MIN,
            emitted: 0,
            done: false,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Events emitted so far.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    fn fresh(&mut self, late: bool) -> Option<Event> {
        let mut event = self.source.next_event(&mut self.ctx);
        if let Some(duration) = self.config.duration_ms {
            let end = self.config.start_time_ms.saturating_add(duration as i64);
            if event.event_time_ms >= end {
                return None;
            }
        }
        let c = &self.config;
        if late {
            // Behind the newest time *emitted*, which drives a watermark.
            let newest = if self.newest_ms == i64::MIN {
                event.event_time_ms
            } else {
                self.newest_ms
            };
            let extra = self.ctx.rng.below(c.lateness_ms) as i64;
            event.event_time_ms = newest - c.lateness_ms as i64 - 1 - extra;
            event.arrival = Arrival::Late;
        } else if c.out_of_order_ms > 0 {
            event.event_time_ms -= self.ctx.rng.below(c.out_of_order_ms + 1) as i64;
        }
        Some(event)
    }
}

impl Iterator for Generator {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.done || self.config.count.is_some_and(|n| self.emitted >= n) {
            return None;
        }
        let u = self.ctx.rng.next_f64();
        let c = &self.config;
        let event = if u < c.duplicate_fraction && !self.recent.is_empty() {
            let i = self.ctx.rng.below(self.recent.len() as u64) as usize;
            let mut copy = self.recent[i].clone();
            copy.arrival = Arrival::Duplicate;
            copy
        } else {
            let late = u >= c.duplicate_fraction && u < c.duplicate_fraction + c.late_fraction;
            match self.fresh(late) {
                Some(e) => e,
                None => {
                    self.done = true;
                    return None;
                }
            }
        };
        self.newest_ms = self.newest_ms.max(event.event_time_ms);
        if event.arrival != Arrival::Duplicate {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(event.clone());
        }
        self.emitted += 1;
        Some(event)
    }
}
