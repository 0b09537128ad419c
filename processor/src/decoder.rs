//! Turning an input record into an [`Event`]: decode the value (only the
//! fields the plan reads, when it names them), check declared field types,
//! take the event time, and judge it against the record's append time;
//! when nothing stateful (dedup, join) comes before the filter, apply it
//! here too. Most records of a filtered view fail its filter, so those take
//! a filter-first path ([`Located`]): the used fields are located and
//! checked but only built for records that pass.
//!
//! A derived stream's projection can take the same located fields and
//! write its row from them without an event ([`Decoder::locate`],
//! [`crate::project::RowWriter::write_located`]).
//!
//! Pure per record, so source workers ([`crate::parallel`]) run it in
//! parallel; the single-threaded runtime calls it inline.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

use bytes::Bytes;
use kappa_log::RecordRef;
use serde_json::Value;
use smallvec::SmallVec;

use crate::event::{locate_fields, Event, NameSet, Raw, Shape};
use crate::expr::{get_path, BinaryOp, DataType, Expr, Row};
use crate::plan::{EventTime, Plan};
use crate::time::{parse_timestamp, MinuteMemo};

/// What a record decodes to.
#[derive(Debug)]
pub(crate) enum Decoded {
    /// Not JSON, a declared field of another type, or no usable event
    /// time: counted as invalid and skipped.
    Invalid,
    /// An event time later than the append time plus `MAX_FUTURE`:
    /// invalid, and sent to the late topic if there is one.
    Future(Event),
    /// A valid record that failed the filter, applied early (nothing
    /// stateful comes before it): only its event time matters (it still
    /// moves the watermark).
    Filtered {
        /// Event time.
        event_time: i64,
    },
    /// An event to process.
    Valid {
        /// The event.
        event: Event,
        /// The filter was applied (and passed).
        filtered: bool,
    },
}

/// Decodes a plan's input records; cheap to clone (one per source worker).
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    /// The top-level fields the plan reads (`None`: decode whole values).
    used_fields: Option<Arc<[String]>>,
    typed_fields: Arc<[(String, DataType)]>,
    event_time: EventTime,
    max_future_ms: i64,
    /// The filter, when nothing stateful (dedup, join) comes before it:
    /// applied here, right after decoding.
    filter: Option<Expr>,
    /// The located path, when it applies ([`Located`]): taken by
    /// [`Decoder::decode`] when there is a filter, and by projections
    /// ([`Decoder::locate`]).
    located: Option<Arc<Located>>,
    /// The minute of the last event time read as text (per copy: a
    /// decoder is used by one thread).
    minute: Cell<Option<MinuteMemo>>,
    /// The layout of the last record the located path read, to read the
    /// next one by (per copy, as `minute`).
    shape: RefCell<Shape>,
    /// Valid events hold their record's key and value (sharing the batch
    /// buffer, a reference count each); false where nothing reads them
    /// ([`Decoder::without_record`]).
    share_record: bool,
}

/// The plan of [`Decoder`]'s located path: locate the used fields without
/// building them, check them, take the event time, build only the fields
/// the filter (if any) reads and apply it; the others are built only for
/// records that pass (the filter-first path), or never, where a projection
/// writes its row from the located fields. Whatever it is not sure of (an
/// invalid or future record, a value only building can check) goes to the
/// full path, which decides, so both paths give the same results.
#[derive(Debug)]
struct Located {
    /// The index among the used fields and the type of each declared field
    /// the plan reads (the event-time field's `TIMESTAMP` check left out:
    /// taking the event time checks it).
    checks: Vec<(usize, DataType)>,
    /// Per used field, whether `checks` has it (read once per record
    /// field, so kept beside the list).
    checked: Vec<bool>,
    /// The event-time field: its index among the used fields and the path
    /// within it (`None`: the record timestamp).
    event_time: Option<(usize, Vec<String>)>,
    /// The indices among the used fields of those the filter reads.
    filter_fields: Vec<usize>,
    /// The filter reads the record key.
    filter_reads_key: bool,
    /// When the filter is `field = 'text'`: the field's index and the text
    /// (a string without escapes is compared as it is located).
    text_equals: Option<(usize, String)>,
    /// The used fields, for locating them.
    names: NameSet,
}

