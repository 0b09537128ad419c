//! Retention: which whole segments to delete. Pure decisions here; the
//! partition applies them and the log runs them periodically.
//!
//! Rules (Kafka's, with one deliberate difference): only sealed segments
//! are ever deleted, oldest first, and only as a prefix. By time, a segment
//! goes once its newest batch was *appended* more than `retention_ms` ago —
//! the log's own clock, not record timestamps, so a backfill of old events
//! is not deleted the moment it lands. By size, the oldest segments go while
//! the partition (sealed + active bytes) exceeds `retention_bytes`.

/// What retention needs to know of a sealed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentFacts {
    /// Bytes on disk.
    pub bytes: u64,
    /// Append time of its newest batch (ms).
    pub max_append_time: i64,
}

/// How many of the oldest sealed segments to delete. `sealed` is ordered
/// oldest first; `active_bytes` is the active segment's size.
pub fn segments_to_delete(
    sealed: &[SegmentFacts],
    active_bytes: u64,
    retention_ms: Option<u64>,
    retention_bytes: Option<u64>,
    now_ms: i64,
) -> usize {
    let by_time = retention_ms.map_or(0, |ms| {
        let horizon = now_ms.saturating_sub(ms.min(i64::MAX as u64) as i64);
        sealed
            .iter()
            .take_while(|s| s.max_append_time < horizon)
            .count()
    });
    let by_size = retention_bytes.map_or(0, |limit| {
        let mut total: u64 = sealed.iter().map(|s| s.bytes).sum::<u64>() + active_bytes;
        let mut n = 0;
        while total > limit && n < sealed.len() {
            total -= sealed[n].bytes;
            n += 1;
        }
        n
    });
    by_time.max(by_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(bytes: u64, t: i64) -> SegmentFacts {
        SegmentFacts {
            bytes,
            max_append_time: t,
        }
    }

    #[test]
    fn time_retention_deletes_an_expired_prefix_only() {
        let sealed = [seg(10, 100), seg(10, 500), seg(10, 200)];
        assert_eq!(segments_to_delete(&sealed, 0, Some(100), None, 450), 1);
        // The third is old too, but the second is not: only a prefix goes.
        assert_eq!(segments_to_delete(&sealed, 0, Some(100), None, 550), 1);
        assert_eq!(segments_to_delete(&sealed, 0, Some(100), None, 601), 3);
        assert_eq!(segments_to_delete(&sealed, 0, None, None, i64::MAX), 0);
    }

    #[test]
    fn size_retention_counts_the_active_segment_but_never_deletes_it() {
        let sealed = [seg(100, 0), seg(100, 0)];
        assert_eq!(segments_to_delete(&sealed, 50, None, Some(250), 0), 0);
        assert_eq!(segments_to_delete(&sealed, 50, None, Some(249), 0), 1);
        assert_eq!(segments_to_delete(&sealed, 50, None, Some(10), 0), 2);
    }

    #[test]
    fn the_stricter_rule_wins() {
        let sealed = [seg(100, 0), seg(100, 1000), seg(100, 1000)];
        assert_eq!(segments_to_delete(&sealed, 0, Some(10), Some(150), 500), 2);
    }
}
