//! `kappa-log-bench`: throughput of the `kappa-log` storage engine (append
//! per fsync policy, the raw disk, sequential read). The work is in
//! [`kappa_tools::log_bench`].
//!
//! ```text
//! cargo run --release -p kappa-tools --bin kappa-log-bench -- [--quick] [--dir DIR] ...
//! ```

fn main() -> anyhow::Result<()> {
    kappa_tools::log_bench::main()
}
