//! Turning an input record into an [`Event`]: decode the value (only the
//! fields the plan reads, when it names them), check declared field types,
//! take the event time, and judge it against the record's append time.
//!
//! Pure per record, so source workers ([`crate::parallel`]) run it in
//! parallel; the single-threaded runtime calls it inline.

use std::sync::Arc;

use kappa_log::Record;
use serde_json::Value;

use crate::event::Event;
use crate::expr::DataType;
use crate::plan::{EventTime, Plan};
use crate::time::parse_timestamp;

/// What a record decodes to.
#[derive(Debug)]
pub(crate) enum Decoded {
    /// Not JSON, a declared field of another type, or no usable event
    /// time: counted as invalid and skipped.
    Invalid,
    /// An event time later than the append time plus `MAX_FUTURE`:
    /// invalid, and sent to the late topic if there is one.
    Future(Event),
    /// An event to process.
    Valid(Event),
}

/// Decodes a plan's input records; cheap to clone (one per source worker).
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    /// The top-level fields the plan reads (`None`: decode whole values).
    used_fields: Option<Arc<[String]>>,
    typed_fields: Arc<[(String, DataType)]>,
    event_time: EventTime,
    max_future_ms: i64,
}

impl Decoder {
    /// The decoder of `plan`'s source.
    pub(crate) fn new(plan: &Plan) -> Decoder {
        Decoder {
            used_fields: plan.used_fields().map(Arc::from),
            typed_fields: Arc::from(plan.source.typed_fields.clone()),
            event_time: plan.source.event_time.clone(),
            max_future_ms: plan.source.max_future_ms,
        }
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

    /// Decodes `record` of input `partition`, appended at `append_time`.
    pub(crate) fn decode(&self, partition: u32, record: Record, append_time: i64) -> Decoded {
        let decoded = match &self.used_fields {
            Some(names) => crate::event::decode_fields(&record.value, names)
                .map(|values| (Value::Null, Some((names.clone(), values)))),
            None => serde_json::from_slice(&record.value).map(|v| (v, None)),
        };
        let Ok((value, fields)) = decoded else {
            return Decoded::Invalid;
        };
        let mut event = Event {
            partition,
            offset: record.offset,
            record_timestamp: record.timestamp,
            lossy_key: Event::lossy_key_of(record.key.as_deref()),
            raw_key: record.key,
            raw_value: record.value,
            value,
            fields,
            event_time: record.timestamp,
            joined: None,
        };
        for (name, ty) in self.typed_fields.iter() {
            let value = crate::expr::Row::field(&event, std::slice::from_ref(name));
            if value.is_some_and(|v| !crate::expr::conforms(v, *ty)) {
                return Decoded::Invalid;
            }
        }
        if let EventTime::Field(path) = &self.event_time {
            match crate::expr::Row::field(&event, path).and_then(parse_timestamp) {
                Some(t) => event.event_time = t,
                None => return Decoded::Invalid,
            }
        }
        if event.event_time > append_time.saturating_add(self.max_future_ms) {
            return Decoded::Future(event);
        }
        Decoded::Valid(event)
    }
}
