//! `kappa-bench`: an HTTP load generator and benchmark reporter for a running
//! kappa server, talking only to its public HTTP API (docs/http-api.md).
//!
//! Module map:
//!
//! * [`keys`]: deterministic key choice (uniform or Zipf) from a seed.
//! * [`body`]: NDJSON produce bodies of a given value size, pre-built in a pool.
//! * [`stats`]: HDR latency summaries and median/min/max over runs.
//! * [`report`]: the JSON result file, the Markdown table, `--compare` math.
//! * [`http`]: one keep-alive HTTP/1.1 connection per task, and topic admin.
//! * [`views`]: SQL statements, view descriptions, replay, drop.
//! * [`load`]: loading a topic with an exact number of records (unmeasured).
//! * [`progress`]: the live progress bar on stderr.
//! * [`summary`]: the BENCHMARKS.md summary of a `tools/bench.sh` results directory.
//! * The scenarios: [`produce`], [`consume`], [`replay`] (re-read through a
//!   consumer group reset), [`e2e`] (produce → visible in a view),
//!   [`rebuild`] (a view replayed from earliest) and [`build`] (the seed's
//!   view built from a topic loaded from an NDJSON file; issue 14), and
//!   over the Kafka wire protocol ([`kafka`]), [`kafka_produce`] and
//!   [`kafka_consume`] (issue 17).

pub mod body;
pub mod build;
pub mod consume;
pub mod e2e;
pub mod http;
pub mod kafka;
pub mod kafka_consume;
pub mod kafka_produce;
pub mod keys;
pub mod load;
pub mod produce;
pub mod progress;
pub mod rebuild;
pub mod replay;
pub mod report;
pub mod stats;
pub mod summary;
pub mod views;
