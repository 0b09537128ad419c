//! Tumbling windows: fixed size, aligned to the epoch, no overlap.

use super::Window;

/// The one window of `size_ms` containing `ts` (floor division, so
/// timestamps before 1970 land in the right window too).
pub fn window_of(ts: i64, size_ms: i64) -> Window {
    debug_assert!(size_ms > 0);
    let start = ts.div_euclid(size_ms) * size_ms;
    Window {
        start,
        end: start + size_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn boundaries_are_start_inclusive_end_exclusive() {
        assert_eq!(
            window_of(0, 300_000),
            Window {
                start: 0,
                end: 300_000
            }
        );
        assert_eq!(
            window_of(299_999, 300_000),
            Window {
                start: 0,
                end: 300_000
            }
        );
        assert_eq!(
            window_of(300_000, 300_000),
            Window {
                start: 300_000,
                end: 600_000
            }
        );
    }

    #[test]
    fn before_1970_floors_downwards() {
        assert_eq!(
            window_of(-1, 1000),
            Window {
                start: -1000,
                end: 0
            }
        );
        assert_eq!(
            window_of(-1000, 1000),
            Window {
                start: -1000,
                end: 0
            }
        );
        assert_eq!(
            window_of(-1001, 1000),
            Window {
                start: -2000,
                end: -1000
            }
        );
    }

    proptest! {
        #[test]
        fn the_window_contains_the_event_and_is_aligned(ts in -10i64.pow(15)..10i64.pow(15), size in 1i64..10_000_000) {
            let w = window_of(ts, size);
            prop_assert!(w.contains(ts));
            prop_assert_eq!(w.end - w.start, size);
            prop_assert_eq!(w.start.rem_euclid(size), 0);
        }
    }
}
