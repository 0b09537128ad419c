//! `kappa demo`: the walkthrough in one command. It starts the server in
//! this process (like `kappa serve`), defines the `user_events` stream, the
//! `purchase_stats` table and the `high_value_alerts` stream over HTTP to
//! itself (the same path as `POST /v1/statements`), produces seeded
//! purchase events at a steady rate, and prints the commands that watch the
//! view change, query it, replace its definition and follow the rebuild.
//!
//! The first stdout line is `listening on ADDR`, as for `kappa serve`, so
//! scripts and tests find the bound address. SIGINT/SIGTERM stop the
//! generator and shut the server down cleanly; a temporary data directory
//! (the default) is removed after the log is closed.

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::sync::watch;

use super::http::{ApiError, Client};
use crate::config::ServerConfig;

pub use kappa_processor::sql::brief::{HIGH_VALUE_ALERTS, PURCHASE_STATS, USER_EVENTS};

/// The replacement the guide suggests: the same table over 1-minute windows.
const PURCHASE_STATS_1_MINUTE: &str = "CREATE OR REPLACE TABLE purchase_stats AS \
SELECT user_id, WINDOWSTART as window_start, WINDOWEND as window_end, \
COUNT(*) as purchase_count, SUM(amount) as total_amount, AVG(amount) as avg_amount \
FROM user_events WINDOW TUMBLING (SIZE 1 MINUTE) WHERE event_type = 'purchase' \
GROUP BY user_id EMIT CHANGES;";

/// Most events per second `--rate` accepts.
pub const MAX_RATE: f64 = 10_000.0;
/// Distinct users of the generator.
const USERS: u64 = 20;
/// How often the generator produces a batch.
const TICK: Duration = Duration::from_millis(100);
/// How often the generator prints what it produced.
const REPORT_EVERY: Duration = Duration::from_secs(30);
/// Partitions of the demo's topics.
const PARTITIONS: u32 = 3;

/// Arguments of `kappa demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Address to listen on (port 0: any free port), as for `kappa serve`.
    // `--addr`, the first spelling, still works (hidden).
    #[arg(long, alias = "addr", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Events per second produced to `user_events`.
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// Keep the data in this directory (a later demo on it continues);
    /// by default a temporary directory, removed when the demo stops.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Seed of the event generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Writes a line to stdout, ignoring a closed stdout (`kappa demo | head`).
fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// Runs the demo until `signal` completes.
pub async fn run(args: DemoArgs, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
    if !(args.rate > 0.0 && args.rate <= MAX_RATE) {
        bail!("--rate must be above 0 and at most {MAX_RATE} events per second");
    }
    let (data_dir, temporary) = match &args.data_dir {
        Some(dir) => (dir.clone(), false),
        None => (temporary_dir()?, true),
    };
    let config = ServerConfig {
        data_dir: data_dir.clone(),
        listen: args.listen,
        default_partitions: PARTITIONS,
        ..ServerConfig::default()
    };
    config.validate()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let address = listener.local_addr()?;
    // The first stdout line, as `kappa serve` prints it: scripts read it.
    say(&format!("listening on {address}"));
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    let driver = {
        let (stop_tx, stop_rx) = (stop_tx.clone(), stop_rx.clone());
        let args = args.clone();
        let data_dir = data_dir.clone();
        thread::Builder::new()
            .name("kappa-demo".into())
            .spawn(move || {
                let result = match drive(address, &args, &data_dir, temporary, &stop_rx) {
                    // Stopped while setting up: not a failure.
                    Err(_) if *stop_rx.borrow() => Ok(()),
                    result => result,
                };
                if result.is_err() {
                    // A demo that cannot set itself up stops the server too.
                    stop_tx.send_replace(true);
                }
                result
            })?
    };
    let shutdown = {
        let stop_tx = stop_tx.clone();
        async move {
            tokio::select! {
                _ = signal => {}
                _ = stop_rx.wait_for(|stop| *stop) => {}
            }
            stop_tx.send_replace(true);
        }
    };
    let served = crate::run(config, listener, shutdown).await;
    stop_tx.send_replace(true);
    let driven = driver
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the demo's generator panicked")));
    if temporary {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    served?;
    driven
}

/// A new directory under the system's temporary directory.
fn temporary_dir() -> anyhow::Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("kappa-demo-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Defines the demo's streams and table, prints the guide, then produces
/// events until `stop` turns true.
fn drive(
    address: SocketAddr,
    args: &DemoArgs,
    data_dir: &std::path::Path,
    temporary: bool,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let client = Client::new(&format!("http://{address}"));
    // The listener is bound: this waits (in the backlog) until the log and
    // the views are open and the server accepts.
    client
        .get("/health", &[])
        .context("the demo server did not start")?;
    for statement in [USER_EVENTS, PURCHASE_STATS, HIGH_VALUE_ALERTS] {
        define(&client, statement)?;
    }
    say(&guide(address, args, data_dir, temporary));
    let mut generator = Generator::new(args.seed);
    let started = Instant::now();
    let mut produced: u64 = 0;
    let mut last_report = Instant::now();
    while !*stop.borrow() {
        let due = (started.elapsed().as_secs_f64() * args.rate) as u64;
        let batch = due.saturating_sub(produced).min(10_000);
        if batch > 0 {
            let records: Vec<Value> = (0..batch).map(|_| generator.next_record()).collect();
            match client.post_json(
                "/v1/topics/user_events/records",
                &json!({ "records": records }),
            ) {
                Ok(_) => produced += batch,
                Err(_) if *stop.borrow() => break,
                Err(e) => {
                    eprintln!("demo: producing failed, retrying: {e:#}");
                    // Skip this batch rather than bursting after an outage.
                    produced = due;
                }
            }
        }
        if last_report.elapsed() >= REPORT_EVERY {
            last_report = Instant::now();
            say(&format!(
                "demo: {} events produced ({} purchases, {} over 100000)",
                generator.events, generator.purchases, generator.high_value
            ));
        }
        thread::sleep(TICK);
    }
    Ok(())
}

/// Runs one statement; a view that exists already (a reused data
/// directory) is kept.
fn define(client: &Client, statement: &str) -> anyhow::Result<()> {
    match client.post("/v1/statements", "application/sql", statement, &[]) {
        Ok(_) => Ok(()),
        Err(e)
            if e.downcast_ref::<ApiError>()
                .is_some_and(|a| a.code == "already_exists") =>
        {
            Ok(())
        }
        Err(e) => Err(e.context(format!("running {statement}"))),
    }
}

/// What to try once the demo runs.
fn guide(
    address: SocketAddr,
    args: &DemoArgs,
    data_dir: &std::path::Path,
    temporary: bool,
) -> String {
    let url = format!("http://{address}");
    let kappa = if url == "http://127.0.0.1:8080" {
        "kappa".to_string()
    } else {
        format!("kappa --url {url}")
    };
    let data = if temporary {
        format!(
            "{} (removed at exit; keep data with --data-dir)",
            data_dir.display()
        )
    } else {
        data_dir.display().to_string()
    };
    format!(
        "\
Kappa demo on {url}, data in {data}.
Defined through POST /v1/statements:
  stream user_events        user_id, event_type, amount, event_time (topic user_events, {PARTITIONS} partitions)
  table  purchase_stats     purchases per user per 5-minute window: count, total, average
  stream high_value_alerts  purchases over 100000, appended to topic high_value_alerts
Producing ~{rate} events/s for users user-1..user-{USERS} (seed {seed}); Ctrl-C stops the demo.
(`kappa` below is this binary: `cargo run --release --` from the repository.)

Watch the view change and query it:
  {kappa} views
  {kappa} views purchase_stats
  {kappa} query purchase_stats user-1
  {kappa} sql -e \"SELECT * FROM purchase_stats WHERE user_id = 'user-1';\"
  {kappa} tail high_value_alerts
  curl -s '{url}/v1/views/purchase_stats/rows?key=user-1'
  curl -N {url}/v1/views/purchase_stats/changes      # every row change, as it commits

Replace the definition (1-minute windows): version 2 builds from the start of the log
while version 1 keeps answering, then takes over:
  {kappa} sql -e \"{PURCHASE_STATS_1_MINUTE}\"
  {kappa} views purchase_stats
  curl -s -XPOST {url}/v1/statements -H 'content-type: application/sql' --data-binary \"{PURCHASE_STATS_1_MINUTE}\"

Rebuild from the start of the log and follow the build to the swap:
  {kappa} replay purchase_stats --from earliest
  curl -s -XPOST {url}/v1/views/purchase_stats/replay -H 'content-type: application/json' -d '{{\"from\":\"earliest\"}}'
",
        rate = args.rate,
        seed = args.seed,
    )
}

/// Seeded purchase events that fit `user_events`: users skewed toward
/// user-1, 70% views, 20% cart additions, 10% purchases; prices
/// log-normal around 40; 2% of purchases are high value (over 100000).
pub struct Generator {
    state: u64,
    /// Events made.
    pub events: u64,
    /// Purchases made.
    pub purchases: u64,
    /// Purchases over 100000 made.
    pub high_value: u64,
}

impl Generator {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Generator {
            state: seed,
            events: 0,
            purchases: 0,
            high_value: 0,
        }
    }

    /// SplitMix64.
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next event as a produce record, stamped now.
    pub fn next_record(&mut self) -> Value {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.next_event(now)
    }

    /// The next event as a produce record with event time `now_ms`.
    pub fn next_event(&mut self, now_ms: i64) -> Value {
        // Squaring a uniform number skews the choice toward user-1.
        let u = self.unit();
        let user = format!("user-{}", (u * u * USERS as f64) as u64 + 1);
        let roll = self.unit();
        let event_type = match roll {
            r if r < 0.7 => "view",
            r if r < 0.9 => "cart",
            _ => "purchase",
        };
        // Box-Muller: a standard normal number from two uniform ones.
        let (u1, u2) = (1.0 - self.unit(), self.unit());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let mut amount = (40f64.ln() + 1.1 * z).exp().clamp(0.5, 20_000.0);
        if event_type == "purchase" {
            self.purchases += 1;
            if self.unit() < 0.02 {
                amount = 100_000.01 + self.unit() * 900_000.0;
                self.high_value += 1;
            }
        }
        let amount = (amount * 100.0).round() / 100.0;
        let product = self.next_u64() % 500;
        self.events += 1;
        json!({
            "key": user,
            "timestamp": now_ms,
            "value": {
                "user_id": user, "event_type": event_type, "product_id": format!("p-{product}"),
                "amount": amount, "event_time": now_ms,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_seeded_and_fits_user_events() {
        let mut a = Generator::new(7);
        let mut b = Generator::new(7);
        let events: Vec<Value> = (0..2000).map(|i| a.next_event(i)).collect();
        let again: Vec<Value> = (0..2000).map(|i| b.next_event(i)).collect();
        assert_eq!(events, again);
        let purchases = events
            .iter()
            .filter(|e| e["value"]["event_type"] == "purchase")
            .count();
        assert!((100..300).contains(&purchases), "{purchases}");
        assert_eq!(a.purchases as usize, purchases);
        for e in &events {
            let v = &e["value"];
            assert_eq!(e["key"], v["user_id"]);
            let amount = v["amount"].as_f64().unwrap();
            let high = amount > 100_000.0;
            assert!(!high || v["event_type"] == "purchase", "{e}");
            assert!(amount > 0.0 && amount < 1_000_000.01, "{e}");
        }
        assert!(events.iter().any(|e| e["key"] == "user-1"));
    }

    #[test]
    fn guide_names_the_address() {
        let args = DemoArgs {
            listen: "127.0.0.1:0".parse().unwrap(),
            rate: 50.0,
            data_dir: None,
            seed: 42,
        };
        let text = guide(
            "127.0.0.1:9999".parse().unwrap(),
            &args,
            std::path::Path::new("/tmp/d"),
            true,
        );
        assert!(text.contains("kappa --url http://127.0.0.1:9999 query purchase_stats user-1"));
        assert!(text.contains("SIZE 1 MINUTE"));
    }
}
