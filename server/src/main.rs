//! The `kappa` binary: parses arguments and calls the library — `serve`
//! runs the server, `demo` runs one with a demo workload, the other
//! subcommands are clients of a running server.
//!
//! The client options (`--url`, `--token`, `--ca-cert`) belong to the
//! client subcommands only: [`command_line`] puts them on each of those
//! (global there, so `kappa topics list --url X` works) and on `kappa`
//! itself, not global, for `kappa --url X topics list`. A value given on
//! the command line wins over the environment and the default, and one
//! given after the subcommand over one given before it (clap merges
//! arguments of the same id along the subcommand chain by source).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use kappa_server::cli::http::ClientOptions;
use kappa_server::cli::ClientCommand;
use kappa_server::config::{LogFormat, Overrides, ServerConfig};

/// mimalloc rather than glibc's malloc: statements allocate many small
/// short-lived values (BENCHMARKS.md, "PostgreSQL listener").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Kappa: an event log and stream processor in one binary.
#[derive(Parser)]
#[command(name = "kappa", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: the log, the processors and the HTTP API.
    Serve {
        /// TOML config file; flags and KAPPA_* variables override it.
        #[arg(long, env = "KAPPA_CONFIG")]
        config: Option<PathBuf>,
        #[command(flatten)]
        overrides: Box<Overrides>,
    },
    /// Run a server with a demo: the user_events stream, the purchase_stats
    /// table, the high_value_alerts stream and a purchases generator.
    Demo(kappa_server::cli::demo::DemoArgs),
    #[command(flatten)]
    Client(ClientCommand),
}

/// Logs to stderr at `default_level` unless `RUST_LOG` says otherwise;
/// coloured only on a terminal and without `NO_COLOR` (no-color.org).
fn init_tracing(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_level.into());
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal() && !no_color)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

fn serve(config_file: Option<PathBuf>, overrides: Overrides) -> anyhow::Result<()> {
    let config = ServerConfig::load(config_file.as_deref(), &overrides)?;
    init_tracing(config.log_format, "info");
    if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
        // Fail before the `listening on` line, not after opening the log;
        // the server loads the files again when it starts serving.
        kappa_server::tls::Tls::load(cert, key)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let address = listener.local_addr()?;
        let listeners = kappa_server::Listeners::bind(&config).await?;
        tracing::info!(%address, data_dir = %config.data_dir.display(), "kappa serving");
        // The one line on stdout: tools and tests read the bound address here
        // (then the Kafka listener's and the PostgreSQL listener's, each on
        // a line of its own when it is on).
        println!("listening on {address}");
        if let Some(kafka) = &listeners.kafka {
            println!("kafka listening on {}", kafka.local_addr()?);
        }
        if let Some(pg) = &listeners.pg {
            println!("pg listening on {}", pg.local_addr()?);
        }
        kappa_server::run_listening(config, listener, listeners, shutdown_signal()).await
    })
}

fn demo(args: kappa_server::cli::demo::DemoArgs) -> anyhow::Result<()> {
    // The demo's guide is on stdout: only warnings go to stderr.
    init_tracing(LogFormat::Text, "warn");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(kappa_server::cli::demo::run(args, shutdown_signal()))
}

/// The client options' arguments, as [`ClientOptions`] defines them.
fn client_option_args() -> Vec<clap::Arg> {
    ClientOptions::augment_args(clap::Command::new("client"))
        .get_arguments()
        .cloned()
        .collect()
}

/// The command line: [`Cli`] with the client options on `kappa` (not
/// global: they must not reach `serve` and `demo`) and on every client
/// subcommand (global: they reach its subcommands).
fn command_line() -> clap::Command {
    let options = client_option_args();
    let clients: Vec<String> = ClientCommand::augment_subcommands(clap::Command::new("client"))
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let mut command = Cli::command().args(options.iter().map(|o| o.clone().global(false)));
    for name in clients {
        command = command.mut_subcommand(name, |sub| sub.args(options.iter().cloned()));
    }
    command
}

/// The client options as the innermost subcommand of `matches` sees them.
fn client_options(matches: &ArgMatches) -> Result<ClientOptions, clap::Error> {
    let mut leaf = matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    ClientOptions::from_arg_matches(leaf)
}

