//! Harness of the end-to-end tests: every test in `tests/tests/*.rs` starts
//! the real `kappa` binary and talks to it over HTTP. One module per part,
//! all re-exported here (tests use `kappa_tests::…`):
//!
//! - `build.rs`: [`kappa_bin`] finds `target/<profile>/kappa` next to the running test
//!   executable, and builds it (once per test process) when it is missing or
//!   older than the sources of `server/`, `log/` and `processor/`;
//!   [`workspace_bin`] does the same for any binary of the workspace
//!   ([`inspect_bin`]: `kappa-inspect`).
//! - `server.rs`: [`Server`] runs one `kappa serve` on a fresh (or given) data directory
//!   and a port chosen by the OS, learns the address from the one line the
//!   server prints on stdout, and stops it with SIGTERM, SIGINT or SIGKILL
//!   (always by the child's own PID). Dropping it kills a child that is
//!   still running; if the test is panicking, the server's stderr is printed.
//!   [`refused_start`] runs one that must refuse its data directory.
//! - `client.rs`: [`Client`] is a small blocking HTTP client (ureq) whose helpers answer
//!   `(status, json)` and never panic on 4xx/5xx, plus asserting helpers
//!   for topics, SQL statements and view reads ([`after_param`] builds a
//!   read-your-writes `after=`).
//! - `raw_http.rs`: [`RawConnection`] sends bytes exactly as given, for request targets a
//!   URL library would normalize (`/v1/topics/../records`, `%2e%2e`).
//! - `util.rs`: [`now_ms`], the seeded [`Rng`], [`temp_file`].
//! - `python.rs`: [`python`], the venv interpreter of the Kafka client
//!   scripts in `tests/kafka/`, and [`kafka_script`], their paths.
//! - `kcat.rs`: [`kcat`] and [`kcat_output`] run the kcat client.
//! - `node.rs`: [`kafkajs_modules`], where Node.js finds the KafkaJS
//!   client of `tests/kafka/kafkajs_roundtrip.js`.
//! - `brief.rs`: the brief's SQL statements; `events.rs`: events of its
//!   `user_events` stream as the view scenarios produce them.
//!
//! Nothing here sleeps to synchronize: the server start waits for the
//! stdout line, process exits are awaited through a pidfd, and every wait
//! is bounded in time. [`eventually`] polls, for tests that wait on state
//! the server only shows when asked (bounded too).

pub mod brief;
mod build;
mod client;
pub mod events;
mod kafka_clients;
mod kcat;
pub mod marks;
mod moto;
mod node;
mod psql;
mod python;
mod raw_http;
mod server;
mod tansu;
mod util;

use std::time::Duration;

pub use serde_json::{json, Value};

pub use build::{
    datagen_bin, inspect_bin, kappa_bin, run_cli, workspace_bin, workspace_root, TOOLS_SOURCES,
};
pub use client::{
    after_param, assert_error, assert_error_of, eventually, produced_of, user_event, Client,
    Produced, Reply,
};
pub use kafka_clients::{produce_records, read_committed, read_committed_records};
pub use kcat::{kcat, kcat_output, sasl_args};
pub use moto::Moto;
pub use node::kafkajs_modules;
pub use psql::psql;
pub use python::{kafka_script, python, run_python};
pub use raw_http::{chunked, raw_request, request_bytes, RawConnection, RawResponse};
pub use server::{refused_start, Server};
pub use tansu::{free_port, Tansu};
pub use util::{now_ms, run_for_json, temp_file, Rng};

/// Longest wait for a started server to print its address.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for a signalled server to exit.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Read timeout of HTTP clients (above the longest long-poll, 30 s).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(60);
