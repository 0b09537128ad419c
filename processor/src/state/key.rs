//! Every RocksDB key of a processor version, built and taken apart here
//! and nowhere else, and the one order-preserving encoding they share.
//!
//! # Layout
//!
//! A version has two column families ([`super::store::Scope`]):
//!
//! `<name>@<version>.view` — the rows readers query, one per group (and
//! window), in key then window order:
//!
//! | key | value |
//! |-----|-------|
//! | group key ([`plain`]), or group key + window start + end ([`windowed`]) | the row's accumulators ([`super::slot`]) |
//!
//! `<name>@<version>.state` — operator state and the commit's metadata; the
//! first byte is a namespace ([`ns`]):
//!
//! | namespace | rest of the key | value |
//! |-----------|-----------------|-------|
//! | `0x01` [`ns::ACCUMULATOR`] | group key + slice start + end ([`slice_into`]) | a hopping slice's accumulators ([`super::slot`]) |
//! | `0x02` [`ns::DEDUP`] | the dedup id, UTF-8 as is ([`dedup_id`]) | event time of its last sighting, `i64` little-endian |
//! | `0x03` [`ns::TABLE`] | the table record's key, UTF-8 as is ([`table_row`]) | `0x01` + JSON `[[timestamp_ms, value-or-null], ..]` (before history: the JSON value alone) |
//! | `0x04` [`ns::STREAM_JOIN`] | side (`l` the stream, `r` the joined stream) + partition (`u32`) + offset (`u64`), big-endian ([`stream_join_entry`]) | `0x01` + header JSON + `\n` + the record's value (`crate::operator::stream_join`) |
//! | `0x05` [`ns::TOP_N`] | the partition's view key, escaped and terminated ([`encode_group_key`]), then the row's view key | the subquery's row, as JSON (`crate::operator::top_n`) |
//! | `0x06` [`ns::JOINED_ROW`] | a joined table's record key, UTF-8 as is | its latest row, JSON (`crate::operator::tables_join`) |
//! | `0x07` [`ns::JOIN_INDEX`] | the joined key a row names ([`encode_group_key`]), then the row's key | empty (`crate::operator::tables_join`) |
//! | `0x08` [`ns::FURTHER_TABLE`] | the table's place among the further joins (`u8`, from 1) + its record key, UTF-8 as is ([`TableSlot::row`]) | as [`ns::TABLE`] |
//! | `0x10` [`ns::META`] | a [`Meta`] name, ASCII | per [`Meta`] variant |
//!
//! The meta entries of one commit ([`Meta`]): `offset/{p}` and
//! `table_offset/{p}` (the next input offset per stream and table
//! partition), `watermark`, `watermark_partitions`, `log_time`,
//! `outbox/{seq:020}` and `outbox_seq` (output records waiting to be
//! appended), `output/{topic}` (a sequenced output topic's positions:
//! [`output_positions`]), and `spec` (the aggregate spec readers compute rows with,
//! written at open). Fixed-width numbers in values are little-endian;
//! keys are big-endian where they must sort.
//!
//! # Encoding
//!
//! RocksDB orders keys bytewise; these encodings make that order the
//! logical one:
//!
//! * a group key (arbitrary bytes) is escaped so no encoded key is a prefix
//!   of another: `0x00` becomes `0x00 0xFF`, and `0x00 0x01` terminates it;
//! * a window is `start` then `end`, each an `i64` with the sign bit flipped,
//!   big-endian — so negative times sort before positive ones.
//!
//! So all windows of one key form one contiguous range, ordered by start,
//! and a key's rows never interleave with another key's.

