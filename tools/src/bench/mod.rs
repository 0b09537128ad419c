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
//! * [`progress`]: the live progress bar on stderr.
//! * [`produce`] and [`consume`]: the two scenarios.

pub mod body;
pub mod consume;
pub mod http;
pub mod keys;
pub mod produce;
pub mod progress;
pub mod report;
pub mod stats;
