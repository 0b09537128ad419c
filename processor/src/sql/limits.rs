//! What one statement may cost, checked before anything recurses over it.
//!
//! `sqlparser` parses a chain of binary operators (`1+1+..`, `a OR b OR
//! ..`) in a loop, so its own recursion limit (parentheses, `NOT`, `CASE`)
//! does not bound the depth of the tree it returns; the translator, the
//! evaluator and serde of the stored plan all recurse over that tree. So:
//!
//! 1. [`too_many_tokens`]: the lexer refuses a statement of more than
//!    [`MAX_STATEMENT_TOKENS`] tokens. Every tree node costs at least one
//!    token, so this bounds the depth of any tree `sqlparser` can build —
//!    what dropping, displaying or taking the span of a tree recurses over
//!    (each well under 200 bytes of stack per level, so 10,000 levels fit
//!    in 2 MiB even in a debug build; statements run on threads with
//!    [`SQL_STACK_BYTES`]).
//! 2. [`check_exprs`]: once a query's parts are known
//!    (`QueryParts::of`), a walk that stops at the first node past
//!    [`MAX_EXPR_DEPTH`] measures expression depth and node count, so it
//!    recurses at most that deep. Only then is anything translated.
//!    Expression kinds Kappa does not translate count as leaves here; the
//!    translator rejects them without recursing into them beyond (1).
//!
//! Before either, [`check_nesting`] bounds what `sqlparser` itself
//! recurses over — parentheses, brackets, `CASE`, prefix `NOT`, `-`, `+` —
//! on the tokens, to [`MAX_NESTING_DEPTH`]. `sqlparser`'s own recursion
//! limit cannot be the one users meet: when it is reached inside the
//! operand of a keyword that may also be a column name (`NOT`, `CASE`),
//! `sqlparser` drops the error and reads the keyword as a column instead,
//! so `WHERE NOT NOT .. x` past its limit failed later with an unrelated
//! "expected end of statement, found ..". Its limit
//! ([`PARSER_RECURSION_LIMIT`]) is set far above what a statement within
//! [`MAX_NESTING_DEPTH`] needs, as the backstop that bounds its work.

use sqlparser::ast::{self as ast, FunctionArg, FunctionArgExpr, FunctionArguments, InTarget};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan};

use super::error::{Result, SqlError};
use crate::limits::{Complexity, MAX_EXPR_DEPTH, MAX_EXPR_NODES};

/// Stack of a thread that parses and plans statements (the server's
/// statement threads, the fuzz target's): a wide margin over what the
/// bounds above need.
pub const SQL_STACK_BYTES: usize = 16 << 20;

/// Most tokens (words, numbers, strings, operators; not whitespace or
/// comments) in one statement.
pub const MAX_STATEMENT_TOKENS: usize = 20_000;

/// The error for a statement (starting at `at`) with more than
/// [`MAX_STATEMENT_TOKENS`] tokens; the lexer stops at the first excess.
pub(crate) fn too_many_tokens(at: Location) -> SqlError {
    SqlError::at(
        at,
        format!(
            "the statement has more than {MAX_STATEMENT_TOKENS} tokens, the limit \
             (max_statement_tokens)"
        ),
    )
}

/// Deepest nesting of parentheses, brackets, `CASE` and prefix operators
/// (`NOT`, `-`, `+`) in one statement, as [`check_nesting`] counts it.
pub const MAX_NESTING_DEPTH: usize = 60;

/// `sqlparser`'s recursion limit. Each level [`check_nesting`] counts costs
/// `sqlparser` at most three (a parenthesized subquery: the parenthesis,
/// the query, its expression; an operator's right operand: one more), plus
/// one per precedence tier of the operators between them, so a statement
/// within [`MAX_NESTING_DEPTH`] never reaches this and never meets the way
/// `sqlparser` reports reaching it inside `NOT` or `CASE` (see the module
/// doc). What it still bounds is `sqlparser`'s work on what the token
/// check does not count (`INTERVAL INTERVAL ..`); the stack is not at risk
/// (`sqlparser` grows its own as it recurses: 1,000 nested `INTERVAL`s
/// stop at this limit on a 64 KiB thread in a debug build).
pub(crate) const PARSER_RECURSION_LIMIT: usize = 3 * MAX_NESTING_DEPTH + 20;

