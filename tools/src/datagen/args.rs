//! The command line of `kappa-datagen` and the loop that drives a
//! [`Generator`] into an output at the requested pace.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::ProgressBar;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use super::output::{self, LineFormat, Producer};
use super::{nexmark, Config, Generator, StreamKind, TimeFormat, DEFAULT_START_TIME_MS};
use crate::bench::progress;

/// Event-time rate when `--rate` is 0 and `--event-rate` is not given.
pub const DEFAULT_EVENT_RATE: f64 = 1000.0;
/// With `--rate`, a partial produce batch is sent after this long.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// Deterministic, realistic event streams: NDJSON to stdout or a file, or
/// straight into a running kappa server.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "kappa-datagen", version, about)]
pub struct DatagenArgs {
    /// The stream to generate.
    #[arg(value_enum)]
    pub stream: StreamKind,
    /// PRNG seed: the same seed and options give byte-identical output.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of events to emit (duplicates included) [default: 1000 unless --duration].
    #[arg(long)]
    pub count: Option<u64>,
    /// Span of event time to cover, e.g. `90s`, `15m`, `2h`, `500ms` (plain number = seconds).
    #[arg(long, value_parser = parse_duration_ms)]
    pub duration: Option<u64>,
    /// Emit at most this many events per second of wall time; 0 = as fast as possible.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Mean events per second of event time [default: --rate, or when --rate is 0: 1000, nexmark 10000].
    #[arg(long)]
    pub event_rate: Option<f64>,
    /// Distinct entities (users or devices).
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// Zipf exponent of the entity choice; 0 = uniform.
    #[arg(long, default_value_t = 1.0)]
    pub skew: f64,
    /// Largest delay, in ms, of an on-time event behind the newest one (0 = in order).
    #[arg(long, default_value_t = 0)]
    pub out_of_order: u64,
    /// Fraction of events that arrive late (more than --lateness behind the newest).
    #[arg(long, default_value_t = 0.0)]
    pub late_fraction: f64,
    /// How far behind, in ms, a late event is at least.
    #[arg(long, default_value_t = 60_000)]
    pub lateness: u64,
    /// Fraction of events that re-emit an earlier event with the same event_id.
    #[arg(long, default_value_t = 0.0)]
    pub duplicate_fraction: f64,
    /// purchases: fraction of purchases with an amount over 100000.
    #[arg(long, default_value_t = 0.001)]
    pub high_value_fraction: f64,
    /// clicks: least gap, in ms of event time, between two sessions of a user.
    #[arg(long, default_value_t = 30_000)]
    pub session_gap: u64,
    /// Event time of the first event: RFC 3339 or ms since the epoch [default: 2026-01-01T00:00:00Z].
    #[arg(long, conflicts_with = "now")]
    pub start_time: Option<String>,
    /// Start event time at the wall clock (output is then not reproducible).
    #[arg(long)]
    pub now: bool,
    /// How event_time is written in the JSON value.
    #[arg(long, value_enum, default_value_t = TimeFormat::Rfc3339)]
    pub time_format: TimeFormat,
    /// Write lines as {"key","value","timestamp"} (postable as NDJSON) instead of bare values.
    #[arg(long, conflicts_with = "produce")]
    pub envelope: bool,
    /// Write to this file instead of stdout.
    #[arg(long, conflicts_with = "produce")]
    pub out: Option<PathBuf>,
    /// nexmark: write DIR/person.ndjson, DIR/auction.ndjson and DIR/bid.ndjson (DIR is created).
    #[arg(long, value_name = "DIR", conflicts_with = "produce")]
    pub out_dir: Option<PathBuf>,
    /// Produce to a running server at this URL (e.g. http://127.0.0.1:8080); needs --topic (nexmark: none).
    #[arg(long)]
    pub produce: Option<String>,
    /// Bearer token for a server with `auth = "tokens"` (needs produce on
    /// the topic, and admin if the topic must be created with --partitions).
    #[arg(long, env = "KAPPA_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Topic to produce to (created if missing).
    #[arg(long, requires = "produce")]
    pub topic: Option<String>,
    /// Partitions of the topic if it is created [default: the server's].
    #[arg(long, requires = "produce")]
    pub partitions: Option<u32>,
    /// nexmark: prefix of the topics person, auction and bid [default: none].
    #[arg(long, requires = "produce")]
    pub topic_prefix: Option<String>,
    /// Records per produce request.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Ids of the flags given on the command line (filled by
    /// [`DatagenArgs::parse_from_cli`]; nexmark refuses the other streams' flags).
    #[arg(skip)]
    pub given: Vec<String>,
}

/// Parses `500ms`, `90s`, `15m`, `2h`, `1d` or a plain number of seconds.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s, 15m, 2h"))?;
    let scale = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("unknown unit {unit:?} in {s:?} (ms, s, m, h, d)")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// Parses `--start-time`: ms since the epoch or an RFC 3339 time.
