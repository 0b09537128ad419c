//! Error positions written into test SQL: `¦` marks where an error must
//! point. Shared by the SQL error tests here and, compiled in by path, by
//! the end-to-end SQL error tests (`tests/src/marks.rs`): one copy.

/// The marker character.
pub const MARK: char = '¦';

/// The text without [`MARK`], and the 1-based line and column (in
/// characters) of the mark.
pub fn marked(sql: &str) -> (String, u64, u64) {
    let (mut line, mut column) = (1, 1);
    for ch in sql.chars() {
        if ch == MARK {
            return (sql.replace(MARK, ""), line, column);
        }
        if ch == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    panic!("no marker in {sql}");
}
