//! `kappa-datagen nexmark`: which flags apply, and where the three kinds
//! of event go: three NDJSON files (`--out-dir`), three topics
//! (`--produce`), or one stream of tagged objects on stdout
//! (`{"person":{..}}`, `{"auction":{..}}`, `{"bid":{..}}`).
//!
//! Records (envelope lines and produced records) are keyed by the person's
//! id, the auction's id and the bid's auction, as decimal strings, with
//! `date_time` as their timestamp.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::ProgressBar;
use serde::Serialize;

use super::{EventValue, Kind, Nexmark, NexmarkConfig, NexmarkEvent, DEFAULT_EVENT_RATE};
use crate::bench::progress;
use crate::datagen::args::DatagenArgs;
use crate::datagen::output::{LineFormat, Producer, MAX_TIMESTAMP_MS};
use crate::datagen::TimeFormat;

/// With `--rate`, partial produce batches are sent after this long.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// Flags of the other streams that nexmark refuses when given (clap ids),
/// each with a hint.
const OTHER_STREAMS_FLAGS: [(&str, &str); 9] = [
    ("keys", "ids follow the Nexmark model"),
    ("skew", "hot ids follow the Nexmark model"),
    ("out_of_order", "events come in event-time order"),
    ("late_fraction", "events come in event-time order"),
    ("lateness", "events come in event-time order"),
    ("duplicate_fraction", "no event is repeated"),
    ("high_value_fraction", "it is for purchases"),
    ("session_gap", "it is for clicks"),
    (
        "time_format",
        "date_time and expires are always ms since the epoch",
    ),
];

/// The produce record or envelope line of an event.
#[derive(Debug, Serialize)]
pub struct NexmarkRecord<'a> {
    /// Person id, auction id, or the bid's auction id.
    pub key: String,
    /// The event's fields.
    pub value: EventValue<'a>,
    /// `date_time` (left out when the server would reject it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
}

/// The record of `event`.
pub fn record(event: &NexmarkEvent) -> NexmarkRecord<'_> {
    let time = event.date_time();
    NexmarkRecord {
        key: event.key().to_string(),
        value: event.value(),
        timestamp: (0..=MAX_TIMESTAMP_MS).contains(&time).then_some(time),
    }
}

/// Writes `event` as one NDJSON line: its bare value or its envelope.
pub fn write_line(
    out: &mut dyn Write,
    event: &NexmarkEvent,
    line: LineFormat,
) -> std::io::Result<()> {
    match line {
        LineFormat::Value => serde_json::to_writer(&mut *out, &event.value())?,
        LineFormat::Envelope => serde_json::to_writer(&mut *out, &record(event))?,
    }
    out.write_all(b"\n")
}

/// Fails, naming the flag, if a flag that does not apply to nexmark was given.
pub fn check_flags(args: &DatagenArgs) -> anyhow::Result<()> {
    for (id, hint) in OTHER_STREAMS_FLAGS {
        if args.given.iter().any(|g| g == id) {
            bail!(
                "--{} does not apply to nexmark ({hint})",
                id.replace('_', "-")
            );
        }
    }
    if args.out.is_some() {
        bail!("nexmark writes three files: give --out-dir DIR instead of --out");
    }
    if args.topic.is_some() {
        bail!("nexmark produces to the topics person, auction and bid: give --topic-prefix instead of --topic");
    }
    if args.envelope && args.out_dir.is_none() {
        bail!("--envelope needs --out-dir for nexmark (stdout mixes the three kinds as tagged objects)");
    }
    Ok(())
}

/// The generator configuration the arguments describe.
pub fn config(args: &DatagenArgs) -> anyhow::Result<NexmarkConfig> {
    check_flags(args)?;
    if !(args.rate.is_finite() && args.rate >= 0.0) {
        bail!("--rate must be >= 0, got {}", args.rate);
    }
    let events_per_second = args.event_rate.unwrap_or(if args.rate > 0.0 {
        args.rate
    } else {
        DEFAULT_EVENT_RATE
    });
    let config = NexmarkConfig {
        seed: args.seed,
        count: match (args.count, args.duration) {
            (None, None) => Some(1000),
            (count, _) => count,
        },
        duration_ms: args.duration,
        events_per_second,
        start_time_ms: args.start_time_ms()?,
    };
    config.validate()?;
    Ok(config)
}

