//! [`SqlError`]: what went wrong and where (1-based line and column).

use std::fmt;

use sqlparser::tokenizer::{Location, Span};

/// A parse or planning error at a position of the SQL text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    /// What was expected or what is wrong, e.g. `expected GROUP BY column,
    /// found 'x'` or `unknown stream 'x'`.
    pub message: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column (in characters).
    pub column: u64,
}

impl SqlError {
    /// An error at `line`/`column` (clamped to at least 1).
    pub fn new(message: impl Into<String>, line: u64, column: u64) -> Self {
        SqlError {
            message: message.into(),
            line: line.max(1),
            column: column.max(1),
        }
    }

    /// An error at a location.
    pub(crate) fn at(loc: Location, message: impl Into<String>) -> Self {
        SqlError::new(message, loc.line, loc.column)
    }

    /// An error at the start of a span.
    pub(crate) fn span(span: Span, message: impl Into<String>) -> Self {
        SqlError::at(span.start, message)
    }

    /// Moves an error found in a statement's own text (which starts at
    /// line 1, column 1) to where that statement starts in a larger text.
    pub(crate) fn shifted(mut self, line: u64, column: u64) -> Self {
        if self.line == 1 {
            self.column += column.saturating_sub(1);
        }
        self.line += line.saturating_sub(1);
        self
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for SqlError {}

/// Shorthand for results of this module.
pub(crate) type Result<T> = std::result::Result<T, SqlError>;