/// Key groups: how a version's keyed state is split among its workers.
///
/// Every view key (the group's key bytes, before [`plain`]/[`windowed`]
/// encoding) belongs to one of [`KEY_GROUPS`] key groups, `crc32(view key)
/// mod KEY_GROUPS` ([`key_group`]) — a pure function of the key, the same
/// on every machine and in every release. A version running with `n`
/// key-shard workers gives worker `i` the contiguous key groups
/// `[i * KEY_GROUPS / n, (i + 1) * KEY_GROUPS / n)` ([`Shard`]), as Flink
/// splits its key groups among subtasks; so a version can restart with
/// another number of workers and each finds its state by key group, and a
/// shard's state can be iterated (and one day moved) by selecting the rows,
/// slices and hopping groups whose view key falls in its key groups. The
/// keys themselves carry no shard prefix: a view's rows stay ordered by
/// key for readers, and the layout does not change with the number of
/// workers. Dedup ids and join table rows are not sharded (the
/// coordinating thread keeps them; see `crate::parallel`).
pub const KEY_GROUPS: u32 = 128;

/// The key group of `view_key` (see [`KEY_GROUPS`]).
pub fn key_group(view_key: &[u8]) -> u32 {
    crc32fast::hash(view_key) % KEY_GROUPS
}

/// One key-shard worker's slice of the key groups: worker `index` of
/// `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This worker's number, `0..count`.
    pub index: usize,
    /// Number of key-shard workers (at most [`KEY_GROUPS`]).
    pub count: usize,
}

impl Shard {
    /// The worker owning key group `group` among `count` workers.
    pub fn of_group(group: u32, count: usize) -> usize {
        group as usize * count / KEY_GROUPS as usize
    }

    /// The worker owning `view_key` among `count` workers.
    pub fn of_key(view_key: &[u8], count: usize) -> usize {
        Shard::of_group(key_group(view_key), count)
    }

    /// The key groups this worker owns, `[first, end)`.
    pub fn key_groups(&self) -> std::ops::Range<u32> {
        let bound = |i: usize| (i * KEY_GROUPS as usize).div_ceil(self.count) as u32;
        bound(self.index)..bound(self.index + 1)
    }

    /// True if this worker owns `view_key`.
    pub fn owns(&self, view_key: &[u8]) -> bool {
        Shard::of_key(view_key, self.count) == self.index
    }
}

/// Namespaces inside a `.state` column family (first key byte).
pub mod ns {
    /// Aggregate accumulators: hopping slices by group key and slice.
    pub const ACCUMULATOR: u8 = 0x01;
    /// Deduplication ids.
    pub const DEDUP: u8 = 0x02;
    /// Join table rows by record key.
    pub const TABLE: u8 = 0x03;
    /// A stream-stream join's buffered events by side, partition, offset.
    pub const STREAM_JOIN: u8 = 0x04;
    /// A top-N's rows by partition and row.
    pub const TOP_N: u8 = 0x05;
    /// A join of tables: the joined table's latest rows by record key.
    pub const JOINED_ROW: u8 = 0x06;
    /// A join of tables: the left rows by the joined key they name.
    pub const JOIN_INDEX: u8 = 0x07;
    /// Join table rows of a table joined after the first join
    /// ([`crate::plan::Plan::more_joins`]), by its place and record key.
    pub const FURTHER_TABLE: u8 = 0x08;
    /// Offsets, watermark, outbox, spec: see [`super::Meta`].
    pub const META: u8 = 0x10;
}

/// A meta entry of a version's state (namespace [`ns::META`]). Its key is
/// the namespace byte and the entry's ASCII name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    /// `offset/{p}`: the next offset to read in input partition `p` (`u64`).
    Offset(usize),
    /// `table_offset/{p}`: the next offset to read in partition `p` of the
    /// joined tables (`u64`): their partitions numbered one after the
    /// other, in join order (`crate::joined_topics`).
    TableOffset(usize),
    /// `watermark`: the committed watermark (`i64` as `u64`; `i64::MIN`
    /// before the first event).
    Watermark,
    /// `watermark_partitions`: the watermark tracker's per-partition
    /// progress (JSON), so a restart judges idleness as before the crash.
    WatermarkPartitions,
    /// `log_time`: the log time processed up to (`i64` as `u64`).
    LogTime,
    /// `outbox/{seq:020}`: the output records of commit `seq` (JSON),
    /// until they are appended.
    Outbox(u64),
    /// `outbox_seq`: the sequence number of the next outbox (`u64`).
    OutboxSeq,
    /// `spec`: the aggregate spec readers compute rows with (JSON),
    /// written at open.
    Spec,
    /// `source_positions`: for a view reading its repartition topic, the
    /// last input offset taken from each input partition (JSON object of
    /// partition → offset; see `spread::repartition`).
    SourcePositions,
}