/// The error for nesting past [`MAX_NESTING_DEPTH`] at `at` (also what
/// `sqlparser`'s recursion limit is reported as).
pub(crate) fn nested_too_deeply(at: Location) -> SqlError {
    SqlError::at(
        at,
        format!(
            "expression nested too deeply: more than {MAX_NESTING_DEPTH} levels of \
             parentheses, CASE, NOT or signs, the limit (max_nesting_depth)"
        ),
    )
}

/// What opened a level of [`check_nesting`]'s stack.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opener {
    /// The statement itself.
    Top,
    Paren,
    Bracket,
    Case,
}

/// One open parenthesis, bracket or `CASE` (or the statement).
struct Level {
    opener: Opener,
    /// Prefix operators whose operand is still open in this level,
    /// outermost first (`true`: `NOT`, `false`: a sign): each nests the
    /// rest of its operand one level deeper.
    prefixes: Vec<bool>,
    /// A `BETWEEN` waits for its `AND` (which ends no operand).
    between: bool,
}

impl Level {
    fn new(opener: Opener) -> Level {
        Level {
            opener,
            prefixes: Vec::new(),
            between: false,
        }
    }

    /// Ends the operands of the signs since the innermost open `NOT` (a
    /// binary operator binds looser than a sign, tighter than `NOT`);
    /// answers how many.
    fn end_signs(&mut self) -> usize {
        let keep = self
            .prefixes
            .iter()
            .rposition(|&not| not)
            .map_or(0, |i| i + 1);
        let ended = self.prefixes.len() - keep;
        self.prefixes.truncate(keep);
        ended
    }

    /// Ends every open operand (`AND`, `OR`, a comma, `WHEN`, ..); answers
    /// how many.
    fn end_all(&mut self) -> usize {
        self.between = false;
        std::mem::take(&mut self.prefixes).len()
    }
}

/// Refuses a statement whose tokens nest deeper than [`MAX_NESTING_DEPTH`]:
/// each open parenthesis, bracket or `CASE` is a level, and so is each
/// prefix `NOT` until its operand ends (at `AND`, `OR`, a comma, `WHEN`,
/// `THEN`, `ELSE`, `WHERE`, `HAVING`, `BY`, `ON` or the end of its level)
/// and each sign (`-`, `+`) until its operand ends (also at the next binary
/// operator). This counts as deep as `sqlparser` recurses over prefixes and
/// brackets or deeper (an infix `NOT IN` counts a level too), never
/// shallower. No recursion.
pub(crate) fn check_nesting(tokens: &[TokenWithSpan]) -> Result<()> {
    let mut levels = vec![Level::new(Opener::Top)];
    // Every level's opener (but the statement's) and open prefixes.
    let mut depth = 0usize;
    let mut previous: Option<&Token> = None;
    for t in tokens {
        let top = levels.last_mut().expect("the statement's level");
        let infix = ends_operand(previous);
        let (mut opened, mut closed) = (None, false);
        match &t.token {
            Token::LParen => opened = Some(Opener::Paren),
            Token::LBracket => opened = Some(Opener::Bracket),
            // An unmatched one is sqlparser's to report.
            Token::RParen => closed = top.opener == Opener::Paren,
            Token::RBracket => closed = top.opener == Opener::Bracket,
            Token::Minus | Token::Plus if !infix => {
                top.prefixes.push(false);
                depth += 1;
            }
            Token::Comma => depth -= top.end_all(),
            token if infix && is_binary_operator(token) => depth -= top.end_signs(),
            Token::Word(w) if w.quote_style.is_none() => match w.keyword {
                Keyword::CASE => opened = Some(Opener::Case),
                Keyword::END => closed = top.opener == Opener::Case,
                Keyword::NOT if !infix && !is_keyword(previous, Keyword::IS) => {
                    top.prefixes.push(true);
                    depth += 1;
                }
                Keyword::BETWEEN => top.between = true,
                Keyword::AND if top.between => top.between = false,
                Keyword::AND
                | Keyword::OR
                | Keyword::WHEN
                | Keyword::THEN
                | Keyword::ELSE
                | Keyword::WHERE
                | Keyword::HAVING
                | Keyword::BY
                | Keyword::ON => depth -= top.end_all(),
                _ => {}
            },
            _ => {}
        }
        if closed {
            let level = levels.pop().expect("a level above the statement's");
            depth -= 1 + level.prefixes.len();
        }
        if let Some(opener) = opened {
            levels.push(Level::new(opener));
            depth += 1;
        }
        if depth > MAX_NESTING_DEPTH {
            return Err(nested_too_deeply(t.span.start));
        }
        previous = Some(&t.token);
    }
    Ok(())
}

