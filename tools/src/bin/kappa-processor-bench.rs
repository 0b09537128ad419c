//! `kappa-processor-bench`: end-to-end throughput of `kappa-processor`
//! (`generate`, `run`, `suite`). The work is in
//! [`kappa_tools::processor_bench`].
//!
//! ```text
//! cargo run --release -p kappa-tools --bin kappa-processor-bench -- suite --dir /var/tmp/kpb
//! ```

fn main() -> anyhow::Result<()> {
    kappa_tools::processor_bench::main()
}
