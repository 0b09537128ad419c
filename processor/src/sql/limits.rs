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

use sqlparser::ast::{self as ast, FunctionArg, FunctionArgExpr, FunctionArguments, InTarget};
use sqlparser::tokenizer::Location;

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