/// True if `t` is an operator between two operands that binds looser than
/// a sign (all but `::`, which binds tighter).
fn is_binary_operator(t: &Token) -> bool {
    matches!(
        t,
        Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::DuckIntDiv
            | Token::Mod
            | Token::StringConcat
            | Token::Eq
            | Token::DoubleEq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq
            | Token::Spaceship
            | Token::Ampersand
            | Token::Pipe
            | Token::Caret
            | Token::ShiftLeft
            | Token::ShiftRight
    )
}

/// True if `t` is the unquoted keyword `kw`.
fn is_keyword(t: Option<&Token>, kw: Keyword) -> bool {
    matches!(t, Some(Token::Word(w)) if w.quote_style.is_none() && w.keyword == kw)
}

/// True if an operand can end with `t`, so that a `NOT`, `-` or `+` after
/// it is an infix operator: a literal, a name, a closing parenthesis or
/// bracket, `END` of a `CASE` — not an operator, a comma, an opening
/// parenthesis or a keyword that is followed by an expression.
fn ends_operand(t: Option<&Token>) -> bool {
    match t {
        None => false,
        Some(Token::Word(w)) if w.quote_style.is_none() => !matches!(
            w.keyword,
            Keyword::NOT
                | Keyword::AND
                | Keyword::OR
                | Keyword::XOR
                | Keyword::IS
                | Keyword::IN
                | Keyword::LIKE
                | Keyword::ILIKE
                | Keyword::SIMILAR
                | Keyword::RLIKE
                | Keyword::REGEXP
                | Keyword::BETWEEN
                | Keyword::CASE
                | Keyword::WHEN
                | Keyword::THEN
                | Keyword::ELSE
                | Keyword::SELECT
                | Keyword::WHERE
                | Keyword::HAVING
                | Keyword::ON
                | Keyword::BY
                | Keyword::DISTINCT
                | Keyword::ALL
                | Keyword::ANY
                | Keyword::SOME
                | Keyword::INTERVAL
                | Keyword::AS
                | Keyword::FROM
        ),
        Some(
            Token::Word(_)
            | Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::Placeholder(_)
            | Token::RParen
            | Token::RBracket,
        ) => true,
        Some(_) => false,
    }
}

/// Counts expression depth and nodes, giving up at the first excess.
#[derive(Default)]
struct Measure {
    seen: Complexity,
}

/// Past a limit: stop walking.
struct Exceeded;

