//! The most common pull query — `SELECT * | col, .. FROM view WHERE
//! column = 'text'`, what dashboards and services send per request — read
//! without the general tokenizer and parser: a scan of the text builds the
//! few syntax-tree nodes the general parser would, and the same code as
//! for any pull query ([`super::pull`]) makes the [`PullQuery`] of them.
//! Tokenizing and parsing were ~10% of a point lookup's CPU over
//! PostgreSQL (BENCHMARKS.md).
//!
//! The scan alone ([`key_lookup_names`]) tells the PostgreSQL frontend's
//! catalog check which names such a text holds, without building anything.
//!
//! Anything else — another shape, a quoted or keyword name, a string with
//! a quote or backslash, a comment — is left to the general parser
//! (`None`), as is a text the shared code refuses, so errors keep their
//! positions. A test compares both parsers on every text the scan takes.

use sqlparser::ast::{self, Ident, SelectItem, ValueWithSpan};
use sqlparser::keywords::ALL_KEYWORDS;
use sqlparser::tokenizer::{Location, Span};

use super::lex;
use super::pull::{self, PullQuery};

/// The words of a key lookup's text, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLookupNames<'a> {
    /// The selected columns (`None`: `*`).
    pub columns: Option<Vec<&'a str>>,
    /// The view.
    pub view: &'a str,
    /// The column compared.
    pub column: &'a str,
    /// The string it is compared with (no quotes).
    pub value: &'a str,
}

impl<'a> KeyLookupNames<'a> {
    /// Every name it holds: the view, the selected columns, the column
    /// compared.
    pub fn names(&self) -> impl Iterator<Item = &'a str> + '_ {
        std::iter::once(self.view)
            .chain(self.columns.iter().flatten().copied())
            .chain(std::iter::once(self.column))
    }
}

/// The words of `text` when it is `SELECT * | a, b, .. FROM v WHERE c =
/// 'text' [;]` with plain names (letters, digits, `_`; none a SQL
/// keyword), in any case and spacing; `None` for any other text. A scan
/// only: nothing is built.
pub fn key_lookup_names(text: &str) -> Option<KeyLookupNames<'_>> {
    let mut s = Scan { rest: text };
    s.keyword("SELECT")?;
    let columns = if s.symbol('*') {
        None
    } else {
        let mut names = vec![s.name()?];
        while s.symbol(',') {
            names.push(s.name()?);
        }
        Some(names)
    };
    s.keyword("FROM")?;
    let view = s.name()?;
    s.keyword("WHERE")?;
    let column = s.name()?;
    if !s.symbol('=') {
        return None;
    }
    let value = s.string()?;
    s.symbol(';');
    if !s.rest.trim_start().is_empty() {
        return None;
    }
    Some(KeyLookupNames {
        columns,
        view,
        column,
        value,
    })
}

/// The pull query of `text` when [`key_lookup_names`] takes it (and the
/// shared code does not refuse it); `None` for any other text.
pub fn key_lookup(text: &str) -> Option<PullQuery> {
    let lookup = key_lookup_names(text)?;
    let projection = match &lookup.columns {
        None => vec![SelectItem::Wildcard(Default::default())],
        Some(columns) => columns
            .iter()
            .map(|c| SelectItem::UnnamedExpr(ast::Expr::Identifier(Ident::new(*c))))
            .collect(),
    };
    let condition = ast::Expr::BinaryOp {
        left: Box::new(ast::Expr::Identifier(Ident::new(lookup.column))),
        op: ast::BinaryOperator::Eq,
        right: Box::new(ast::Expr::Value(ValueWithSpan {
            value: ast::Value::SingleQuotedString(lookup.value.to_string()),
            span: Span::empty(),
        })),
    };
    let view = lex::normalize(lookup.view, false);
    pull::select(view, &projection, Some(&condition), Location::new(1, 1)).ok()
}

/// What is left of the text.
struct Scan<'a> {
    rest: &'a str,
}

