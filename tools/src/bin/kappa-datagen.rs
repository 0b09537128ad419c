//! `kappa-datagen`: deterministic, realistic event streams (`purchases`,
//! `clicks`, `iot`, and Nexmark's persons, auctions and bids) as NDJSON on
//! stdout, to files, or produced straight into a running kappa server. See
//! tools/README.md and `kappa_tools::datagen`.

use std::io::ErrorKind;

use kappa_tools::datagen::args::{self, DatagenArgs};

fn main() {
    let cli = DatagenArgs::parse_from_cli(std::env::args_os()).unwrap_or_else(|e| e.exit());
    if let Err(e) = args::run(&cli) {
        // A closed pipe (`| head`) is a normal way to stop reading.
        let broken_pipe = e.chain().any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
        });
        if broken_pipe {
            return;
        }
        eprintln!("kappa-datagen: {e:#}");
        std::process::exit(1);
    }
}