impl Measure {
    fn all<'a>(
        &mut self,
        exprs: impl IntoIterator<Item = &'a ast::Expr>,
        depth: usize,
    ) -> std::result::Result<(), Exceeded> {
        exprs.into_iter().try_for_each(|e| self.expr(e, depth))
    }

    fn expr(&mut self, e: &ast::Expr, depth: usize) -> std::result::Result<(), Exceeded> {
        use ast::Expr as S;
        let depth = depth + 1;
        self.seen.nodes += 1;
        self.seen.depth = self.seen.depth.max(depth);
        if self.seen.depth > MAX_EXPR_DEPTH || self.seen.nodes > MAX_EXPR_NODES {
            return Err(Exceeded);
        }
        match e {
            S::BinaryOp { left, right, .. }
            | S::IsDistinctFrom(left, right)
            | S::IsNotDistinctFrom(left, right) => self.all([&**left, &**right], depth),
            S::Like {
                expr: left,
                pattern: right,
                ..
            }
            | S::ILike {
                expr: left,
                pattern: right,
                ..
            } => self.all([&**left, &**right], depth),
            S::UnaryOp { expr: x, .. }
            | S::Nested(x)
            | S::IsNull(x)
            | S::IsNotNull(x)
            | S::IsTrue(x)
            | S::IsNotTrue(x)
            | S::IsFalse(x)
            | S::IsNotFalse(x)
            | S::IsUnknown(x)
            | S::IsNotUnknown(x)
            | S::Cast { expr: x, .. }
            | S::Ceil { expr: x, .. }
            | S::Floor { expr: x, .. }
            | S::Trim { expr: x, .. } => self.expr(x, depth),
            S::In { expr, target, .. } => {
                self.expr(expr, depth)?;
                match target {
                    InTarget::List(list) => self.all(list, depth),
                    _ => Ok(()),
                }
            }
            S::Between {
                expr, low, high, ..
            } => self.all([&**expr, &**low, &**high], depth),
            S::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                self.all(operand.as_deref(), depth)?;
                for w in conditions {
                    self.all([&w.condition, &w.result], depth)?;
                }
                self.all(else_result.as_deref(), depth)
            }
            S::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                self.expr(expr, depth)?;
                self.all(substring_from.as_deref(), depth)?;
                self.all(substring_for.as_deref(), depth)
            }
            S::Tuple(list) => self.all(list, depth),
            S::Function(f) => match &f.args {
                FunctionArguments::List(list) => self.all(
                    list.args.iter().filter_map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(x))
                        | FunctionArg::Named {
                            arg: FunctionArgExpr::Expr(x),
                            ..
                        }
                        | FunctionArg::ExprNamed {
                            arg: FunctionArgExpr::Expr(x),
                            ..
                        } => Some(x),
                        _ => None,
                    }),
                    depth,
                ),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

/// Fails with a message naming the limit if one of `exprs` is nested
/// deeper than [`MAX_EXPR_DEPTH`], or all of them together have more than
/// [`MAX_EXPR_NODES`] nodes; `at` is where the statement starts.
pub(crate) fn check_exprs<'a>(
    exprs: impl IntoIterator<Item = &'a ast::Expr>,
    at: Location,
) -> Result<()> {
    let mut m = Measure::default();
    // On `Exceeded`, `seen` is past a limit and `check` names which.
    let _ = m.all(exprs, 0);
    m.seen.check().map_err(|reason| SqlError::at(at, reason))
}

/// Most workers of each kind a view may run with (`PARALLELISM`,
/// `processor_threads`): every key-shard worker needs a key group.
pub const MAX_PARALLELISM: u32 = crate::parallel::MAX_WORKERS as u32;

/// Most previous versions a view may keep (`KEEP_VERSIONS`,
/// `view_keep_versions`): each keeps following its input.
pub const MAX_KEEP_VERSIONS: u32 = 16;

/// Most offsets `REPLAY .. FROM OFFSETS (..)` takes: one per partition of
/// the view's input, and a topic has at most
/// [`kappa_log::MAX_PARTITIONS_PER_TOPIC`].
pub const MAX_REPLAY_OFFSETS: usize = kappa_log::MAX_PARTITIONS_PER_TOPIC as usize;
