//! Partition selection for produced records, matching the Kafka Java client.
//!
//! Owns the key hash (`murmur2`, bit-for-bit Kafka's `Utils.murmur2`), the
//! sign-clearing step (`to_positive`), the keyed choice of partition
//! (`partition_for_key`, as in Kafka's default / built-in partitioner), and
//! the round-robin `StickyPartitioner` used for records without a key. A key
//! therefore lands on the same partition here as it would from a Java
//! producer writing to a topic with the same partition count.

use std::sync::atomic::{AtomicU64, Ordering};

/// Kafka's murmur2 seed.
const SEED: u32 = 0x9747_b28c;
/// Kafka's murmur2 multiplier.
const M: u32 = 0x5bd1_e995;
/// Kafka's murmur2 shift.
const R: u32 = 24;

/// Kafka's `Utils.murmur2`: the 32-bit murmur2 hash of `data`, as a Java `int`.
pub fn murmur2(data: &[u8]) -> i32 {
    let length = data.len();
    // Java: `int h = seed ^ length;` (length is a Java int; wrapping keeps
    // the low 32 bits, the same as Java would for any array it can hold).
    let mut h: u32 = SEED ^ (length as u32);

    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        // Java masks every byte with `& 0xff`, so bytes are read unsigned.
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R; // Java `>>>`: logical shift, hence u32.
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }

    // Tail: Java's fall-through `switch (length % 4)`, each byte `& 0xff`.
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }

    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;

    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (`n & 0x7fffffff`), not `abs`.
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// Kafka's keyed partition choice: `to_positive(murmur2(key)) % partitions`; panics if `partitions` is 0.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    assert!(partitions > 0, "partition count must be greater than zero");
    // to_positive yields 0..=i32::MAX, so the cast to u32 is lossless.
    (to_positive(murmur2(key)) as u32) % partitions
}

/// Round-robin partition chooser for unkeyed records, called once per request.
#[derive(Debug, Default)]
pub struct StickyPartitioner {
    /// Number of requests served so far; the next partition is this modulo the count.
    next: AtomicU64,
}

impl StickyPartitioner {
    /// A partitioner whose first request goes to partition 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The partition for the next request's unkeyed records, rotating 0, 1, …; panics if `partitions` is 0.
    pub fn next_partition(&self, partitions: u32) -> u32 {
        assert!(partitions > 0, "partition count must be greater than zero");
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // The remainder is below `partitions`, so it fits in u32.
        (n % u64::from(partitions)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    /// `UtilsTest.testMurmur2` from apache/kafka
    /// (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
    const KAFKA_MURMUR2_VECTORS: &[(&[u8], i32)] = &[
        (b"21", -973_932_308),
        (b"foobar", -790_332_482),
        (b"a-little-bit-long-string", -985_981_536),
        (b"a-little-bit-longer-string", -1_486_304_829),
        (
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58_897_971,
        ),
        (b"abc", 479_470_107),
    ];

    #[test]
    fn murmur2_matches_kafka_utils_test_vectors() {
        for &(input, expected) in KAFKA_MURMUR2_VECTORS {
            assert_eq!(
                murmur2(input),
                expected,
                "murmur2({:?})",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn murmur2_is_deterministic_for_every_tail_length() {
        let data: Vec<u8> = (0u8..=255).collect();
        for len in 0..=9 {
            assert_eq!(murmur2(&data[..len]), murmur2(&data[..len]));
        }
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(0), 0);
        assert_eq!(to_positive(i32::MAX), i32::MAX);
        assert_eq!(to_positive(42), 42);
    }

    #[test]
    fn partition_for_key_is_positive_hash_modulo_count() {
        // Same formula as Kafka's BuiltInPartitioner.partitionForKey, applied
        // to the Kafka-sourced hashes above.
        for &(key, hash) in KAFKA_MURMUR2_VECTORS {
            for partitions in [1u32, 2, 3, 7, 12, 50, 1000] {
                let expected = ((hash & 0x7fff_ffff) as u32) % partitions;
                assert_eq!(partition_for_key(key, partitions), expected);
            }
        }
    }

    #[test]
    fn partition_for_key_stays_below_the_partition_count() {
        for partitions in 1u32..=64 {
            for i in 0u32..200 {
                let key = format!("key-{i}");
                assert!(partition_for_key(key.as_bytes(), partitions) < partitions);
            }
        }
        assert!(partition_for_key(b"", u32::MAX) < u32::MAX);
    }

    #[test]
    fn partition_for_key_is_stable_for_the_same_key() {
        assert_eq!(partition_for_key(b"key", 3), partition_for_key(b"key", 3));
    }

    #[test]
    #[should_panic(expected = "partition count must be greater than zero")]
    fn partition_for_key_rejects_zero_partitions() {
        partition_for_key(b"key", 0);
    }

    #[test]
    fn sticky_partitioner_rotates_across_requests() {
        let sticky = StickyPartitioner::new();
        let got: Vec<u32> = (0..4).map(|_| sticky.next_partition(3)).collect();
        assert_eq!(got, [0, 1, 2, 0]);
    }

    #[test]
    fn sticky_partitioner_default_starts_at_zero() {
        assert_eq!(StickyPartitioner::default().next_partition(5), 0);
    }

    #[test]
    fn sticky_partitioner_with_one_partition_always_picks_zero() {
        let sticky = StickyPartitioner::new();
        for _ in 0..10 {
            assert_eq!(sticky.next_partition(1), 0);
        }
    }

    #[test]
    #[should_panic(expected = "partition count must be greater than zero")]
    fn sticky_partitioner_rejects_zero_partitions() {
        StickyPartitioner::new().next_partition(0);
    }

    #[test]
    fn sticky_partitioner_spreads_evenly_across_threads() {
        const THREADS: usize = 4;
        const CALLS: usize = 300;
        const PARTITIONS: u32 = 3;
        let sticky = Arc::new(StickyPartitioner::new());
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let sticky = Arc::clone(&sticky);
                thread::spawn(move || {
                    let mut counts = [0usize; PARTITIONS as usize];
                    for _ in 0..CALLS {
                        counts[sticky.next_partition(PARTITIONS) as usize] += 1;
                    }
                    counts
                })
            })
            .collect();
        let mut totals = [0usize; PARTITIONS as usize];
        for handle in handles {
            for (total, count) in totals.iter_mut().zip(handle.join().unwrap()) {
                *total += count;
            }
        }
        // Every counter value is handed out exactly once, so the split is exact.
        let each = THREADS * CALLS / PARTITIONS as usize;
        assert_eq!(totals, [each; PARTITIONS as usize]);
    }
}