impl<'a> Scan<'a> {
    /// A plain word (letters, digits, `_`, not starting with a digit).
    fn word(&mut self) -> Option<&'a str> {
        self.rest = self.rest.trim_start();
        let len = self
            .rest
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'_'))
            .unwrap_or(self.rest.len());
        let (word, rest) = self.rest.split_at(len);
        if word.is_empty() || word.as_bytes()[0].is_ascii_digit() {
            return None;
        }
        self.rest = rest;
        Some(word)
    }

    /// The keyword `kw` (any case).
    fn keyword(&mut self, kw: &str) -> Option<()> {
        self.word().filter(|w| w.eq_ignore_ascii_case(kw)).map(drop)
    }

    /// An unquoted name that is no SQL keyword.
    fn name(&mut self) -> Option<&'a str> {
        let word = self.word()?;
        let upper = word.to_ascii_uppercase();
        if ALL_KEYWORDS.binary_search(&upper.as_str()).is_ok() {
            return None;
        }
        Some(word)
    }

    /// The one-character symbol `c`, if next.
    fn symbol(&mut self, c: char) -> bool {
        self.rest = self.rest.trim_start();
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// A `'..'` string holding no quote, backslash or line break.
    fn string(&mut self) -> Option<&'a str> {
        if !self.symbol('\'') {
            return None;
        }
        let end = self.rest.find('\'')?;
        let (value, rest) = self.rest.split_at(end);
        if value.contains(['\\', '\n', '\r']) {
            return None;
        }
        self.rest = &rest[1..];
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sql::{parse, Statement};

    /// The general parser's pull query of `text`.
    fn general(text: &str) -> Option<PullQuery> {
        match parse(text).ok()?.as_slice() {
            [Statement::Select(q)] => Some(q.clone()),
            _ => None,
        }
    }

    /// Where the scan takes `text`, its query is the general parser's.
    fn agrees(text: &str) -> bool {
        match key_lookup(text) {
            Some(fast) => {
                assert_eq!(Some(&fast), general(text).as_ref(), "{text:?}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn common_lookups_are_taken_and_agree_with_the_parser() {
        for text in [
            "SELECT * FROM kv_latest WHERE k = 'k17'",
            "select * from Purchase_Stats where user_id = 'u1';",
            "  SELECT\n*\tFROM v WHERE k='' ; ",
            "SELECT a, b_2 FROM v WHERE a = 'x y é'",
            "SELECT * FROM v WHERE WINDOWSTART = '2026-01-01T00:00:00Z'",
            "SELECT * FROM v WHERE n = '5'",
        ] {
            assert!(agrees(text), "not taken: {text:?}");
        }
    }

    #[test]
    fn other_texts_are_left_to_the_parser() {
        for text in [
            "SELECT * FROM v WHERE k = 'it''s'",
            "SELECT * FROM v WHERE k = 'a\\b'",
            "SELECT * FROM \"V\" WHERE k = 'x'",
            "SELECT * FROM v WHERE k = 'x' LIMIT 1",
            "SELECT * FROM v WHERE k = 'x' -- comment",
            "SELECT * FROM v WHERE k = 5",
            "SELECT * FROM v WHERE k = 'x'; SELECT 1",
            "SELECT * FROM select WHERE k = 'x'",
            "SELECT * FROM v WHERE value = 'x'",
            "SELECT COUNT(*) FROM v WHERE k = 'x'",
            "SELECT * FROM 1v WHERE k = 'x'",
            "SELECT * FROM v WHERE k = 'x",
        ] {
            assert!(key_lookup(text).is_none(), "taken: {text:?}");
        }
    }

    proptest! {
        #[test]
        fn every_taken_text_agrees_with_the_parser(
            select in "(?i:select)",
            columns in prop::option::of(prop::collection::vec("[a-zA-Z_][a-zA-Z0-9_]{0,6}", 1..4)),
            view in "[a-zA-Z_][a-zA-Z0-9_]{0,8}",
            column in "[a-zA-Z_][a-zA-Z0-9_]{0,8}",
            value in "[^'\\\\]{0,12}",
            gap in "[ \t\n]{1,3}",
            end in "( ?;)?[ \n]*",
        ) {
            let columns = columns.map_or("*".to_string(), |c| c.join(", "));
            let text = format!("{select}{gap}{columns}{gap}FROM{gap}{view} where {column}{gap}={gap}'{value}'{end}");
            agrees(&text);
        }
    }
}