/// Where the events go.
enum Sink {
    /// One writer per kind, in [`Kind::ALL`] order.
    Files(Vec<Box<dyn Write>>, LineFormat),
    /// Tagged objects of all kinds on one writer.
    Tagged(Box<dyn Write>),
    /// One producer per kind, in [`Kind::ALL`] order.
    Produce(Vec<Producer>),
}

impl Sink {
    fn open(args: &DatagenArgs) -> anyhow::Result<Sink> {
        if let Some(url) = &args.produce {
            let prefix = args.topic_prefix.as_deref().unwrap_or("");
            let mut producers = Vec::new();
            for kind in Kind::ALL {
                let topic = format!("{prefix}{}", kind.name());
                let producer = Producer::new(url, &topic, TimeFormat::EpochMs, args.batch)?
                    .with_token(args.token.as_deref());
                if producer.ensure_topic(args.partitions)? {
                    eprintln!("kappa-datagen: created topic {topic:?}");
                }
                producers.push(producer);
            }
            return Ok(Sink::Produce(producers));
        }
        let Some(dir) = &args.out_dir else {
            return Ok(Sink::Tagged(Box::new(BufWriter::new(
                std::io::stdout().lock(),
            ))));
        };
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut files: Vec<Box<dyn Write>> = Vec::new();
        for kind in Kind::ALL {
            let path = dir.join(format!("{}.ndjson", kind.name()));
            let file =
                File::create(&path).with_context(|| format!("creating {}", path.display()))?;
            files.push(Box::new(BufWriter::new(file)));
        }
        let line = if args.envelope {
            LineFormat::Envelope
        } else {
            LineFormat::Value
        };
        Ok(Sink::Files(files, line))
    }

    fn send(&mut self, event: &NexmarkEvent) -> anyhow::Result<()> {
        let i = event.kind().index();
        match self {
            Sink::Files(files, line) => write_line(files[i].as_mut(), event, *line)?,
            Sink::Tagged(out) => {
                serde_json::to_writer(&mut *out, event)?;
                out.write_all(b"\n")?;
            }
            Sink::Produce(producers) => producers[i].send_json(&record(event))?,
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        match self {
            Sink::Files(files, _) => files.iter_mut().try_for_each(|f| f.flush())?,
            Sink::Tagged(out) => out.flush()?,
            Sink::Produce(producers) => producers.iter_mut().try_for_each(Producer::flush)?,
        }
        Ok(())
    }
}

/// Generates and delivers the Nexmark events; returns how many were emitted.
pub fn run(args: &DatagenArgs) -> anyhow::Result<u64> {
    let config = config(args)?;
    let mut sink = Sink::open(args)?;
    let show_progress = !matches!(sink, Sink::Tagged(_)) && std::io::stderr().is_terminal();
    let bar = show_progress.then(|| match config.count {
        Some(n) => progress::count_bar("nexmark".into(), n, "events"),
        None => ProgressBar::new_spinner(),
    });
    let started = Instant::now();
    let mut last_flush = Instant::now();
    let mut emitted = 0u64;
    for event in Nexmark::new(config)? {
        if args.rate > 0.0 {
            let due = started + Duration::from_secs_f64(emitted as f64 / args.rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        sink.send(&event)?;
        if args.rate > 0.0
            && matches!(sink, Sink::Produce(_))
            && last_flush.elapsed() >= FLUSH_INTERVAL
        {
            sink.flush()?;
            last_flush = Instant::now();
        }
        emitted += 1;
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    sink.flush()?;
    if let Some(bar) = bar {
        bar.finish();
    }
    Ok(emitted)
}
