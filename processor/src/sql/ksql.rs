//! The ksqlDB-only grammar `sqlparser` does not know, parsed by hand from
//! tokens (so positions stay those of the original text):
//! - `WITH (NAME = value, ..)` property lists ([`Properties`]);
//! - durations: `5 MINUTES` as tokens, `'5 MINUTES'` as a property value,
//!   or a bare number of milliseconds;
//! - `WINDOW TUMBLING (SIZE d [, GRACE PERIOD d])`, `WINDOW HOPPING (SIZE d,
//!   ADVANCE BY d [, GRACE PERIOD d])`, `WINDOW SESSION (d [, GRACE PERIOD
//!   d])`;
//! - `EMIT CHANGES | FINAL` at the end of a query;
//! - `PARTITION BY expr`;
//! - a join's `WITHIN d` or `WITHIN (d, d)` `[GRACE PERIOD d]`.
//!
//! [`extract_query_clauses`] cuts the window and emit clauses out of a
//! query's tokens; the rest goes to `sqlparser`.

use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan};

use super::error::{Result, SqlError};
use super::lex::{describe, is_kw, Cursor};
use crate::plan::Emit;
use crate::window::WindowSpec;

/// A property value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PropValue {
    /// `'text'`.
    Str(String),
    /// A number, as written.
    Number(String),
    /// `TRUE`/`FALSE`.
    Bool(bool),
}

/// One `NAME = value` of a `WITH` list.
#[derive(Debug, Clone)]
pub(crate) struct Property {
    /// Upper-cased name.
    pub name: String,
    /// Where the name is.
    pub name_span: Span,
    /// The value.
    pub value: PropValue,
    /// Where the value is.
    pub span: Span,
}

/// A `WITH (..)` list; each property is read at most once, and
/// [`Properties::finish`] rejects the ones nobody read.
#[derive(Debug, Default)]
pub(crate) struct Properties {
    items: Vec<Property>,
    used: Vec<bool>,
}

impl Properties {
    /// Parses `( NAME = value [, ...] )` (the `WITH` already consumed).
    pub fn parse(c: &mut Cursor<'_>) -> Result<Properties> {
        c.expect(&Token::LParen, "'(' after WITH")?;
        let mut props = Properties::default();
        loop {
            let name = c.name("a property name")?;
            c.expect(&Token::Eq, &format!("'=' after {}", name.value))?;
            let t = c.next_token();
            let value = match t.map(|t| &t.token) {
                Some(Token::SingleQuotedString(s)) => PropValue::Str(s.clone()),
                Some(Token::Number(n, _)) => PropValue::Number(n.clone()),
                _ if is_kw(t, "TRUE") => PropValue::Bool(true),
                _ if is_kw(t, "FALSE") => PropValue::Bool(false),
                _ => {
                    let at = t.map_or(name.span.end, |t| t.span.start);
                    return Err(SqlError::at(
                        at,
                        format!(
                            "expected a quoted string or a number as the value of {}, found {}",
                            name.value.to_uppercase(),
                            describe(t)
                        ),
                    ));
                }
            };
            let mut upper = name.value.to_uppercase();
            if upper == "TOPIC" {
                // One property under two names.
                upper = "KAFKA_TOPIC".into();
            }
            if props.items.iter().any(|p| p.name == upper) {
                let also = if upper == "KAFKA_TOPIC" {
                    " (or its alias TOPIC)"
                } else {
                    ""
                };
                return Err(SqlError::span(
                    name.span,
                    format!("property {upper}{also} is given twice"),
                ));
            }
            props.items.push(Property {
                name: upper,
                name_span: name.span,
                value,
                span: t.map_or(name.span, |t| t.span),
            });
            props.used.push(false);
            if c.eat(&Token::Comma) {
                continue;
            }
            c.expect(&Token::RParen, "',' or ')' in the WITH list")?;
            return Ok(props);
        }
    }

    /// The first property named one of `names` (aliases), marked read.
    pub fn take(&mut self, names: &[&str]) -> Option<Property> {
        let i = self
            .items
            .iter()
            .position(|p| names.contains(&p.name.as_str()))?;
        self.used[i] = true;
        Some(self.items[i].clone())
    }

    /// Where the value of property `name` is, if given.
    pub fn peek_span(&self, name: &str) -> Option<Span> {
        self.items.iter().find(|p| p.name == name).map(|p| p.span)
    }

