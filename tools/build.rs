//! The same link settings as the `kappa` binary (compressed line tables in
//! release builds): see `server/build.rs`.

#[path = "../server/build.rs"]
mod server_build;

fn main() {
    server_build::main();
}
