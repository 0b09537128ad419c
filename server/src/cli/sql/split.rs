//! Splits SQL text into statements at `;` outside string literals, quoted
//! identifiers and comments, so the shell can run each statement as soon as
//! it is complete and map a server error's position back to the text typed.
//!
//! Invariant: spans index the text given, in bytes, on `char` boundaries; a
//! statement span starts at its first non-blank character (a comment counts)
//! and ends after its `;`. Spans holding only blanks and comments are dropped.

/// Where a statement sits in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset after the last character (after the `;` when complete).
    pub end: usize,
}

/// The statements of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Statements ended by `;`, in order.
    pub complete: Vec<Span>,
    /// Where the complete statements end: the unfinished text starts here.
    pub consumed: usize,
    /// The text after the last `;`, if it holds more than blanks and comments.
    pub rest: Option<Span>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    /// Inside a literal or quoted identifier closed by this character
    /// (doubled inside, it stands for itself).
    Quoted(char),
    LineComment,
    BlockComment,
}

/// Splits `text` into statements.
pub fn split(text: &str) -> Split {
    let mut complete = Vec::new();
    let mut consumed = 0;
    let mut start: Option<usize> = None;
    let mut content = false;
    let mut state = State::Normal;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        match state {
            State::Normal => {
                if !c.is_whitespace() && start.is_none() {
                    start = Some(i);
                }
                match (c, next) {
                    ('-', Some('-')) => {
                        chars.next();
                        state = State::LineComment;
                    }
                    ('/', Some('*')) => {
                        chars.next();
                        state = State::BlockComment;
                    }
                    ('\'' | '"' | '`', _) => {
                        content = true;
                        state = State::Quoted(c);
                    }
                    (';', _) => {
                        let end = i + 1;
                        if content {
                            complete.push(Span {
                                start: start.unwrap_or(i),
                                end,
                            });
                        }
                        consumed = end;
                        start = None;
                        content = false;
                    }
                    _ if !c.is_whitespace() => content = true,
                    _ => {}
                }
            }
            State::Quoted(q) if c == q => {
                if next == Some(q) {
                    chars.next();
                } else {
                    state = State::Normal;
                }
            }
            State::Quoted(_) => {}
            State::LineComment if c == '\n' => state = State::Normal,
            State::LineComment => {}
            State::BlockComment if c == '*' && next == Some('/') => {
                chars.next();
                state = State::Normal;
            }
            State::BlockComment => {}
        }
    }
    let rest = match start {
        Some(start) if content => Some(Span {
            start,
            end: text.len(),
        }),
        _ => None,
    };
    Split {
        complete,
        consumed,
        rest,
    }
}

/// The 1-based `(line, column)` of byte offset `at` in `text`, the column
/// counted in characters (as the server counts).
pub fn position(text: &str, at: usize) -> (u64, u64) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() as u64 + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() as u64 + 1;
    (line, column)
}

/// Maps a position `(line, column)` inside a statement that starts at
/// `(start_line, start_column)` of a larger text to a position of that text.
pub fn shift(start: (u64, u64), inner: (u64, u64)) -> (u64, u64) {
    let (line, column) = (inner.0.max(1), inner.1.max(1));
    if line == 1 {
        (start.0, start.1 + column - 1)
    } else {
        (start.0 + line - 1, column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> (Vec<&str>, Option<&str>) {
        let split = split(text);
        let complete = split
            .complete
            .iter()
            .map(|s| &text[s.start..s.end])
            .collect();
        (complete, split.rest.map(|s| &text[s.start..s.end]))
    }

    #[test]
    fn splits_at_semicolons_outside_quotes_and_comments() {
        let text = "SHOW TABLES;\n  SELECT 'a;b', \"c;\", `d;` FROM x -- e;\n WHERE y = 'it''s;';  /* f; */ DROP";
        let (complete, rest) = texts(text);
        assert_eq!(
            complete,
            vec![
                "SHOW TABLES;",
                "SELECT 'a;b', \"c;\", `d;` FROM x -- e;\n WHERE y = 'it''s;';"
            ]
        );
        assert_eq!(rest, Some("/* f; */ DROP"));
    }

    #[test]
    fn blank_and_comment_only_pieces_are_dropped() {
        let (complete, rest) = texts(" ;; -- only a comment;\n /* and; another */ ");
        assert!(complete.is_empty());
        assert_eq!(rest, None);
        let split = split("SHOW TABLES; -- done\n");
        assert_eq!(split.consumed, 12);
        assert_eq!(split.rest, None);
    }

    #[test]
    fn unfinished_quotes_keep_the_statement_open() {
        let (complete, rest) = texts("SELECT 'a;\nb';");
        assert_eq!(complete, vec!["SELECT 'a;\nb';"]);
        assert_eq!(rest, None);
        let (complete, rest) = texts("SELECT 'a;");
        assert!(complete.is_empty());
        assert_eq!(rest, Some("SELECT 'a;"));
    }

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "ab\nçd;\n  x";
        assert_eq!(position(text, 0), (1, 1));
        assert_eq!(position(text, 3), (2, 1));
        assert_eq!(position(text, 5), (2, 2)); // after the two-byte ç
        assert_eq!(position(text, text.len()), (3, 4));
        assert_eq!(shift((3, 5), (1, 2)), (3, 6));
        assert_eq!(shift((3, 5), (2, 7)), (4, 7));
    }
}