    /// A string property.
    pub fn string(&mut self, names: &[&str]) -> Result<Option<(String, Span)>> {
        match self.take(names) {
            None => Ok(None),
            Some(Property {
                value: PropValue::Str(s),
                span,
                ..
            }) => {
                if s.is_empty() {
                    return Err(SqlError::span(
                        span,
                        format!("{} must not be empty", names[0]),
                    ));
                }
                Ok(Some((s, span)))
            }
            Some(p) => Err(SqlError::span(
                p.span,
                format!("expected a quoted string as the value of {}", p.name),
            )),
        }
    }

    /// A `TRUE`/`FALSE` property.
    pub fn bool(&mut self, names: &[&str]) -> Result<Option<bool>> {
        match self.take(names) {
            None => Ok(None),
            Some(Property {
                value: PropValue::Bool(b),
                ..
            }) => Ok(Some(b)),
            Some(p) => Err(SqlError::span(
                p.span,
                format!("expected TRUE or FALSE as the value of {}", p.name),
            )),
        }
    }

    /// A duration property: `'5 SECONDS'` or a number of milliseconds.
    pub fn duration(&mut self, names: &[&str]) -> Result<Option<i64>> {
        let Some(p) = self.take(names) else {
            return Ok(None);
        };
        let ms = match &p.value {
            PropValue::Str(s) => parse_duration_text(s),
            PropValue::Number(n) => n.parse::<i64>().ok().filter(|v| *v >= 0),
            PropValue::Bool(_) => None,
        };
        ms.map(Some).ok_or_else(|| {
            SqlError::span(
                p.span,
                format!(
                    "expected a duration such as '5 SECONDS' (or milliseconds) as the value of {}",
                    p.name
                ),
            )
        })
    }

    /// A positive whole-number property.
    pub fn positive_u32(&mut self, names: &[&str]) -> Result<Option<u32>> {
        let Some(p) = self.take(names) else {
            return Ok(None);
        };
        match &p.value {
            PropValue::Number(n) => match n.parse::<u32>() {
                Ok(v) if v > 0 => Ok(Some(v)),
                _ => Err(SqlError::span(
                    p.span,
                    format!("{} must be a whole number from 1 to {}", p.name, u32::MAX),
                )),
            },
            _ => Err(SqlError::span(
                p.span,
                format!("expected a number as the value of {}", p.name),
            )),
        }
    }

    /// A whole-number property from `min` to `max`.
    pub fn whole_in(&mut self, names: &[&str], min: u32, max: u32) -> Result<Option<u32>> {
        let Some(p) = self.take(names) else {
            return Ok(None);
        };
        let value = match &p.value {
            PropValue::Number(n) => n.parse::<u32>().ok(),
            _ => None,
        };
        match value {
            Some(v) if (min..=max).contains(&v) => Ok(Some(v)),
            _ => Err(SqlError::span(
                p.span,
                format!("{} must be a whole number from {min} to {max}", p.name),
            )),
        }
    }

    /// Fails on the first property nobody read.
    pub fn finish(&self, statement: &str, known: &[&str]) -> Result<()> {
        match self.items.iter().zip(&self.used).find(|(_, used)| !**used) {
            None => Ok(()),
            Some((p, _)) => Err(SqlError::span(
                p.name_span,
                format!(
                    "unknown property {} in {statement}; expected one of {}",
                    p.name,
                    known.join(", ")
                ),
            )),
        }
    }
}

/// Milliseconds per unit name (singular or plural, any case).
pub(crate) fn unit_ms(unit: &str) -> Option<i64> {
    let u = unit.to_ascii_uppercase();
    let u = u.strip_suffix('S').unwrap_or(&u);
    Some(match u {
        "MILLISECOND" => 1,
        "SECOND" => 1_000,
        "MINUTE" => 60_000,
        "HOUR" => 3_600_000,
        "DAY" => 86_400_000,
        _ => return None,
    })
}

/// `'5 MINUTES'` → 300000; `None` if malformed or overflowing.
pub(crate) fn parse_duration_text(s: &str) -> Option<i64> {
    let mut parts = s.split_whitespace();
    let (n, unit) = (parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    n.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)?
        .checked_mul(unit_ms(unit)?)
}

/// Parses `<number> <unit>` tokens, e.g. `5 MINUTES`.
pub(crate) fn duration_tokens(c: &mut Cursor<'_>, what: &str) -> Result<i64> {
    let start = c.here();
    let n = match c.peek().map(|t| &t.token) {
        Some(Token::Number(n, _)) => n.clone(),
        _ => return Err(c.expected(&format!("a duration for {what}, e.g. 5 MINUTES"))),
    };
    c.next_token();
    let n: i64 = n
        .parse()
        .map_err(|_| SqlError::at(start, format!("the {what} must be a whole number of units")))?;
    let unit = match c.peek().map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => unit_ms(&w.value),
        _ => None,
    };
    let Some(unit) = unit else {
        return Err(c.expected("a time unit (MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS)"));
    };
    c.next_token();
    n.checked_mul(unit)
        .ok_or_else(|| SqlError::at(start, format!("the {what} is too large")))
}

