//! Tokens with positions: the whole input is tokenized once with
//! `sqlparser`'s tokenizer (1-based line and column per token, columns in
//! characters), comments and whitespace dropped, and split into statements
//! at top-level `;`. [`Cursor`] walks one statement's tokens for the
//! hand-written parts of the grammar.

use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Tokenizer, Word};

use super::error::{Result, SqlError};
use super::limits;

/// The dialect: generic SQL, identifiers quoted with `"` or backticks.
pub(crate) static DIALECT: GenericDialect = GenericDialect {};

/// Longest statement text accepted, a limit on parser work per request.
pub(crate) const MAX_SQL_BYTES: usize = 1 << 20;

/// One statement: its significant tokens and where its text lies.
#[derive(Debug, Clone)]
pub(crate) struct StatementTokens {
    /// Tokens without whitespace, comments and the trailing `;`.
    pub tokens: Vec<TokenWithSpan>,
    /// The statement's text (first to last token, inclusive).
    pub text: String,
    /// Where its first token starts.
    pub start: Location,
    /// Just after its last token: where "end of statement" errors point.
    pub end: Location,
}

/// Tokenizes `sql` and splits it into non-empty statements.
pub(crate) fn split(sql: &str) -> Result<Vec<StatementTokens>> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(SqlError::new(
            format!("SQL text is longer than {MAX_SQL_BYTES} bytes"),
            1,
            1,
        ));
    }
    let tokens = Tokenizer::new(&DIALECT, sql)
        .tokenize_with_location()
        .map_err(|e| SqlError::at(e.location, lower_first(&e.message)))?;
    let lines = LineIndex::new(sql);
    let mut out = Vec::new();
    let mut current: Vec<TokenWithSpan> = Vec::new();
    let mut flush = |current: &mut Vec<TokenWithSpan>| {
        if let (Some(first), Some(last)) = (current.first(), current.last()) {
            let (start, end) = (first.span.start, last.span.end);
            out.push(StatementTokens {
                text: lines.slice(sql, start, end).to_string(),
                tokens: std::mem::take(current),
                start,
                end,
            });
        }
    };
    for t in tokens {
        match t.token {
            Token::Whitespace(_) => {}
            Token::SemiColon => flush(&mut current),
            _ => {
                current.push(t);
                if current.len() > limits::MAX_STATEMENT_TOKENS {
                    return Err(limits::too_many_tokens(current[0].span.start));
                }
            }
        }
    }
    flush(&mut current);
    Ok(out)
}

/// Maps 1-based (line, column-in-characters) locations to byte offsets.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(s: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(s.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    fn offset(&self, s: &str, loc: Location) -> usize {
        let line = (loc.line.max(1) - 1) as usize;
        let Some(&start) = self.starts.get(line) else {
            return s.len();
        };
        let rest = &s[start..];
        rest.char_indices()
            .nth((loc.column.max(1) - 1) as usize)
            .map_or(s.len(), |(i, _)| start + i)
    }

    fn slice<'a>(&self, s: &'a str, from: Location, to: Location) -> &'a str {
        let (a, b) = (self.offset(s, from), self.offset(s, to));
        s.get(a..b.max(a)).unwrap_or("")
    }
}

/// "Expected: x" → "expected: x" (messages read as one sentence after the
/// position prefix).
pub(crate) fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// How a token reads in an error message.
pub(crate) fn describe(t: Option<&TokenWithSpan>) -> String {
    match t.map(|t| &t.token) {
        None | Some(Token::EOF) => "end of statement".into(),
        Some(Token::Word(w)) if w.quote_style.is_some() => format!("identifier {w}"),
        Some(Token::Word(w)) => format!("'{}'", w.value),
        Some(Token::SingleQuotedString(s)) => format!("string '{s}'"),
        Some(Token::Number(n, _)) => format!("number {n}"),
        Some(other) => format!("'{other}'"),
    }
}

