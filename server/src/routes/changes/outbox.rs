//! The outbox of one change-feed connection: the events the feed's task has
//! read and the client has not yet been handed, at most [`BUFFER_BYTES`].
//!
//! The feed's task [`Outbox::push`]es events as the view commits them; the
//! answer's body [`Outbox::pop`]s them as fast as the connection takes them
//! (hyper asks for the next event only once it has room to write it). A
//! push that would take the queue past the limit means the client fell
//! behind: the queue is dropped at once (what it held is given back) and
//! the push answers [`Behind`] with the id of the last event handed to the
//! client, from where it resumes. One event is always taken into an empty
//! queue, so an event larger than the limit cannot wedge a feed.
//!
//! Invariant: every event the queue held before the last one handed out
//! was handed out too (the queue is FIFO and is only ever dropped whole),
//! so resuming after `handed` loses nothing and repeats nothing.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use axum::response::sse::Event;
use tokio::sync::Notify;

/// The most bytes of events one change-feed connection may hold in the
/// server, waiting for its client (besides one write buffer of the HTTP
/// connection and the kernel's socket buffers).
pub const BUFFER_BYTES: usize = 1 << 20;

/// Bytes an event costs beyond its fields: `event: `, `id: `, `data: `,
/// newlines, and the bookkeeping of the queue.
const EVENT_OVERHEAD_BYTES: usize = 64;

/// One event to send, with its size and id.
pub struct Outgoing {
    event: Event,
    bytes: usize,
    id: Option<String>,
}

impl Outgoing {
    /// An event of `kind` with `data` (one line: JSON) and, if given, `id`.
    pub fn new(kind: &'static str, id: Option<String>, data: String) -> Outgoing {
        let bytes =
            kind.len() + id.as_ref().map_or(0, String::len) + data.len() + EVENT_OVERHEAD_BYTES;
        let mut event = Event::default().event(kind);
        if let Some(id) = &id {
            event = event.id(id.clone());
        }
        Outgoing {
            event: event.data(data),
            bytes,
            id,
        }
    }
}

/// A push did not fit: the client fell behind. The queue was dropped.
#[derive(Debug, PartialEq, Eq)]
pub struct Behind {
    /// The id of the last event handed to the client (or the position it
    /// started from): where it resumes.
    pub handed: String,
}

struct Queue {
    events: VecDeque<Outgoing>,
    bytes: usize,
    /// The id of the last event handed out (at first: the start position).
    handed: String,
    /// No events follow those queued.
    ended: bool,
}

/// The events waiting for one client.
pub struct Outbox {
    queue: Mutex<Queue>,
    /// Wakes the one consumer ([`Outbox::pop`]); a notification sent while
    /// it is not waiting is kept for its next wait.
    ready: Notify,
    limit: usize,
}

impl Outbox {
    /// An empty outbox of at most `limit` bytes for a client at `start`
    /// (the position its stream starts from, as an event id).
    pub fn new(start: String, limit: usize) -> Outbox {
        Outbox {
            queue: Mutex::new(Queue {
                events: VecDeque::new(),
                bytes: 0,
                handed: start,
                ended: false,
            }),
            ready: Notify::new(),
            limit,
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `event`; or, if it would take the queue past the limit,
    /// drops the queue and answers where the client resumes.
    pub fn push(&self, event: Outgoing) -> Result<(), Behind> {
        let mut queue = self.queue();
        if !queue.events.is_empty() && queue.bytes + event.bytes > self.limit {
            queue.events = VecDeque::new();
            queue.bytes = 0;
            return Err(Behind {
                handed: queue.handed.clone(),
            });
        }
        queue.bytes += event.bytes;
        queue.events.push_back(event);
        drop(queue);
        self.ready.notify_one();
        Ok(())
    }

    /// Ends the stream after what is queued and then `last`, if given.
    pub fn end(&self, last: Option<Outgoing>) {
        let mut queue = self.queue();
        if let Some(last) = last {
            queue.bytes += last.bytes;
            queue.events.push_back(last);
        }
        queue.ended = true;
        drop(queue);
        self.ready.notify_one();
    }

    /// Ends the stream at once: drops what is queued and sends `last`.
    pub fn end_now(&self, last: Outgoing) {
        let mut queue = self.queue();
        queue.events = VecDeque::new();
        queue.bytes = 0;
        drop(queue);
        self.end(Some(last));
    }

    /// The next event for the client, waiting for one; `None` once the
    /// stream ended and everything was handed out.
    pub async fn pop(&self) -> Option<Event> {
        loop {
            {
                let mut queue = self.queue();
                if let Some(out) = queue.events.pop_front() {
                    queue.bytes -= out.bytes;
                    if let Some(id) = out.id {
                        queue.handed = id;
                    }
                    return Some(out.event);
                }
                if queue.ended {
                    return None;
                }
            }
            self.ready.notified().await;
        }
    }

    /// Bytes queued now.
    #[cfg(test)]
    fn queued_bytes(&self) -> usize {
        self.queue().bytes
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    fn change(seq: u64, data_bytes: usize) -> Outgoing {
        Outgoing::new("change", Some(format!("1:{seq}")), "x".repeat(data_bytes))
    }

    #[test]
    fn a_client_that_falls_behind_resumes_after_the_last_event_it_was_handed() {
        let outbox = Outbox::new("1:0".into(), 1_000);
        // Nothing handed yet: the start position.
        outbox.push(change(1, 400)).unwrap();
        outbox.push(change(2, 400)).unwrap();
        assert_eq!(
            outbox.push(change(3, 400)),
            Err(Behind {
                handed: "1:0".into()
            })
        );
        // The queue is given back at once.
        assert_eq!(outbox.queued_bytes(), 0);
        let outbox = Outbox::new("1:0".into(), 1_000);
        outbox.push(change(1, 400)).unwrap();
        outbox.push(change(2, 400)).unwrap();
        assert!(outbox.pop().now_or_never().flatten().is_some());
        outbox.push(change(3, 400)).unwrap();
        assert_eq!(
            outbox.push(change(4, 400)),
            Err(Behind {
                handed: "1:1".into()
            })
        );
    }

    #[test]
    fn one_event_larger_than_the_limit_still_passes() {
        let outbox = Outbox::new("1:0".into(), 100);
        outbox.push(change(1, 5_000)).unwrap();
        assert!(outbox.queued_bytes() > 100);
        assert!(outbox.pop().now_or_never().flatten().is_some());
        outbox.push(change(2, 5_000)).unwrap();
    }

    #[test]
    fn an_ended_outbox_hands_out_what_it_holds_then_nothing() {
        let outbox = Outbox::new("1:0".into(), 10_000);
        // Nothing queued: pop waits.
        assert!(outbox.pop().now_or_never().is_none());
        outbox.push(change(1, 10)).unwrap();
        outbox.push(change(2, 10)).unwrap();
        outbox.end(Some(Outgoing::new("behind", None, "{}".into())));
        for _ in 0..3 {
            assert!(outbox.pop().now_or_never().flatten().is_some());
        }
        assert!(matches!(outbox.pop().now_or_never(), Some(None)));
        // Ending now drops what was queued.
        let outbox = Outbox::new("1:0".into(), 10_000);
        outbox.push(change(1, 10)).unwrap();
        outbox.end_now(Outgoing::new("revoked", None, "{}".into()));
        assert!(outbox.pop().now_or_never().flatten().is_some());
        assert!(matches!(outbox.pop().now_or_never(), Some(None)));
        assert_eq!(outbox.queued_bytes(), 0);
    }
}