/// A client subcommand piped into a reader that stops early (`kappa views
/// --json | head`) ends quietly, as Unix tools do, instead of failing with
/// "Broken pipe": SIGPIPE gets its default action again. Only for the
/// client subcommands — the server must see EPIPE as an error on one
/// connection, not die of it.
fn quiet_on_closed_pipe() {
    // SAFETY: resetting a signal's disposition to the default before any
    // thread is started has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Opts this process out of transparent huge pages, unless
/// `MIMALLOC_ALLOW_THP` says what to do (mimalloc then applies it).
///
/// With THP set to `always`, as many distributions ship it, every page
/// mimalloc hands a thread for the first time faults in a whole 2 MiB
/// page that the kernel zeroes first: a new statement's threads spent
/// 40–55% of their time in the kernel's `clear_page_erms` (Nexmark q3 and
/// q8, BENCHMARKS.md), and q3 ran 1.75× faster without. Redis, MongoDB and
/// TiKV advise the same for their processes. Only this process is
/// affected (`PR_SET_THP_DISABLE`), and its children.
fn opt_out_of_transparent_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and only
    // sets a flag on this process's memory map; a failure changes nothing.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

// mimalloc's `mi_option_set` (its C API: the `mimalloc` crate links the
// library but does not expose its options).
extern "C" {
    /// Sets mimalloc option `option` to `value`.
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// `mi_option_purge_delay` of mimalloc's `mi_option_t` (the same in its
/// v2, which the `mimalloc` crate builds, and v3).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Has mimalloc give memory freed back to the OS 1 s after it is freed
/// instead of 10 ms, unless `MIMALLOC_PURGE_DELAY` says otherwise (mimalloc
/// then applies it) — mimalloc v3's default.
///
/// A version's threads free and allocate buffers and window slices
/// continuously: purged after 10 ms, their pages were often given back
/// and faulted in again (zeroed by the kernel) a moment later. Nexmark q5
/// on two workers ran 0.70 against 0.63 M events/s (BENCHMARKS.md). The
/// cost is memory freed in a burst staying with the process a second
/// longer (ten for mimalloc's arenas).
fn purge_freed_memory_after_a_second() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mi_option_set takes plain integers and sets an option that
    // mimalloc reads when it next purges; any value is valid.
    unsafe {
        mi_option_set(MI_OPTION_PURGE_DELAY, 1_000);
    }
}

fn main() {
    opt_out_of_transparent_huge_pages();
    purge_freed_memory_after_a_second();
    let mut command = command_line();
    let matches = command.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let server_side = match &cli.command {
        Command::Serve { .. } => Some("serve"),
        Command::Demo(_) => Some("demo"),
        Command::Client(_) => None,
    };
    if let Some(name) = server_side {
        let given = client_option_args().into_iter().find(|arg| {
            matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine)
        });
        if let Some(arg) = given {
            let flag = format!("--{}", arg.get_long().unwrap_or_default());
            command
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!("{flag} is an option of the client subcommands, not of `kappa {name}`"),
                )
                .exit();
        }
    }
    let result = match cli.command {
        Command::Serve { config, overrides } => serve(config, *overrides),
        Command::Demo(args) => demo(args),
        Command::Client(client) => {
            quiet_on_closed_pipe();
            client_options(&matches)
                .map_err(anyhow::Error::from)
                .and_then(|options| kappa_server::cli::run(&options, client))
        }
    };
    if let Err(e) = result {
        if e.downcast_ref::<kappa_server::cli::Reported>().is_none() {
            eprintln!("{e:#}");
        }
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_is_consistent() {
        command_line().debug_assert();
    }

    #[test]
    fn client_options_stay_off_serve_and_demo() {
        let mut command = command_line();
        command.build();
        for name in ["serve", "demo"] {
            let sub = command.find_subcommand(name).unwrap();
            assert!(sub.get_arguments().all(|a| a.get_id() != "url"), "{name}");
        }
        let list = command
            .find_subcommand("topics")
            .and_then(|t| t.find_subcommand("list"))
            .unwrap();
        assert!(list.get_arguments().any(|a| a.get_id() == "url"));
    }

    #[test]
    fn client_options_before_and_after_the_subcommand() {
        let url = |args: &[&str]| {
            let matches = command_line().try_get_matches_from(args).unwrap();
            client_options(&matches).unwrap().url
        };
        assert_eq!(url(&["kappa", "--url", "a", "topics", "list"]), "a");
        assert_eq!(url(&["kappa", "topics", "--url", "b", "list"]), "b");
        assert_eq!(url(&["kappa", "topics", "list", "--server", "c"]), "c");
        assert_eq!(
            url(&["kappa", "--url", "a", "groups", "list", "--url", "d"]),
            "d"
        );
    }
}
