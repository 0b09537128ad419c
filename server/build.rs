// Release binaries carry their line tables (readable backtraces of Kappa's
// own code) compressed: `ld --compress-debug-sections=zlib` shrinks the
// `kappa` binary by about 20 MB, and std's backtraces read compressed
// sections. Debug builds link as they are (faster).
// `tools/build.rs` includes this file.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
}
