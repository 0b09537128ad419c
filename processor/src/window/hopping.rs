//! Hopping windows: size `S`, a new window every `A` (overlapping when
//! `A < S`), aligned to the epoch.
//!
//! Slices: time is cut into slices of `gcd(S, A)`; every window is a whole
//! number of consecutive slices. An aggregate keeps one partial result per
//! slice and merges a window's slices when it emits, so an event updates one
//! slice instead of `S / A` windows.

use super::Window;

/// The windows containing `ts`, earliest start first.
pub fn windows_of(ts: i64, size_ms: i64, advance_ms: i64) -> impl Iterator<Item = Window> {
    debug_assert!(size_ms > 0 && advance_ms > 0 && advance_ms <= size_ms);
    // Windows containing ts start in (ts - S, ts], on the grid of A.
    let last_start = ts.div_euclid(advance_ms) * advance_ms;
    let first_start = ((ts - size_ms).div_euclid(advance_ms) + 1) * advance_ms;
    (0..)
        .map(move |k| first_start + k * advance_ms)
        .take_while(move |&start| start <= last_start)
        .map(move |start| Window {
            start,
            end: start + size_ms,
        })
}

/// Length of the slices windows are made of: `gcd(size, advance)`.
pub fn slice_ms(size_ms: i64, advance_ms: i64) -> i64 {
    let (mut a, mut b) = (size_ms, advance_ms);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Start of the slice containing `ts`.
pub fn slice_start(ts: i64, slice_ms: i64) -> i64 {
    ts.div_euclid(slice_ms) * slice_ms
}

/// Starts of the slices that make up `window`.
pub fn slices_of(window: Window, slice_ms: i64) -> impl Iterator<Item = i64> {
    (window.start..window.end).step_by(slice_ms as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ten_minute_windows_every_minute() {
        let ws: Vec<Window> = windows_of(125_000, 600_000, 60_000).collect();
        assert_eq!(ws.len(), 10);
        assert_eq!(
            ws[0],
            Window {
                start: -420_000,
                end: 180_000
            }
        );
        assert_eq!(
            ws[9],
            Window {
                start: 120_000,
                end: 720_000
            }
        );
    }

    #[test]
    fn an_event_on_a_boundary_starts_a_window_and_leaves_one() {
        let ws: Vec<Window> = windows_of(60_000, 120_000, 60_000).collect();
        assert_eq!(
            ws,
            vec![
                Window {
                    start: 0,
                    end: 120_000
                },
                Window {
                    start: 60_000,
                    end: 180_000
                }
            ]
        );
        let ws: Vec<Window> = windows_of(0, 120_000, 60_000).collect();
        assert_eq!(
            ws,
            vec![
                Window {
                    start: -60_000,
                    end: 60_000
                },
                Window {
                    start: 0,
                    end: 120_000
                }
            ]
        );
    }

    #[test]
    fn equal_size_and_advance_is_tumbling() {
        for ts in [-1001, -1, 0, 999, 1000] {
            let ws: Vec<Window> = windows_of(ts, 1000, 1000).collect();
            assert_eq!(ws, vec![super::super::tumbling::window_of(ts, 1000)]);
        }
    }

    #[test]
    fn slices_tile_windows() {
        let s = slice_ms(600_000, 240_000);
        assert_eq!(s, 120_000);
        let w = Window {
            start: 240_000,
            end: 840_000,
        };
        assert_eq!(
            slices_of(w, s).collect::<Vec<_>>(),
            vec![240_000, 360_000, 480_000, 600_000, 720_000]
        );
    }

    proptest! {
        #[test]
        fn windows_are_exactly_those_containing_the_event(
            ts in -10i64.pow(12)..10i64.pow(12),
            advance in 1i64..5000,
            factor in 1i64..8,
            extra in 0i64..5000,
        ) {
            let size = (advance * factor + extra % advance.max(1)).max(advance);
            let ws: Vec<Window> = windows_of(ts, size, advance).collect();
            // Brute force: every aligned start within [ts - size, ts].
            let lo = (ts - size).div_euclid(advance) * advance;
            let expect: Vec<Window> = (0..)
                .map(|k| lo + k * advance)
                .take_while(|&s| s <= ts)
                .filter(|&s| s + size > ts)
                .map(|s| Window { start: s, end: s + size })
                .collect();
            prop_assert_eq!(&ws, &expect);
            let slice = slice_ms(size, advance);
            for w in &ws {
                prop_assert!(w.contains(ts));
                let slices: Vec<i64> = slices_of(*w, slice).collect();
                prop_assert_eq!(slices.len() as i64 * slice, size);
                prop_assert!(slices.contains(&slice_start(ts, slice)));
            }
        }
    }
}
