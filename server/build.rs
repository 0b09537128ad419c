//! Release binaries carry their line tables (readable backtraces of Kappa's
//! own code) compressed: `ld --compress-debug-sections=zlib` shrinks the
//! `kappa` binary by about 20 MB, and std's backtraces read compressed
//! sections. Debug builds link as they are (faster).
//! `tools/build.rs` runs this file's `main` too.

/// Asks the linker to compress release binaries' debug sections.
pub fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
}