impl Located {
    /// The located plan for `plan` decoding by `names` and applying
    /// `filter` (if any), if it applies.
    fn new(plan: &Plan, names: &[String], filter: Option<&Expr>) -> Option<Located> {
        let index = |name: &String| names.iter().position(|n| n == name);
        let event_time = match &plan.source.event_time {
            EventTime::RecordTimestamp => None,
            EventTime::Field(path) => {
                let (first, rest) = path.split_first()?;
                Some((index(first)?, rest.to_vec()))
            }
        };
        let checks = plan
            .source
            .typed_fields
            .iter()
            .filter_map(|(name, ty)| Some((index(name)?, *ty)))
            .filter(|&(i, ty)| {
                !(ty == DataType::Timestamp
                    && matches!(&event_time, Some((e, rest)) if *e == i && rest.is_empty()))
            })
            .collect::<Vec<_>>();
        let mut checked = vec![false; names.len()];
        for &(i, _) in &checks {
            checked[i] = true;
        }
        let mut filter_fields = Vec::new();
        let mut filter_reads_key = false;
        let mut text_equals = None;
        if let Some(filter) = filter {
            for path in filter.fields() {
                let i = index(path.first()?)?;
                if !filter_fields.contains(&i) {
                    filter_fields.push(i);
                }
            }
            filter.walk(&mut |e| filter_reads_key |= matches!(e, Expr::Key));
            text_equals = Self::text_filter(filter, &index);
        }
        Some(Located {
            checks,
            checked,
            event_time,
            filter_fields,
            filter_reads_key,
            text_equals,
            names: NameSet::new(names),
        })
    }

