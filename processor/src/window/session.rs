//! Session windows: per key, an event at `t` opens `[t, t + gap)`; windows
//! that overlap or touch merge, so an event that bridges two sessions joins
//! them into one.

use super::Window;

/// What adding an event to a key's sessions does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionMerge {
    /// The session the event ends up in.
    pub window: Window,
    /// Existing sessions absorbed into it (their state merges into it and
    /// they are removed), in start order.
    pub absorbed: Vec<Window>,
}

/// Adds an event at `ts` to `sessions` (the key's existing sessions, any
/// order): returns the resulting session and the sessions it absorbed.
pub fn assign(sessions: &[Window], ts: i64, gap_ms: i64) -> SessionMerge {
    debug_assert!(gap_ms > 0);
    let mut window = Window {
        start: ts,
        end: ts.saturating_add(gap_ms),
    };
    let mut absorbed: Vec<Window> = Vec::new();
    // Merging can make the window reach further sessions: repeat until stable.
    loop {
        let before = absorbed.len();
        for s in sessions {
            if !absorbed.contains(s) && s.start <= window.end && window.start <= s.end {
                window = Window {
                    start: window.start.min(s.start),
                    end: window.end.max(s.end),
                };
                absorbed.push(*s);
            }
        }
        if absorbed.len() == before {
            break;
        }
    }
    absorbed.sort();
    SessionMerge { window, absorbed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(start: i64, end: i64) -> Window {
        Window { start, end }
    }

    #[test]
    fn a_lone_event_opens_a_session() {
        assert_eq!(
            assign(&[], 100, 30),
            SessionMerge {
                window: w(100, 130),
                absorbed: vec![]
            }
        );
    }

    #[test]
    fn an_event_within_the_gap_extends_the_session() {
        let m = assign(&[w(100, 130)], 120, 30);
        assert_eq!(
            m,
            SessionMerge {
                window: w(100, 150),
                absorbed: vec![w(100, 130)]
            }
        );
        // Touching the end exactly still merges: [100,130) and [130,160).
        assert_eq!(assign(&[w(100, 130)], 130, 30).window, w(100, 160));
        // One millisecond later does not.
        assert_eq!(assign(&[w(100, 130)], 131, 30).absorbed, vec![]);
    }

    #[test]
    fn a_bridging_event_merges_two_sessions() {
        let m = assign(&[w(100, 130), w(150, 180)], 125, 30);
        assert_eq!(m.window, w(100, 180));
        assert_eq!(m.absorbed, vec![w(100, 130), w(150, 180)]);
    }

    #[test]
    fn a_late_event_before_a_session_extends_it_backwards() {
        let m = assign(&[w(100, 130)], 80, 30);
        assert_eq!(m.window, w(80, 130));
    }

    proptest! {
        /// Assigning events one by one gives the same sessions as grouping
        /// the sorted events by gap, whatever the arrival order.
        #[test]
        fn incremental_sessions_equal_batch_sessions(mut events in proptest::collection::vec(-1000i64..1000, 1..40), gap in 1i64..100) {
            let mut sessions: Vec<Window> = Vec::new();
            for &ts in &events {
                let m = assign(&sessions, ts, gap);
                sessions.retain(|s| !m.absorbed.contains(s));
                sessions.push(m.window);
            }
            sessions.sort();
            events.sort();
            let mut expect: Vec<Window> = Vec::new();
            for ts in events {
                match expect.last_mut() {
                    Some(last) if ts <= last.end => last.end = last.end.max(ts + gap),
                    _ => expect.push(w(ts, ts + gap)),
                }
            }
            prop_assert_eq!(sessions, expect);
        }
    }
}