/// A parsed `WINDOW ..` clause.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WindowClause {
    /// Kind and sizes.
    pub spec: WindowSpec,
    /// `GRACE PERIOD`, if given.
    pub grace_ms: Option<i64>,
    /// `RETENTION`, if given.
    pub retention_ms: Option<i64>,
    /// Where the clause is (from `WINDOW`).
    pub span: Span,
}

/// A query's tokens with the ksqlDB clauses taken out.
#[derive(Debug, Clone)]
pub(crate) struct QueryTokens {
    /// What `sqlparser` parses.
    pub tokens: Vec<TokenWithSpan>,
    /// `WINDOW ..`, if any.
    pub window: Option<WindowClause>,
    /// `EMIT ..`, if any, and where.
    pub emit: Option<(Emit, Span)>,
    /// `PARTITION BY expr`: the expression's tokens, and where the clause is.
    pub partition_by: Option<(Vec<TokenWithSpan>, Span)>,
    /// A join's `WITHIN ..`, if any.
    pub within: Option<WithinClause>,
}

/// A parsed `WITHIN ..` of a join of two streams.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WithinClause {
    /// How much earlier than the stream's event a joined event may be.
    pub before_ms: i64,
    /// How much later.
    pub after_ms: i64,
    /// `GRACE PERIOD`, if given.
    pub grace_ms: Option<i64>,
    /// Where the clause is (from `WITHIN`).
    pub span: Span,
}

/// Parses `WITHIN d [GRACE PERIOD d]` or `WITHIN (before, after) [GRACE
/// PERIOD d]`.
fn within_clause(c: &mut Cursor<'_>) -> Result<WithinClause> {
    let span = c.expect_kw("WITHIN", "WITHIN")?;
    let (before_ms, after_ms) = if c.eat(&Token::LParen) {
        let before = duration_tokens(c, "time before the event")?;
        c.expect(
            &Token::Comma,
            "',' and the time after, e.g. WITHIN (1 HOUR, 10 MINUTES)",
        )?;
        let after = duration_tokens(c, "time after the event")?;
        c.expect(&Token::RParen, "')' to close WITHIN (before, after)")?;
        (before, after)
    } else {
        let both = duration_tokens(c, "join's time bound")?;
        (both, both)
    };
    let grace_ms = match c.is_kw("GRACE") {
        true => {
            c.next_token();
            c.expect_kw("PERIOD", "PERIOD after GRACE")?;
            Some(duration_tokens(c, "grace period")?)
        }
        false => None,
    };
    Ok(WithinClause {
        before_ms,
        after_ms,
        grace_ms,
        span,
    })
}

/// Cuts `WINDOW ..`, `WITHIN ..`, `PARTITION BY ..` and `EMIT ..` (top
/// level, outside parentheses) out of a query's tokens.
pub(crate) fn extract_query_clauses(
    tokens: &[TokenWithSpan],
    end: Location,
) -> Result<QueryTokens> {
    let mut out = QueryTokens {
        tokens: Vec::with_capacity(tokens.len()),
        window: None,
        emit: None,
        partition_by: None,
        within: None,
    };
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && is_kw(Some(t), "WINDOW") {
            if out.window.is_some() {
                return Err(SqlError::span(
                    t.span,
                    "a query takes only one WINDOW clause",
                ));
            }
            let mut c = Cursor::new(&tokens[i..], end);
            out.window = Some(window_clause(&mut c)?);
            i += c.pos();
            continue;
        }
        if depth == 0 && is_kw(Some(t), "WITHIN") {
            if out.within.is_some() {
                return Err(SqlError::span(t.span, "a query takes only one WITHIN"));
            }
            let mut c = Cursor::new(&tokens[i..], end);
            out.within = Some(within_clause(&mut c)?);
            i += c.pos();
            continue;
        }
        if depth == 0 && is_kw(Some(t), "PARTITION") && is_kw(tokens.get(i + 1), "BY") {
            if out.partition_by.is_some() {
                return Err(SqlError::span(
                    t.span,
                    "a query takes only one PARTITION BY",
                ));
            }
            // The expression runs to EMIT or the end, outside parentheses.
            let mut j = i + 2;
            let mut inner = 0usize;
            while let Some(e) = tokens.get(j) {
                match e.token {
                    Token::LParen => inner += 1,
                    Token::RParen => inner = inner.saturating_sub(1),
                    _ => {}
                }
                if inner == 0 && (is_kw(Some(e), "EMIT") || is_kw(Some(e), "WINDOW")) {
                    break;
                }
                j += 1;
            }
            out.partition_by = Some((tokens[i + 2..j].to_vec(), t.span));
            i = j;
            continue;
        }
        if depth == 0 && is_kw(Some(t), "EMIT") {
            let mut c = Cursor::new(&tokens[i + 1..], end);
            let emit = if c.eat_kw("CHANGES") {
                Emit::Changes
            } else if c.eat_kw("FINAL") {
                Emit::Final
            } else {
                return Err(c.expected("CHANGES or FINAL after EMIT"));
            };
            c.expect_end("end of statement after the EMIT clause")?;
            out.emit = Some((emit, t.span));
            break;
        }
        out.tokens.push(t.clone());
        i += 1;
    }
    Ok(out)
}

