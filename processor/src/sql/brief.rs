//! The product brief's three statements — the `user_events` stream, the
//! `purchase_stats` table and the `high_value_alerts` stream — as the demo
//! runs them and the SQL tests parse them. Their one copy is `brief.sql`
//! beside this file; each constant is one statement of it, cut out at
//! compile time.
//!
//! The end-to-end tests crate compiles this file in by path
//! (`tests/src/brief.rs`), so it uses nothing from this crate.

/// The whole of `brief.sql`: a comment, then the three statements in order.
pub const SQL: &str = include_str!("brief.sql");

/// The `user_events` stream over topic `user_events`.
pub const USER_EVENTS: &str = statement(SQL, 0);

/// Purchases per user per 5-minute window.
pub const PURCHASE_STATS: &str = statement(SQL, 1);

/// Purchases over 100000, as a derived stream.
pub const HIGH_VALUE_ALERTS: &str = statement(SQL, 2);

/// Statement `n` (0-based) of `sql`: from its first character after
/// whitespace and `--` comment lines up to and including its `;`. The
/// statements hold no `;` of their own. A statement that is not there
/// fails the build.
const fn statement(sql: &'static str, n: usize) -> &'static str {
    let b = sql.as_bytes();
    let mut i = 0;
    let mut k = 0;
    loop {
        // Whitespace and comment lines before the statement.
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i + 1 < b.len() && b[i] == b'-' && b[i + 1] == b'-' {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            } else {
                break;
            }
        }
        let start = i;
        while i < b.len() && b[i] != b';' {
            i += 1;
        }
        assert!(i < b.len(), "brief.sql has fewer statements than asked for");
        i += 1;
        if k == n {
            let (_, rest) = b.split_at(start);
            let (text, _) = rest.split_at(i - start);
            match std::str::from_utf8(text) {
                Ok(text) => return text,
                Err(_) => panic!("brief.sql is not UTF-8"),
            }
        }
        k += 1;
    }
}