/// Name prefix of the [`Meta::Outbox`] entries.
const OUTBOX_PREFIX: &str = "outbox/";

impl Meta {
    /// The entry's name (the key after the namespace byte).
    pub fn name(self) -> String {
        match self {
            Meta::Offset(p) => format!("offset/{p}"),
            Meta::TableOffset(p) => format!("table_offset/{p}"),
            Meta::Watermark => "watermark".into(),
            Meta::WatermarkPartitions => "watermark_partitions".into(),
            Meta::LogTime => "log_time".into(),
            Meta::Outbox(seq) => format!("{OUTBOX_PREFIX}{seq:020}"),
            Meta::OutboxSeq => "outbox_seq".into(),
            Meta::Spec => "spec".into(),
            Meta::SourcePositions => "source_positions".into(),
        }
    }

    /// The entry's key.
    pub fn key(self) -> Vec<u8> {
        let name = self.name();
        let mut k = Vec::with_capacity(1 + name.len());
        k.push(ns::META);
        k.extend_from_slice(name.as_bytes());
        k
    }

    /// The range `[lower, upper)` holding every [`Meta::Outbox`] entry.
    pub fn outbox_range() -> (Vec<u8>, Vec<u8>) {
        let mut lower = vec![ns::META];
        lower.extend_from_slice(OUTBOX_PREFIX.as_bytes());
        let upper = prefix_end(&lower).expect("not all 0xFF");
        (lower, upper)
    }

    /// The sequence number of an outbox entry's key.
    pub fn outbox_seq(key: &[u8]) -> Option<u64> {
        let name = key.strip_prefix(&[ns::META])?;
        std::str::from_utf8(name.strip_prefix(OUTBOX_PREFIX.as_bytes())?)
            .ok()?
            .parse()
            .ok()
    }
}

/// The meta key `output/{topic}` of a sequenced output topic
/// ([`crate::sequenced`]): per partition of the topic, in order, 16 bytes —
/// the sequence number of the next record this version makes for it and
/// the offset after its last batch appended there (`u64` little-endian
/// each).
pub fn output_positions(topic: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + topic.len());
    k.push(ns::META);
    k.extend_from_slice(OUTPUT_PREFIX.as_bytes());
    k.extend_from_slice(topic.as_bytes());
    k
}

/// Name prefix of the [`output_positions`] entries.
const OUTPUT_PREFIX: &str = "output/";

/// The range `[lower, upper)` holding every key of namespace `ns`.
pub fn namespace(ns: u8) -> ([u8; 1], [u8; 1]) {
    ([ns], [ns + 1])
}

/// The key of dedup id `id` ([`ns::DEDUP`]).
pub fn dedup_id(id: &str) -> Vec<u8> {
    in_namespace(ns::DEDUP, id.as_bytes())
}

/// The key of the joined table's record key `key` ([`ns::TABLE`]).
pub fn table_row(key: &str) -> Vec<u8> {
    TableSlot::First.row(key)
}

/// Where a joined table's rows are kept: the first join's table under
/// [`ns::TABLE`], the `n`th table joined after it under
/// [`ns::FURTHER_TABLE`] and the byte `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSlot {
    /// The table of [`crate::plan::Plan::join`].
    First,
    /// The table of `more_joins[n - 1]` (`n` from 1).
    Further(u8),
}

impl TableSlot {
    /// The slot of the table joined at `place` (0: the first join).
    pub fn at(place: usize) -> TableSlot {
        match place {
            0 => TableSlot::First,
            n => {
                TableSlot::Further(u8::try_from(n).expect("joins are bounded by limits::MAX_JOINS"))
            }
        }
    }