/// Parses `WINDOW kind ( .. )`.
fn window_clause(c: &mut Cursor<'_>) -> Result<WindowClause> {
    let start = c.expect_kw("WINDOW", "WINDOW")?;
    let kind = if c.eat_kw("TUMBLING") {
        "TUMBLING"
    } else if c.eat_kw("HOPPING") {
        "HOPPING"
    } else if c.eat_kw("SESSION") {
        "SESSION"
    } else {
        return Err(c.expected("TUMBLING, HOPPING or SESSION after WINDOW"));
    };
    c.expect(&Token::LParen, &format!("'(' after WINDOW {kind}"))?;
    let spec = match kind {
        "TUMBLING" => {
            c.expect_kw("SIZE", "SIZE in a TUMBLING window, e.g. (SIZE 5 MINUTES)")?;
            WindowSpec::Tumbling {
                size_ms: duration_tokens(c, "window size")?,
            }
        }
        "HOPPING" => {
            c.expect_kw(
                "SIZE",
                "SIZE in a HOPPING window, e.g. (SIZE 5 MINUTES, ADVANCE BY 1 MINUTE)",
            )?;
            let size_ms = duration_tokens(c, "window size")?;
            c.expect(
                &Token::Comma,
                "',' and ADVANCE BY after the hopping window size",
            )?;
            c.expect_kw("ADVANCE", "ADVANCE BY in a HOPPING window")?;
            c.expect_kw("BY", "BY after ADVANCE")?;
            let advance_ms = duration_tokens(c, "window advance")?;
            WindowSpec::Hopping {
                size_ms,
                advance_ms,
            }
        }
        _ => {
            c.eat_kw("GAP");
            WindowSpec::Session {
                gap_ms: duration_tokens(c, "session gap")?,
            }
        }
    };
    let mut grace_ms = None;
    let mut retention_ms = None;
    while c.eat(&Token::Comma) {
        if c.is_kw("GRACE") {
            let at = c.here();
            c.next_token();
            c.expect_kw("PERIOD", "PERIOD after GRACE")?;
            if grace_ms.is_some() {
                return Err(SqlError::at(at, "GRACE PERIOD is given twice"));
            }
            grace_ms = Some(duration_tokens(c, "grace period")?);
        } else if c.is_kw("RETENTION") {
            let at = c.here();
            c.next_token();
            if retention_ms.is_some() {
                return Err(SqlError::at(at, "RETENTION is given twice"));
            }
            retention_ms = Some(duration_tokens(c, "retention")?);
        } else {
            return Err(c.expected("GRACE PERIOD or RETENTION"));
        }
    }
    c.expect(
        &Token::RParen,
        "',' GRACE PERIOD or ')' to close the WINDOW clause",
    )?;
    if let Err(reason) = spec.validate() {
        return Err(SqlError::span(start, reason));
    }
    if let Some(r) = retention_ms {
        let grace = grace_ms.unwrap_or(super::defaults::GRACE_MS);
        if r < grace {
            let default = if grace_ms.is_none() {
                " (the default; give a shorter GRACE PERIOD for a shorter RETENTION)"
            } else {
                ""
            };
            return Err(SqlError::span(
                start,
                format!("RETENTION ({r} ms) must be at least the GRACE PERIOD ({grace} ms{default}): rows are kept until their window has closed"),
            ));
        }
    }
    Ok(WindowClause {
        spec,
        grace_ms,
        retention_ms,
        span: start,
    })
}
