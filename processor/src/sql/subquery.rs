//! A query over another query's rows: `SELECT .. FROM (SELECT ..) [AS] q
//! ..` or `WITH q AS (SELECT ..) SELECT .. FROM q ..`, cut apart at the
//! token level so that each query keeps its own ksqlDB clauses (`WINDOW`,
//! `WITHIN`, `EMIT`) — `sqlparser` knows none of them — and every position
//! stays that of the original text.
//!
//! One level: the inner query is one `SELECT` reading a stream, and the
//! outer reads it by name in its `FROM`. The outer query then refers to the
//! inner one by that name, as to a table of its output columns.

use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Word};

use super::error::{Result, SqlError};
use super::lex::{is_kw, Name};

/// The inner query, cut out of the outer one.
#[derive(Debug, Clone)]
pub(crate) struct Subquery {
    /// The name the outer query reads it by (the alias or the CTE's name).
    pub name: Name,
    /// Its tokens, from `SELECT` on.
    pub tokens: Vec<TokenWithSpan>,
    /// Where it is, parentheses included.
    pub span: Span,
}

/// Where the parenthesis opened at `open` closes, or an error.
fn closing(tokens: &[TokenWithSpan], open: usize) -> Result<usize> {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => {}
        }
    }
    Err(SqlError::at(
        tokens[open].span.start,
        "this '(' is never closed",
    ))
}

fn name_of(t: &TokenWithSpan) -> Option<Name> {
    match &t.token {
        Token::Word(Word {
            value, quote_style, ..
        }) => Some(Name {
            value: value.clone(),
            quoted: quote_style.is_some(),
            span: t.span,
        }),
        _ => None,
    }
}

/// An identifier token reading `name` where the subquery was.
fn placeholder(name: &Name, span: Span) -> TokenWithSpan {
    TokenWithSpan {
        token: Token::Word(Word {
            value: name.value.clone(),
            quote_style: name.quoted.then_some('"'),
            keyword: sqlparser::keywords::Keyword::NoKeyword,
        }),
        span,
    }
}

/// Cuts the subquery or CTE out of `tokens` (a query from `SELECT` or
/// `WITH` on): the outer query's tokens, reading the inner one by name,
/// and the inner query; the tokens unchanged and `None` when there is
/// neither.
pub(crate) fn cut(
    tokens: &[TokenWithSpan],
    end: Location,
) -> Result<(Vec<TokenWithSpan>, Option<Subquery>)> {
    if is_kw(tokens.first(), "WITH") {
        return cut_cte(tokens, end);
    }
    if let Some(open) = from_subquery(tokens) {
        let close = closing(tokens, open)?;
        let span = Span::new(tokens[open].span.start, tokens[close].span.end);
        let mut after = close + 1;
        if is_kw(tokens.get(after), "AS") {
            after += 1;
        }
        let Some(name) = tokens.get(after).and_then(name_of).filter(|_| {
            // A clause keyword is no alias.
            !["WHERE", "GROUP", "JOIN", "LEFT", "WINDOW", "EMIT", "HAVING"]
                .iter()
                .any(|kw| is_kw(tokens.get(after), kw))
        }) else {
            return Err(SqlError::span(
                span,
                "a subquery in FROM needs a name: FROM (SELECT ..) AS name",
            ));
        };
        let mut outer = tokens[..open].to_vec();
        outer.push(placeholder(&name, span));
        outer.extend_from_slice(&tokens[after + 1..]);
        let inner = tokens[open + 1..close].to_vec();
        check_one_level(&inner)?;
        return Ok((
            outer,
            Some(Subquery {
                name,
                tokens: inner,
                span,
            }),
        ));
    }
    Ok((tokens.to_vec(), None))
}

/// Where the `(` of a top-level `FROM (SELECT` is, if there is one.
fn from_subquery(tokens: &[TokenWithSpan]) -> Option<usize> {
    let mut depth = 0usize;
    for i in 0..tokens.len() {
        match tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0
            && is_kw(tokens.get(i), "FROM")
            && matches!(tokens.get(i + 1).map(|t| &t.token), Some(Token::LParen))
            && is_kw(tokens.get(i + 2), "SELECT")
        {
            return Some(i + 1);
        }
    }
    None
}

