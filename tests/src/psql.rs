//! Debian's `psql` (`postgresql-client`) against the real binary's
//! PostgreSQL listener.

use std::process::Command;

use crate::Server;

/// `psql` output of `sql` (a `\` command or queries) against `server`'s
/// PostgreSQL listener (unaligned, `|`-separated, tuples only), with
/// `password` if given; `Err` with stderr if psql failed (each error
/// with its SQLSTATE).
pub fn psql(server: &Server, password: Option<&str>, sql: &str) -> Result<String, String> {
    let addr = server.pg_addr();
    let mut cmd = Command::new("psql");
    cmd.args([
        "-X",
        "-A",
        "-t",
        "-F",
        "|",
        "-v",
        "ON_ERROR_STOP=1",
        // Errors name their SQLSTATE: `ERROR:  42P01: ..`.
        "-v",
        "VERBOSITY=verbose",
        "-h",
        &addr.ip().to_string(),
        "-p",
        &addr.port().to_string(),
        "-U",
        "kappa",
        "-d",
        "kappa",
        "-c",
        sql,
    ]);
    cmd.env("PGCONNECT_TIMEOUT", "10")
        .env("PGSSLMODE", "disable");
    match password {
        Some(p) => cmd.env("PGPASSWORD", p),
        None => cmd.env_remove("PGPASSWORD"),
    };
    let out = cmd
        .output()
        .expect("running psql (Debian's postgresql-client)");
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}