    fn prefix(self) -> Vec<u8> {
        match self {
            TableSlot::First => vec![ns::TABLE],
            TableSlot::Further(n) => vec![ns::FURTHER_TABLE, n],
        }
    }

    /// The key of record key `key`'s row.
    pub fn row(self, key: &str) -> Vec<u8> {
        let mut k = self.prefix();
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The range of this table's keys: `[lower, upper)`.
    pub fn range(self) -> (Vec<u8>, Vec<u8>) {
        let lower = self.prefix();
        let mut upper = lower.clone();
        *upper.last_mut().expect("a prefix is not empty") += 1;
        (lower, upper)
    }

    /// The record key of a key in this table's range.
    pub fn record_key(self, k: &[u8]) -> &[u8] {
        k.get(self.prefix().len()..).unwrap_or_default()
    }
}

/// The key of a stream-stream join's buffered event ([`ns::STREAM_JOIN`]):
/// its side's tag byte, partition and offset.
pub fn stream_join_entry(side: u8, partition: u32, offset: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(14);
    k.push(ns::STREAM_JOIN);
    k.push(side);
    k.extend_from_slice(&partition.to_be_bytes());
    k.extend_from_slice(&offset.to_be_bytes());
    k
}

/// The side tag, partition and offset of a [`stream_join_entry`] key.
pub fn parse_stream_join_entry(k: &[u8]) -> Option<(u8, u32, u64)> {
    let [n, side, rest @ ..] = k else {
        return None;
    };
    if *n != ns::STREAM_JOIN || rest.len() != 12 {
        return None;
    }
    let partition = u32::from_be_bytes(rest[..4].try_into().ok()?);
    let offset = u64::from_be_bytes(rest[4..].try_into().ok()?);
    Some((*side, partition, offset))
}

/// The rest of a state key after its namespace byte.
pub fn without_namespace(k: &[u8]) -> &[u8] {
    k.get(1..).unwrap_or_default()
}

fn in_namespace(ns: u8, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + rest.len());
    k.push(ns);
    k.extend_from_slice(rest);
    k
}

/// Writes into `out` the key of group `group`'s hopping slice `[start,
/// end)` ([`ns::ACCUMULATOR`]).
pub fn slice_into(out: &mut Vec<u8>, group: &[u8], start: i64, end: i64) {
    out.clear();
    out.push(ns::ACCUMULATOR);
    windowed_into(out, group, start, end);
}

/// The prefix of every slice key of `group`.
pub fn slice_prefix(group: &[u8]) -> Vec<u8> {
    let mut k = vec![ns::ACCUMULATOR];
    encode_group_key(&mut k, group);
    k
}

/// The slice key holding view row key `row` (a group key, or a windowed
/// one) — the same bytes after the namespace, for slice ranges that follow
/// a range of rows.
pub fn slice_of_row(row: &[u8]) -> Vec<u8> {
    in_namespace(ns::ACCUMULATOR, row)
}

/// Decodes a slice key: group, slice start, slice end.
pub fn decode_slice(k: &[u8]) -> Option<(Vec<u8>, i64, i64)> {
    decode_windowed(k.strip_prefix(&[ns::ACCUMULATOR])?)
}

/// The range `[lower, upper)` of every row of group `key` (all its
/// windows, for windowed views).
pub fn group_range(key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let lower = plain(key);
    let mut upper = lower.clone();
    // The terminator is 0x00 0x01; 0x00 0x02 ends this key's range.
    *upper.last_mut().expect("terminated") += 1;
    (lower, upper)
}

/// The range `[lower, upper)` of every row whose group key starts with
/// `prefix` (`upper` `None`: to the end).
pub fn group_prefix_range(prefix: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut lower = Vec::with_capacity(prefix.len() + 2);
    for &b in prefix {
        lower.push(b);
        if b == 0 {
            lower.push(0xFF);
        }
    }
    let upper = prefix_end(&lower);
    (lower, upper)
}