    /// `filter`'s field and text when it is `field = 'text'`.
    fn text_filter(
        filter: &Expr,
        index: &impl Fn(&String) -> Option<usize>,
    ) -> Option<(usize, String)> {
        match filter {
            Expr::Binary(BinaryOp::Eq, l, r) => match (&**l, &**r) {
                (Expr::Field(path), Expr::Literal(Value::String(text)))
                | (Expr::Literal(Value::String(text)), Expr::Field(path))
                    if path.len() == 1 =>
                {
                    Some((index(&path[0])?, text.clone()))
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// The filter's answer on located `raws` when it is `field = 'text'`
    /// and the field is a string without escapes or missing (SQL: a
    /// missing field is NULL, and NULL = 'text' is not true); `None` to
    /// evaluate the filter.
    fn text_equals(&self, raws: &[Raw<'_>]) -> Option<bool> {
        let (i, text) = self.text_equals.as_ref()?;
        match raws[*i] {
            Raw::Text(bytes) => Some(bytes == text.as_bytes()),
            Raw::Missing => Some(false),
            Raw::Int(..) | Raw::Other(_) => None,
        }
    }
}

/// What the located path found for a valid, not future record (its
/// fields in the [`LocatedFields`] given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Early {
    /// It failed the filter; its event time.
    Filtered(i64),
    /// It passed the filter, if any; its event time.
    Passed(i64),
}

/// A record's used fields as [`Decoder::locate`] leaves them, in the
/// caller's place (a few hundred bytes, not moved per record).
#[derive(Default)]
pub(crate) struct LocatedFields<'a> {
    /// The used fields, located.
    pub(crate) raws: SmallVec<[Raw<'a>; 8]>,
    /// The used fields the filter read, built (the others `Null`); empty
    /// when it built none.
    pub(crate) values: SmallVec<[Value; 8]>,
}

/// The used fields of a record as a [`Row`]: those some expression reads
/// built, the others `Null`.
pub(crate) struct FieldsRow<'a> {
    /// The used fields' names.
    pub(crate) names: &'a [String],
    /// Their values, by the index of their name.
    pub(crate) values: &'a [Value],
    /// The record key, as text (lossy).
    pub(crate) key: Option<Cow<'a, str>>,
    /// The record timestamp.
    pub(crate) record_timestamp: i64,
}

impl Row for FieldsRow<'_> {
    fn field(&self, path: &[String]) -> Option<&Value> {
        // As `Event::field` reads fields decoded by name.
        let (first, rest) = path.split_first()?;
        let i = self.names.iter().position(|n| n == first)?;
        get_path(&self.values[i], rest)
    }

    fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    fn record_timestamp(&self) -> i64 {
        self.record_timestamp
    }
}

impl Decoder {
    /// The decoder of `plan`'s source.
    pub(crate) fn new(plan: &Plan) -> Decoder {
        let used_fields: Option<Arc<[String]>> = plan.used_fields().map(Arc::from);
        let stateless_first = plan.dedup.is_none() && plan.join.is_none();
        let filter = plan.filter.clone().filter(|_| stateless_first);
        let located = used_fields
            .as_ref()
            .and_then(|names| Located::new(plan, names, filter.as_ref()))
            .map(Arc::new);
        Decoder {
            used_fields,
            typed_fields: Arc::from(plan.source.typed_fields.clone()),
            event_time: plan.source.event_time.clone(),
            max_future_ms: plan.source.max_future_ms,
            filter,
            located,
            minute: Cell::new(None),
            shape: RefCell::default(),
            share_record: true,
        }
    }

    /// This decoder giving valid events without their record's key and
    /// value ([`Event::raw_key`] `None`, [`Event::raw_value`] and
    /// [`Event::lossy_key`] empty), for callers that read neither (no
    /// expression reading the key, no side output of the record): taking
    /// and releasing a reference count on the batch buffer per event costs
    /// more than the rest of handing a filtered-in event on. Future events
    /// keep theirs (they may go to a side output).
    pub(crate) fn without_record(self) -> Decoder {
        Decoder {
            share_record: false,
            ..self
        }
    }

    /// True if the decoder applies a filter ([`Decoded::Valid`] events
    /// then passed it).
    pub(crate) fn filters(&self) -> bool {
        self.filter.is_some()
    }

    /// A copy sharing nothing with this one: every event holds the field
    /// names, so each source worker counts references on its own copy
    /// instead of every worker on one contended counter.
    pub(crate) fn detached(&self) -> Decoder {
        Decoder {
            used_fields: self.used_fields.as_deref().map(Arc::from),
            ..self.clone()
        }
    }

    /// Decodes `record` of input `partition`, read from the batch `buffer`
    /// and appended at `append_time`, and applies the early filter if there
    /// is one. Only an event's key and value share `buffer` (taking a
    /// reference count); a dropped record takes none.
    pub(crate) fn decode(
        &self,
        partition: u32,
        record: RecordRef<'_>,
        buffer: &Bytes,
        append_time: i64,
    ) -> Decoded {
        // The filter-first path: most records of a filtered view fail it.
        if self.filter.is_some() {
            let mut fields = LocatedFields::default();
            match self.locate(&record, append_time, &mut fields) {
                Some(Early::Filtered(event_time)) => return Decoded::Filtered { event_time },
                Some(Early::Passed(event_time)) => {
                    if let (Some(names), Some(values)) =
                        (&self.used_fields, built_fields(&fields.raws, fields.values))
                    {
                        let fields = Some((names.clone(), values));
                        let buffer = self.share_record.then_some(buffer);
                        let event =
                            new_event(partition, &record, buffer, Value::Null, fields, event_time);
                        return Decoded::Valid {
                            event,
                            filtered: true,
                        };
                    }
                }
                None => {}
            }
        }
        self.decode_full(partition, &record, buffer, append_time)
    }

    /// The used fields' names, when the decoder decodes by them.
    pub(crate) fn used_fields(&self) -> Option<&[String]> {
        self.used_fields.as_deref()
    }

    /// The located path ([`Located`]): `record`'s used fields located and
    /// checked into `fields` (whatever they held before), its event time,
    /// and the filter's answer if there is one; `None` where the path does
    /// not apply or is not sure, leaving the record to
    /// [`Decoder::decode`], which decides.
    pub(crate) fn locate<'a>(
        &self,
        record: &RecordRef<'a>,
        append_time: i64,
        fields: &mut LocatedFields<'a>,
    ) -> Option<Early> {
        let (plan, names) = (self.located.as_deref()?, self.used_fields.as_deref()?);
        let LocatedFields { raws, values } = fields;
        raws.clear();
        raws.resize(names.len(), Raw::Missing);
        values.clear();
        locate_fields(
            record.value,
            &plan.names,
            raws,
            Some(&mut self.shape.borrow_mut()),
        )?;
        for (i, raw) in raws.iter().enumerate() {
            // A located integer builds; a checked number or literal is not
            // looked at twice: its check below tells whether it builds
            // (`Raw::conforms` knows only those that do; it builds any
            // other).
            let told = match raw {
                Raw::Missing | Raw::Int(..) => true,
                Raw::Other(_) => plan.checked[i],
                Raw::Text(_) => false,
            };
            if !told && !raw.is_buildable() {
                raw.build()?;
            }
        }
        for &(i, ty) in &plan.checks {
            let conforms = match raws[i].conforms(ty) {
                Some(conforms) => conforms,
                None => crate::expr::conforms(&raws[i].build()?, ty),
            };
            if !conforms {
                return None;
            }
        }
        let event_time = match &plan.event_time {
            None => record.timestamp,
            Some((i, rest)) if rest.is_empty() => match raws[*i].timestamp_memo(&self.minute) {
                Some(event_time) => event_time?,
                None => parse_timestamp(&raws[*i].build()?)?,
            },
            Some((i, rest)) => parse_timestamp(get_path(&raws[*i].build()?, rest)?)?,
        };
        if event_time > append_time.saturating_add(self.max_future_ms) {
            return None;
        }
        let passed = match plan.text_equals(raws) {
            Some(passed) => passed,
            None if self.filter.is_none() => true,
            None => {
                values.resize(names.len(), Value::Null);
                for &i in &plan.filter_fields {
                    values[i] = raws[i].build()?;
                }
                let row = FieldsRow {
                    names,
                    values,
                    key: plan
                        .filter_reads_key
                        .then(|| record.key.map(crate::event::key_text))
                        .flatten(),
                    record_timestamp: record.timestamp,
                };
                let filter = self.filter.as_ref().expect("checked above");
                filter.is_true(&row)
            }
        };
        if !passed {
            return Some(Early::Filtered(event_time));
        }
        Some(Early::Passed(event_time))
    }

    /// Decodes `record` whole or by its used fields, checks it, and applies
    /// the early filter if there is one.
    fn decode_full(
        &self,
        partition: u32,
        record: &RecordRef<'_>,
        buffer: &Bytes,
        append_time: i64,
    ) -> Decoded {
        let decoded = match &self.used_fields {
            Some(names) => crate::event::decode_fields(record.value, names)
                .map(|values| (Value::Null, Some((names.clone(), values)))),
            None => serde_json::from_slice(record.value).map(|v| (v, None)),
        };
        let Ok((value, fields)) = decoded else {
            return Decoded::Invalid;
        };
        let timestamp = record.timestamp;
        let mut event = new_event(partition, record, Some(buffer), value, fields, timestamp);
        for (name, ty) in self.typed_fields.iter() {
            let value = Row::field(&event, std::slice::from_ref(name));
            if value.is_some_and(|v| !crate::expr::conforms(v, *ty)) {
                return Decoded::Invalid;
            }
        }
        if let EventTime::Field(path) = &self.event_time {
            match Row::field(&event, path).and_then(parse_timestamp) {
                Some(t) => event.event_time = t,
                None => return Decoded::Invalid,
            }
        }
        if event.event_time > append_time.saturating_add(self.max_future_ms) {
            return Decoded::Future(event);
        }
        match &self.filter {
            Some(filter) if !filter.is_true(&event) => Decoded::Filtered {
                event_time: event.event_time,
            },
            filter => {
                if !self.share_record {
                    (event.raw_key, event.lossy_key) = (None, None);
                    event.raw_value = Bytes::new();
                }
                Decoded::Valid {
                    event,
                    filtered: filter.is_some(),
                }
            }
        }
    }
}

/// Every used field's value from its located `raws`, those the filter
/// built (`values`, if it built any) moved over; `None` where one does not
/// build. Built straight into the event's vector: no inline vector copied
/// out.
fn built_fields(raws: &[Raw<'_>], values: SmallVec<[Value; 8]>) -> Option<Vec<Value>> {
    let mut filter_values = values.into_iter();
    let mut fields = Vec::with_capacity(raws.len());
    for raw in raws {
        fields.push(match filter_values.next() {
            Some(value) if !value.is_null() => value,
            _ => raw.build()?,
        });
    }
    Some(fields)
}

/// The event of `record` of input `partition`, decoded to `value` or
/// `fields`, at `event_time`; its raw key and value share the batch
/// `buffer` the record was read from (without one, it has neither:
/// [`Decoder::without_record`]).
fn new_event(
    partition: u32,
    record: &RecordRef<'_>,
    buffer: Option<&Bytes>,
    value: Value,
    fields: Option<(Arc<[String]>, Vec<Value>)>,
    event_time: i64,
) -> Event {
    let (lossy_key, raw_key, raw_value) = match buffer {
        Some(buffer) => (
            Event::lossy_key_of(record.key),
            record.key.map(|key| buffer.slice_ref(key)),
            buffer.slice_ref(record.value),
        ),
        None => (None, None, Bytes::new()),
    };
    Event {
        partition,
        offset: record.offset,
        record_timestamp: record.timestamp,
        lossy_key,
        raw_key,
        raw_value,
        value,
        fields,
        event_time,
        joined: Vec::new(),
        joined_key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::{Projected, ProjectedRow};
    use crate::sql::{parse, Statement};
    use kappa_log::batch::{encode, BatchMeta, BatchView};
    use kappa_log::NewRecord;
    use proptest::prelude::*;

    const STREAM: &str = "CREATE STREAM user_events (user_id VARCHAR, event_type VARCHAR, \
        amount DECIMAL(10,2), n INT, event_time TIMESTAMP) \
        WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON', TIMESTAMP='event_time');";

    /// Views whose filters the filter-first path applies: the seed's (a
    /// field equal to a text, compared as located), one reading the key and
    /// numbers, one over an integer column, a text equal to a field.
    const VIEWS: [&str; 4] = [
        "CREATE TABLE t AS SELECT user_id, COUNT(*) AS c, SUM(amount) AS s FROM user_events \
         WINDOW TUMBLING (SIZE 5 MINUTES) WHERE event_type = 'purchase' GROUP BY user_id;",
        "CREATE TABLE t AS SELECT user_id, COUNT(*) AS c FROM user_events \
         WHERE amount > 50 OR ROWKEY = 'k1' GROUP BY user_id;",
        "CREATE STREAM t AS SELECT user_id, n FROM user_events WHERE n >= 2 OR n IS NULL;",
        "CREATE TABLE t AS SELECT user_id, COUNT(*) AS c FROM user_events \
         WHERE 'view' = event_type GROUP BY user_id;",
    ];

    fn decoder(view: &str) -> Decoder {
        let mut statements = parse(&format!("{STREAM}\n{view}")).unwrap();
        let Statement::CreateAs(create) = statements.remove(1) else {
            panic!("not CREATE AS");
        };
        let Statement::CreateSource(source) = statements.remove(0) else {
            panic!("not a source");
        };
        let decoder = Decoder::new(&crate::sql::plan(&create, &vec![source]).unwrap());
        assert!(decoder.located.is_some(), "{view}");
        decoder
    }

    /// A batch of one record at `offset` with `key` and `value`.
    fn batch_of(offset: u64, timestamp: i64, key: Option<&[u8]>, value: Vec<u8>) -> BatchView {
        let record = NewRecord {
            key: key.map(Bytes::copy_from_slice),
            value: Bytes::from(value),
            timestamp: Some(timestamp),
            headers: Vec::new(),
        };
        let mut out = Vec::new();
        let meta = BatchMeta {
            base_offset: offset,
            append_time: timestamp,
            idempotency_key: None,
        };
        encode(&mut out, meta, &[record]);
        BatchView::parse(&Bytes::from(out)).unwrap()
    }

    /// The one record of `batch`.
    fn only_record(batch: &BatchView) -> RecordRef<'_> {
        batch.record_refs().next().unwrap()
    }

    /// What a decoding decided, comparable.
    fn outcome(decoded: Decoded) -> String {
        match decoded {
            Decoded::Invalid => "invalid".into(),
            Decoded::Future(e) => format!("future {}", e.event_time),
            Decoded::Filtered { event_time } => format!("filtered {event_time}"),
            Decoded::Valid { event, filtered } => format!(
                "valid {} {filtered} {:?} {:?} {:?}",
                event.event_time, event.fields, event.raw_key, event.raw_value
            ),
        }
    }

    /// A member value of any kind the fast path treats apart.
    fn arb_member() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(r#""purchase""#.to_string()),
            Just(r#""view""#.to_string()),
            Just(r#""pur\u0063hase""#.to_string()),
            Just("\"caf\u{e9}\"".to_string()),
            Just(r#""2026-01-01T00:00:00.000Z""#.to_string()),
            Just(r#"" 2026-01-01T00:05:00.5+01:00 ""#.to_string()),
            Just(r#""2026-13-01T00:00:00Z""#.to_string()),
            Just(r#""2026-01-01T00:00:00.000Z\n""#.to_string()),
            (0i64..2_000_000_000_000).prop_map(|n| n.to_string()),
            (-100i64..100).prop_map(|n| n.to_string()),
            Just("99999999999999999999".to_string()),
            Just("-0".to_string()),
            (0u32..20000).prop_map(|n| format!("{}.{:02}", n / 100, n % 100)),
            Just("1e400".to_string()),
            Just("2.5e3".to_string()),
            Just(format!("{}.5", "9".repeat(320))),
            Just("true".to_string()),
            Just("null".to_string()),
            Just("[1,\"a\"]".to_string()),
            Just(r#"{"x":"purchase"}"#.to_string()),
        ]
    }

    /// The bytes of a record: some of the used members (maybe twice), an
    /// unused one, sometimes damaged.
    fn arb_record() -> impl Strategy<Value = Vec<u8>> {
        let names = prop_oneof![
            Just("user_id"),
            Just("event_type"),
            Just("amount"),
            Just("n"),
            Just("event_time"),
            Just("pad"),
        ];
        (
            proptest::collection::vec((names, arb_member()), 0..7),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(members, bad_utf8, broken)| {
                let body: Vec<String> = members
                    .iter()
                    .map(|(name, value)| format!("\"{name}\":{value}"))
                    .collect();
                let mut bytes = format!("{{{}}}", body.join(",")).into_bytes();
                if bad_utf8 {
                    if let Some(at) = bytes.iter().position(|b| *b == b'e') {
                        bytes[at] = 0xff;
                    }
                }
                if broken {
                    bytes.pop();
                }
                bytes
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The filter-first path decides every record as the full path does.
        #[test]
        fn filter_first_equals_the_full_path(
            view in 0..VIEWS.len(),
            value in arb_record(),
            key in prop_oneof![Just(None), Just(Some(&b"k1"[..])), Just(Some(&b"\xffk"[..]))],
            append_time in prop_oneof![Just(i64::MAX / 2), Just(1_767_225_700_000_i64)],
        ) {
            let decoder = decoder(VIEWS[view]);
            let batch = batch_of(7, 1_767_225_600_000, key, value);
            let (record, buffer) = (only_record(&batch), batch.as_bytes());
            prop_assert_eq!(
                outcome(decoder.decode(3, record, buffer, append_time)),
                outcome(decoder.decode_full(3, &record, buffer, append_time))
            );
        }
    }

    /// Projections whose rows are made from located fields: plain fields
    /// (strings, numbers, a timestamp), computed columns, the key, a
    /// filter, `PARTITION BY`.
    const PROJECTIONS: [&str; 5] = [
        "CREATE STREAM t AS SELECT user_id, event_type, amount, n, event_time FROM user_events;",
        "CREATE STREAM t AS SELECT user_id, 0.908 * amount AS euros, n FROM user_events \
         WHERE event_type = 'purchase';",
        "CREATE STREAM t AS SELECT n, ROWKEY AS k, event_type FROM user_events \
         WHERE n >= 2 OR n IS NULL PARTITION BY user_id;",
        "CREATE STREAM t AS SELECT amount AS a, amount AS b, UPPER(user_id) AS u FROM user_events \
         PARTITION BY n;",
        "CREATE STREAM t AS SELECT -n % 3 AS m, n * 2 + amount AS s, amount / n AS q, \
         user_id || '!' AS c, NULL * n AS z, 'web' AS via, 18446744073709551615 AS big, \
         2.5 AS half FROM user_events;",
    ];

    /// The decoder and the projection made where events are decoded of
    /// one of [`PROJECTIONS`].
    fn projection(view: &str) -> (Decoder, crate::parallel::SourceProjection) {
        let mut statements = parse(&format!("{STREAM}\n{view}")).unwrap();
        let (Statement::CreateAs(create), Statement::CreateSource(source)) =
            (statements.remove(1), statements.remove(0))
        else {
            panic!("not a source and a CREATE AS");
        };
        let plan = crate::sql::plan(&create, &vec![source]).unwrap();
        let decoder = Decoder::new(&plan);
        let output = crate::project::ProjectOutput::of(&plan).unwrap();
        let crate::plan::Operation::Project { columns } = &plan.operation else {
            panic!("not a projection");
        };
        let project = crate::parallel::SourceProjection::new(
            Arc::from(columns.as_slice()),
            output.row,
            plan.partition_by.clone(),
            &decoder,
        );
        (decoder, project)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Where a projection's row is made from the located fields, it is
        /// the record the event path makes (or the same filtered time).
        #[test]
        fn located_rows_equal_the_event_path(
            view in 0..PROJECTIONS.len(),
            value in arb_record(),
            key in prop_oneof![Just(None), Just(Some(&b"k1"[..])), Just(Some(&b"\xffk"[..]))],
            append_time in prop_oneof![Just(i64::MAX / 2), Just(1_767_225_700_000_i64)],
        ) {
            let (decoder, mut project) = projection(PROJECTIONS[view]);
            let batch = batch_of(7, 1_767_225_600_000, key, value);
            let (record, buffer) = (only_record(&batch), batch.as_bytes());
            let mut rows = b"before".to_vec();
            let Some(located) = project.project_located(&decoder, &record, append_time, &mut rows) else {
                prop_assert_eq!(&rows, b"before", "a declined record leaves no row");
                return Ok(());
            };
            let by_event = match decoder.decode(3, record, buffer, append_time) {
                Decoded::Filtered { event_time } => format!("filtered {event_time}"),
                Decoded::Valid { event, .. } => {
                    let mut rows = Vec::new();
                    let row = project.project(&event, &mut rows);
                    described(row, &rows, 0)
                }
                other => format!("not a row: {}", outcome(other)),
            };
            let located = match located {
                Projected::Filtered(event_time) => format!("filtered {event_time}"),
                Projected::Row(row) => described(row, &rows, b"before".len()),
            };
            prop_assert_eq!(located, by_event);
        }
    }

    #[test]
    fn a_bid_takes_the_located_path_and_its_row_is_the_event_paths() {
        let (decoder, mut project) = projection(PROJECTIONS[0]);
        let batch = batch_of(0, 0, Some(b"k"), br#"{"user_id":"u-1","pad":[1,{"a":"\n"}],"event_type":"caf\u00e9","amount":12.50,"n":-7,"event_time":"2026-01-01T00:00:00.000Z"}"#.to_vec());
        let at = 1_767_225_600_000;
        let mut rows = Vec::new();
        let Some(Projected::Row(row)) =
            project.project_located(&decoder, &only_record(&batch), at, &mut rows)
        else {
            panic!("not made from the located fields");
        };
        let (key, value) = row.texts(&rows, &mut 0);
        assert_eq!(
            std::str::from_utf8(value).unwrap(),
            r#"{"amount":12.5,"event_time":"2026-01-01T00:00:00.000Z","event_type":"café","n":-7,"user_id":"u-1"}"#
        );
        assert_eq!((key, row.event_time), (Some(&b"k"[..]), at));
    }

    /// A projected row as its event time, key and value, read from `rows`
    /// at `at`, which it must fill to their end as UTF-8 text.
    fn described(row: ProjectedRow, rows: &[u8], mut at: usize) -> String {
        let (key, value) = row.texts(rows, &mut at);
        assert_eq!(at, rows.len(), "the row fills the rows to their end");
        let text = |bytes: &[u8]| std::str::from_utf8(bytes).expect("UTF-8").to_string();
        format!("{} {:?} {:?}", row.event_time, key.map(text), text(value))
    }

    #[test]
    fn a_seed_event_takes_the_filter_first_path() {
        let decoder = decoder(VIEWS[0]);
        let batch = |event_type: &str| {
            batch_of(0, 0, None, format!(
            r#"{{"event_id":"1-0","user_id":"user-38","event_type":"{event_type}","amount":13.05,"event_time":"2026-01-01T00:00:00.000Z"}}"#
        ).into_bytes())
        };
        let (cart, purchase) = (batch("cart"), batch("purchase"));
        let at = 1_767_225_600_000;
        let mut fields = LocatedFields::default();
        assert_eq!(
            decoder.locate(&only_record(&cart), at, &mut fields),
            Some(Early::Filtered(at))
        );
        assert_eq!(
            decoder.locate(&only_record(&purchase), at, &mut fields),
            Some(Early::Passed(at))
        );
    }
}