pub fn parse_start_time(s: &str) -> anyhow::Result<i64> {
    if let Ok(ms) = s.trim().parse::<i64>() {
        return Ok(ms);
    }
    kappa_processor::expr::parse_timestamp(&serde_json::Value::String(s.to_owned()))
        .with_context(|| format!("--start-time {s:?} is neither ms since the epoch nor RFC 3339"))
}

impl DatagenArgs {
    /// Parses a command line (`argv[0]` first), remembering which flags it
    /// gave in [`DatagenArgs::given`].
    pub fn parse_from_cli<I, T>(argv: I) -> Result<DatagenArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = DatagenArgs::command().try_get_matches_from(argv)?;
        let mut args = DatagenArgs::from_arg_matches(&matches)?;
        args.given = matches
            .ids()
            .filter(|id| matches.value_source(id.as_str()) == Some(ValueSource::CommandLine))
            .map(|id| id.as_str().to_owned())
            .collect();
        Ok(args)
    }

    /// Event time of the first event: `--start-time`, `--now` or the default.
    pub fn start_time_ms(&self) -> anyhow::Result<i64> {
        Ok(match (&self.start_time, self.now) {
            (Some(s), _) => parse_start_time(s)?,
            (None, true) => kappa_log::now_ms(),
            (None, false) => DEFAULT_START_TIME_MS,
        })
    }

    /// The generator configuration these arguments describe.
    pub fn config(&self) -> anyhow::Result<Config> {
        if !(self.rate.is_finite() && self.rate >= 0.0) {
            bail!("--rate must be >= 0, got {}", self.rate);
        }
        let start_time_ms = self.start_time_ms()?;
        let events_per_second = self.event_rate.unwrap_or(if self.rate > 0.0 {
            self.rate
        } else {
            DEFAULT_EVENT_RATE
        });
        let count = match (self.count, self.duration) {
            (None, None) => Some(1000),
            (count, _) => count,
        };
        let config = Config {
            stream: self.stream,
            seed: self.seed,
            count,
            duration_ms: self.duration,
            events_per_second,
            keys: self.keys,
            skew: self.skew,
            out_of_order_ms: self.out_of_order,
            late_fraction: self.late_fraction,
            lateness_ms: self.lateness,
            duplicate_fraction: self.duplicate_fraction,
            high_value_fraction: self.high_value_fraction,
            session_gap_ms: self.session_gap,
            start_time_ms,
            time_format: self.time_format,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Where the events go.
enum Sink {
    Lines(Box<dyn Write>, LineFormat),
    Produce(Producer),
}

/// Generates and delivers the events; returns how many were emitted.
pub fn run(args: &DatagenArgs) -> anyhow::Result<u64> {
    if args.stream == StreamKind::Nexmark {
        return nexmark::run::run(args);
    }
    if args.out_dir.is_some() || args.topic_prefix.is_some() {
        bail!("--out-dir and --topic-prefix are for nexmark; use --out and --topic");
    }
    let config = args.config()?;
    let time_format = config.time_format;
    let line = if args.envelope {
        LineFormat::Envelope
    } else {
        LineFormat::Value
    };
    let (mut sink, show_progress) = match (&args.produce, &args.out) {
        (Some(url), _) => {
            let topic = args.topic.as_deref().context("--produce needs --topic")?;
            let producer = Producer::new(url, topic, time_format, args.batch)?
                .with_token(args.token.as_deref());
            if producer.ensure_topic(args.partitions)? {
                eprintln!("kappa-datagen: created topic {topic:?}");
            }
            (Sink::Produce(producer), true)
        }
        (None, Some(path)) => {
            let file =
                File::create(path).with_context(|| format!("creating {}", path.display()))?;
            (Sink::Lines(Box::new(BufWriter::new(file)), line), true)
        }
        (None, None) => {
            let stdout = BufWriter::new(std::io::stdout().lock());
            (Sink::Lines(Box::new(stdout), line), false)
        }
    };
    let bar = (show_progress && std::io::stderr().is_terminal()).then(|| match config.count {
        Some(n) => progress::count_bar("datagen".into(), n, "events"),
        None => ProgressBar::new_spinner(),
    });
    let generator = Generator::new(config)?;
    let started = Instant::now();
    let mut last_flush = Instant::now();
    let mut emitted = 0u64;
    for event in generator {
        if args.rate > 0.0 {
            let due = started + Duration::from_secs_f64(emitted as f64 / args.rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        match &mut sink {
            Sink::Lines(out, line) => output::write_line(out.as_mut(), &event, time_format, *line)?,
            Sink::Produce(p) => {
                p.send(&event)?;
                if args.rate > 0.0 && last_flush.elapsed() >= FLUSH_INTERVAL {
                    p.flush()?;
                    last_flush = Instant::now();
                }
            }
        }
        emitted += 1;
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    match &mut sink {
        Sink::Lines(out, _) => out.flush()?,
        Sink::Produce(p) => p.flush()?,
    }
    if let Some(bar) = bar {
        bar.finish();
    }
    Ok(emitted)
}