/// The range `[lower, upper)` of every row whose group key lies between
/// two bounds (each a key and whether it is included; `None`: unbounded),
/// in byte order of the keys (`upper` `None`: to the end). The escaping
/// keeps byte order, and a key's windowed rows sort after its plain key
/// and before the next key.
pub fn group_key_range(
    lower: Option<(&[u8], bool)>,
    upper: Option<(&[u8], bool)>,
) -> (Vec<u8>, Option<Vec<u8>>) {
    let lower = match lower {
        None => Vec::new(),
        Some((k, true)) => plain(k),
        Some((k, false)) => group_range(k).1,
    };
    let upper = upper.map(|(k, inclusive)| match inclusive {
        true => group_range(k).1,
        false => plain(k),
    });
    (lower, upper)
}

/// Terminator after an escaped group key.
const TERMINATOR: [u8; 2] = [0x00, 0x01];

/// Appends the escaped, terminated form of `key` to `out`.
pub fn encode_group_key(out: &mut Vec<u8>, key: &[u8]) {
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&TERMINATOR);
}

/// Decodes an escaped group key at the start of `bytes`; returns the key
/// and the rest.
pub fn decode_group_key(bytes: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut key = Vec::new();
    let mut i = 0;
    loop {
        match *bytes.get(i)? {
            0 => match *bytes.get(i + 1)? {
                0xFF => {
                    key.push(0);
                    i += 2;
                }
                0x01 => return Some((key, &bytes[i + 2..])),
                _ => return None,
            },
            b => {
                key.push(b);
                i += 1;
            }
        }
    }
}

/// Appends `ts` so that byte order equals numeric order.
pub fn encode_i64(out: &mut Vec<u8>, ts: i64) {
    out.extend_from_slice(&((ts as u64) ^ (1 << 63)).to_be_bytes());
}

/// Reads an [`encode_i64`] value from the start of `bytes`.
pub fn decode_i64(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let raw: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(((u64::from_be_bytes(raw) ^ (1 << 63)) as i64, &bytes[8..]))
}

/// The key of a windowed row: group key, window start, window end.
pub fn windowed(key: &[u8], start: i64, end: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 18);
    windowed_into(&mut out, key, start, end);
    out
}

/// Appends the [`windowed`] key to `out`.
pub fn windowed_into(out: &mut Vec<u8>, key: &[u8], start: i64, end: i64) {
    encode_group_key(out, key);
    encode_i64(out, start);
    encode_i64(out, end);
}

/// The first 8 bytes of `k` (zero-padded) as a number: comparing these
/// and then, on a tie, the whole keys gives byte order — cheaply, when
/// sorting references to keys stored elsewhere.
pub fn order_prefix(k: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = k.len().min(8);
    head[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(head)
}

/// Map entries in the byte order of their keys, sorted by
/// [`order_prefix`] first so that most comparisons touch no key memory.
pub fn in_key_order<'a, K, V>(
    entries: impl Iterator<Item = (&'a K, &'a mut V)>,
) -> Vec<(&'a K, &'a mut V)>
where
    K: AsRef<[u8]> + 'a,
    V: 'a,
{
    let mut sorted: Vec<(u64, &'a K, &'a mut V)> = entries
        .map(|(k, v)| (order_prefix(k.as_ref()), k, v))
        .collect();
    sorted.sort_unstable_by(|a, b| (a.0, a.1.as_ref()).cmp(&(b.0, b.1.as_ref())));
    sorted.into_iter().map(|(_, k, v)| (k, v)).collect()
}

/// Decodes a [`windowed`] key.
pub fn decode_windowed(bytes: &[u8]) -> Option<(Vec<u8>, i64, i64)> {
    let (key, rest) = decode_group_key(bytes)?;
    let (start, rest) = decode_i64(rest)?;
    let (end, rest) = decode_i64(rest)?;
    rest.is_empty().then_some((key, start, end))
}

/// The key of an unwindowed row.
pub fn plain(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 2);
    encode_group_key(&mut out, key);
    out
}

/// The range `[lower, upper)` of a key's windows starting in `[from, to)`.
pub fn window_range(key: &[u8], from: i64, to: i64) -> (Vec<u8>, Vec<u8>) {
    let mut lower = plain(key);
    let mut upper = lower.clone();
    encode_i64(&mut lower, from);
    encode_i64(&mut upper, to);
    (lower, upper)
}