/// `WITH name AS (SELECT ..) SELECT ..`.
fn cut_cte(
    tokens: &[TokenWithSpan],
    end: Location,
) -> Result<(Vec<TokenWithSpan>, Option<Subquery>)> {
    let at = |i: usize| tokens.get(i).map_or(end, |t| t.span.start);
    let Some(name) = tokens.get(1).and_then(name_of) else {
        return Err(SqlError::at(at(1), "expected a name after WITH"));
    };
    if !is_kw(tokens.get(2), "AS") {
        return Err(SqlError::at(
            at(2),
            format!("expected AS after WITH {}", name.value),
        ));
    }
    if !matches!(tokens.get(3).map(|t| &t.token), Some(Token::LParen))
        || !is_kw(tokens.get(4), "SELECT")
    {
        return Err(SqlError::at(at(3), "expected (SELECT ..) after AS"));
    }
    let close = closing(tokens, 3)?;
    let span = Span::new(tokens[0].span.start, tokens[close].span.end);
    if matches!(tokens.get(close + 1).map(|t| &t.token), Some(Token::Comma)) {
        return Err(SqlError::at(
            at(close + 1),
            "only one common table expression (WITH) per query is supported",
        ));
    }
    if !is_kw(tokens.get(close + 1), "SELECT") {
        return Err(SqlError::at(
            at(close + 1),
            "expected SELECT after the common table expression",
        ));
    }
    let inner = tokens[4..close].to_vec();
    check_one_level(&inner)?;
    Ok((
        tokens[close + 1..].to_vec(),
        Some(Subquery {
            name,
            tokens: inner,
            span,
        }),
    ))
}

/// Refuses a subquery or CTE inside the inner query (without recursing:
/// nesting is user input).
fn check_one_level(inner: &[TokenWithSpan]) -> Result<()> {
    if is_kw(inner.first(), "WITH") {
        return Err(SqlError::at(
            inner[0].span.start,
            "a common table expression inside a subquery is not supported",
        ));
    }
    match from_subquery(inner) {
        Some(open) => Err(SqlError::at(
            inner[open].span.start,
            "only one level of subquery is supported",
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lex::split;

    fn text(tokens: &[TokenWithSpan]) -> String {
        tokens
            .iter()
            .map(|t| t.token.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn cut_text(sql: &str) -> Result<(String, Option<(String, String)>)> {
        let st = split(sql)?.remove(0);
        let (outer, inner) = cut(&st.tokens, st.end)?;
        Ok((text(&outer), inner.map(|s| (s.name.value, text(&s.tokens)))))
    }

    #[test]
    fn a_subquery_and_a_cte_are_cut_out_keeping_their_clauses() {
        let (outer, inner) = cut_text(
            "SELECT c, AVG(m) FROM (SELECT id, c, MAX(p) AS m FROM s WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY id, c) AS q GROUP BY c",
        )
        .unwrap();
        assert_eq!(outer, "SELECT c , AVG ( m ) FROM q GROUP BY c");
        let (name, inner) = inner.unwrap();
        assert_eq!(name, "q");
        assert!(inner.starts_with("SELECT id") && inner.contains("WINDOW TUMBLING"));

        let (outer, inner) =
            cut_text("WITH q AS (SELECT c, COUNT(*) AS n FROM s GROUP BY c) SELECT SUM(n) AS t FROM q GROUP BY 1")
                .unwrap();
        assert_eq!(outer, "SELECT SUM ( n ) AS t FROM q GROUP BY 1");
        assert_eq!(inner.unwrap().0, "q");
    }

    #[test]
    fn what_is_not_one_level_is_refused_with_a_position() {
        for (sql, wanted) in [
            ("SELECT * FROM (SELECT a FROM s) GROUP BY a", "needs a name"),
            (
                "SELECT * FROM (SELECT a FROM (SELECT a FROM s) x) y",
                "one level",
            ),
            (
                "WITH a AS (SELECT 1 FROM s), b AS (SELECT 2 FROM s) SELECT * FROM b",
                "only one common",
            ),
            ("WITH a (SELECT 1 FROM s) SELECT * FROM a", "expected AS"),
            ("SELECT * FROM (SELECT a FROM s AS q", "never closed"),
        ] {
            let e = cut_text(sql).unwrap_err();
            assert!(e.message.contains(wanted), "{sql}: {e:?}");
        }
    }
}