/// An identifier: its text, whether it was quoted, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Name {
    /// The text as written (without quotes).
    pub value: String,
    /// It was quoted (exact spelling matters).
    pub quoted: bool,
    /// Where it is.
    pub span: Span,
}

impl Name {
    /// The object-name form: lower-cased unless quoted.
    pub fn normalized(&self) -> String {
        normalize(&self.value, self.quoted)
    }
}

/// Object names are case-insensitive unless quoted: unquoted ones are
/// stored lower-cased.
pub(crate) fn normalize(value: &str, quoted: bool) -> String {
    if quoted {
        value.to_string()
    } else {
        value.to_lowercase()
    }
}

/// A cursor over one statement's tokens.
pub(crate) struct Cursor<'a> {
    tokens: &'a [TokenWithSpan],
    pos: usize,
    end: Location,
}

impl<'a> Cursor<'a> {
    /// A cursor at the first of `tokens`; `end` is where the text ends.
    pub fn new(tokens: &'a [TokenWithSpan], end: Location) -> Self {
        Cursor {
            tokens,
            pos: 0,
            end,
        }
    }

    /// The index of the next token.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The tokens not consumed yet.
    pub fn rest(&self) -> &'a [TokenWithSpan] {
        &self.tokens[self.pos.min(self.tokens.len())..]
    }

    /// The next token, if any.
    pub fn peek(&self) -> Option<&'a TokenWithSpan> {
        self.tokens.get(self.pos)
    }

    /// Consumes and returns the next token.
    pub fn next_token(&mut self) -> Option<&'a TokenWithSpan> {
        let t = self.tokens.get(self.pos);
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// True when every token is consumed.
    pub fn at_end(&self) -> bool {
        self.pos >= self.tokens.len()
    }

    /// Where the next token starts (or the end of the statement).
    pub fn here(&self) -> Location {
        self.peek().map_or(self.end, |t| t.span.start)
    }

    /// "expected `what`, found <next token>" at the next token.
    pub fn expected(&self, what: &str) -> SqlError {
        SqlError::at(
            self.here(),
            format!("expected {what}, found {}", describe(self.peek())),
        )
    }

    /// True if the next token is the unquoted keyword `kw` (any case).
    pub fn is_kw(&self, kw: &str) -> bool {
        is_kw(self.peek(), kw)
    }

    /// Consumes the keyword `kw` if it is next.
    pub fn eat_kw(&mut self, kw: &str) -> bool {
        let yes = self.is_kw(kw);
        if yes {
            self.pos += 1;
        }
        yes
    }

    /// Consumes the keyword `kw` or fails with "expected `what`".
    pub fn expect_kw(&mut self, kw: &str, what: &str) -> Result<Span> {
        match self.peek() {
            Some(t) if is_kw(Some(t), kw) => {
                self.pos += 1;
                Ok(t.span)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Consumes `token` if it is next.
    pub fn eat(&mut self, token: &Token) -> bool {
        let yes = self.peek().is_some_and(|t| &t.token == token);
        if yes {
            self.pos += 1;
        }
        yes
    }

    /// Consumes `token` or fails with "expected `what`".
    pub fn expect(&mut self, token: &Token, what: &str) -> Result<Span> {
        match self.peek() {
            Some(t) if &t.token == token => {
                self.pos += 1;
                Ok(t.span)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Consumes an identifier (quoted or not).
    pub fn name(&mut self, what: &str) -> Result<Name> {
        match self.peek() {
            Some(TokenWithSpan {
                token:
                    Token::Word(Word {
                        value, quote_style, ..
                    }),
                span,
            }) => {
                self.pos += 1;
                Ok(Name {
                    value: value.clone(),
                    quoted: quote_style.is_some(),
                    span: *span,
                })
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Fails unless every token is consumed.
    pub fn expect_end(&self, what: &str) -> Result<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }
}

/// True if `t` is the unquoted keyword `kw` (any case).
pub(crate) fn is_kw(t: Option<&TokenWithSpan>, kw: &str) -> bool {
    matches!(t, Some(TokenWithSpan { token: Token::Word(w), .. })
        if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw))
}