/// The smallest key greater than every key starting with `prefix` (for
/// prefix scans), or `None` if there is none (all `0xFF`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn negative_times_sort_first() {
        let (a, b, c) = (
            windowed(b"k", -5, 0),
            windowed(b"k", 0, 5),
            windowed(b"k", 5, 10),
        );
        assert!(a < b && b < c);
    }

    #[test]
    fn a_key_never_interleaves_with_its_extension() {
        // "a" with any window sorts before "a\0..." and "ab".
        let a_late = windowed(b"a", i64::MAX - 1, i64::MAX);
        assert!(a_late < windowed(b"a\0", i64::MIN, i64::MIN + 1));
        assert!(a_late < windowed(b"ab", i64::MIN, i64::MIN + 1));
    }

    #[test]
    fn meta_keys_keep_their_stored_names() {
        let name = |m: Meta| String::from_utf8(m.key()[1..].to_vec()).unwrap();
        assert_eq!(Meta::Offset(3).key()[0], ns::META);
        assert_eq!(name(Meta::Offset(3)), "offset/3");
        assert_eq!(name(Meta::TableOffset(0)), "table_offset/0");
        assert_eq!(name(Meta::Watermark), "watermark");
        assert_eq!(name(Meta::WatermarkPartitions), "watermark_partitions");
        assert_eq!(name(Meta::LogTime), "log_time");
        assert_eq!(name(Meta::Outbox(7)), "outbox/00000000000000000007");
        assert_eq!(name(Meta::OutboxSeq), "outbox_seq");
        assert_eq!(name(Meta::Spec), "spec");
    }

    #[test]
    fn the_outbox_range_holds_outboxes_only_in_sequence_order() {
        let (lo, hi) = Meta::outbox_range();
        let inside = |k: &[u8]| lo.as_slice() <= k && k < hi.as_slice();
        assert!(inside(&Meta::Outbox(0).key()) && inside(&Meta::Outbox(u64::MAX).key()));
        assert!(Meta::Outbox(9).key() < Meta::Outbox(10).key());
        for other in [
            Meta::OutboxSeq,
            Meta::Offset(0),
            Meta::Watermark,
            Meta::Spec,
        ] {
            assert!(!inside(&other.key()), "{other:?}");
        }
        assert_eq!(Meta::outbox_seq(&Meta::Outbox(42).key()), Some(42));
        assert_eq!(Meta::outbox_seq(&Meta::OutboxSeq.key()), None);
        assert!(!inside(&output_positions("t")));
        assert_eq!(output_positions("t"), b"\x10output/t");
    }

    #[test]
    fn state_keys_stay_inside_their_namespace() {
        let (lo, hi) = namespace(ns::DEDUP);
        let id = dedup_id("\u{ff}\u{ff}");
        assert!(lo.as_slice() <= id.as_slice() && id.as_slice() < hi.as_slice());
        assert_eq!(without_namespace(&table_row("k")), b"k");
        let (first, further) = (TableSlot::at(0), TableSlot::at(2));
        assert_eq!(first.row("k"), table_row("k"));
        assert_eq!(further.row("k"), [ns::FURTHER_TABLE, 2, b'k']);
        assert_eq!(further.record_key(&further.row("k")), b"k");
        let (lower, upper) = further.range();
        assert!(lower.as_slice() <= further.row("k").as_slice());
        assert!(further.row("k").as_slice() < upper.as_slice());
        assert!(TableSlot::at(3).row("").as_slice() >= upper.as_slice());
        let mut slice = Vec::new();
        slice_into(&mut slice, b"g", -5, 5);
        assert!(slice.starts_with(&slice_prefix(b"g")));
        assert_eq!(decode_slice(&slice), Some((b"g".to_vec(), -5, 5)));
        assert_eq!(slice_of_row(&windowed(b"g", -5, 5)), slice);
    }

    proptest! {
        #[test]
        fn prefix_then_key_order_is_byte_order(keys in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..12), 0..40)) {
            let mut by_prefix = keys.clone();
            by_prefix.sort_by(|a, b| (order_prefix(a), a).cmp(&(order_prefix(b), b)));
            let mut bytewise = keys;
            bytewise.sort();
            prop_assert_eq!(by_prefix, bytewise);
        }

        #[test]
        fn shards_own_their_key_groups_and_nothing_else(key in proptest::collection::vec(any::<u8>(), 0..20), count in 1usize..=KEY_GROUPS as usize) {
            let group = key_group(&key);
            let owner = Shard::of_key(&key, count);
            prop_assert!(owner < count);
            for index in 0..count {
                let shard = Shard { index, count };
                prop_assert_eq!(shard.owns(&key), index == owner);
                prop_assert_eq!(shard.key_groups().contains(&group), index == owner);
            }
        }

        #[test]
        fn windowed_keys_roundtrip(key in proptest::collection::vec(any::<u8>(), 0..20), s in any::<i64>(), e in any::<i64>()) {
            prop_assert_eq!(decode_windowed(&windowed(&key, s, e)), Some((key, s, e)));
        }

        #[test]
        fn byte_order_is_key_then_start_then_end(
            k1 in proptest::collection::vec(any::<u8>(), 0..6), s1 in any::<i64>(), e1 in any::<i64>(),
            k2 in proptest::collection::vec(any::<u8>(), 0..6), s2 in any::<i64>(), e2 in any::<i64>(),
        ) {
            let logical = (k1.clone(), s1, e1).cmp(&(k2.clone(), s2, e2));
            prop_assert_eq!(windowed(&k1, s1, e1).cmp(&windowed(&k2, s2, e2)), logical);
        }

        #[test]
        fn group_ranges_hold_exactly_the_groups_rows(key in proptest::collection::vec(0u8..3, 0..5), other in proptest::collection::vec(0u8..3, 0..5), s in any::<i64>()) {
            let (lo, hi) = group_range(&key);
            let inside = |k: &[u8]| lo.as_slice() <= k && k < hi.as_slice();
            prop_assert!(inside(&plain(&key)) && inside(&windowed(&key, s, s)));
            prop_assert_eq!(inside(&windowed(&other, s, s)), other == key);
            let (plo, phi) = group_prefix_range(&key);
            let in_prefix = |k: &[u8]| plo.as_slice() <= k && phi.as_ref().is_none_or(|h| k < h.as_slice());
            prop_assert_eq!(in_prefix(&windowed(&other, s, s)), other.starts_with(&key));
        }

        #[test]
        fn key_ranges_hold_exactly_the_keys_between_their_bounds(lo in proptest::collection::vec(0u8..3, 0..4), hi in proptest::collection::vec(0u8..3, 0..4), other in proptest::collection::vec(0u8..3, 0..4), lo_in: bool, hi_in: bool, s in any::<i64>()) {
            let (l, u) = group_key_range(Some((&lo, lo_in)), Some((&hi, hi_in)));
            let inside = |k: &[u8]| l.as_slice() <= k && u.as_ref().is_none_or(|h| k < h.as_slice());
            let above = if lo_in { other >= lo } else { other > lo };
            let below = if hi_in { other <= hi } else { other < hi };
            prop_assert_eq!(inside(&plain(&other)), above && below);
            prop_assert_eq!(inside(&windowed(&other, s, s)), above && below);
        }

        #[test]
        fn window_ranges_hold_exactly_the_keys_windows(key in proptest::collection::vec(any::<u8>(), 0..6), other in proptest::collection::vec(any::<u8>(), 0..6), s in -1000i64..1000, from in -1000i64..1000, len in 0i64..500) {
            let (lo, hi) = window_range(&key, from, from + len);
            let row = windowed(&key, s, s + 10);
            prop_assert_eq!(lo <= row && row < hi, (from..from + len).contains(&s));
            if other != key {
                let foreign = windowed(&other, s, s + 10);
                prop_assert!(!(lo <= foreign && foreign < hi));
            }
        }
    }
}
