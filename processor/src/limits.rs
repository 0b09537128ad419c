//! Limits on the size of expressions, so that nothing that walks one —
//! the SQL translator, the evaluator, `Clone`/`Drop`, serde of a stored
//! plan — recurses deeper than a known bound.
//!
//! Every plan is checked with [`check_plan`] (called by
//! [`Plan::validate`](crate::plan::Plan::validate)); the SQL front end checks
//! the parsed query against the same numbers before translating it, so an
//! over-limit statement is answered with an error that names the limit.
//!
//! Invariant: [`complexity`] itself never recurses (it keeps an explicit
//! stack), so it is safe on any expression, however deep.

use crate::expr::Expr;
use crate::plan::{ColumnSource, Operation, Plan};

/// Deepest expression accepted: the number of nodes on the longest path
/// from an expression's root to a leaf. A chain `a OR b OR ..` of n terms
/// is about n deep (SQL operators associate to the left), so this also
/// bounds chains of binary operators, not only parentheses.
///
/// 250 leaves room for hand-written and generated queries with hundreds of
/// terms, while the deepest recursion over an accepted expression (the
/// evaluator on a processor thread, serde when the catalog is loaded)
/// stays far inside a 2 MiB thread stack, even in a debug build.
pub const MAX_EXPR_DEPTH: usize = 250;

/// Most expression nodes (operators, operands, function arguments, list
/// items) in one statement or plan, all its expressions together.
pub const MAX_EXPR_NODES: usize = 10_000;

/// Most joins in one query (a first join and the tables joined after
/// it): each joined table is read beside the input and kept in memory
/// and state, and each event looks up every one.
pub const MAX_JOINS: usize = 8;

/// The size of an expression (or of several, together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Complexity {
    /// Nodes on the longest root-to-leaf path (a leaf alone is 1).
    pub depth: usize,
    /// Nodes in total.
    pub nodes: usize,
}

impl Complexity {
    /// Both measures of `self` and `other` together: the deeper depth, the
    /// sum of nodes.
    pub fn and(self, other: Complexity) -> Complexity {
        Complexity {
            depth: self.depth.max(other.depth),
            nodes: self.nodes + other.nodes,
        }
    }

    /// An error naming the limit this exceeds, if it exceeds one.
    pub fn check(&self) -> Result<(), String> {
        if self.depth > MAX_EXPR_DEPTH {
            return Err(format!(
                "an expression is nested more than {MAX_EXPR_DEPTH} levels deep, the limit \
                 (max_expression_depth; each operator of a chain like a OR b OR .. is one level)"
            ));
        }
        if self.nodes > MAX_EXPR_NODES {
            return Err(format!(
                "the expressions have more than {MAX_EXPR_NODES} nodes in all, the limit \
                 (max_expression_nodes)"
            ));
        }
        Ok(())
    }
}

/// Measures `expr` without recursion.
pub fn complexity(expr: &Expr) -> Complexity {
    let mut out = Complexity::default();
    let mut stack: Vec<(&Expr, usize)> = vec![(expr, 1)];
    let mut children: Vec<&Expr> = Vec::new();
    while let Some((e, depth)) = stack.pop() {
        out.nodes += 1;
        out.depth = out.depth.max(depth);
        children.clear();
        children_of(e, &mut children);
        stack.extend(children.iter().map(|c| (*c, depth + 1)));
    }
    out
}

/// Measures every expression of `plan` together.
pub fn plan_complexity(plan: &Plan) -> Complexity {
    let mut exprs: Vec<&Expr> = Vec::new();
    exprs.extend(&plan.filter);
    exprs.extend(plan.dedup.as_ref().map(|d| &d.id));
    exprs.extend(
        plan.join
            .iter()
            .chain(&plan.more_joins)
            .map(|j| &j.stream_key),
    );
    exprs.extend(&plan.partition_by);
    let outer = plan.then.as_ref();
    exprs.extend(outer.and_then(|r| r.filter.as_ref()));
    let aggregates = match &plan.operation {
        Operation::Project { columns } => {
            exprs.extend(columns.iter().map(|(_, e)| e));
            None
        }
        Operation::Aggregate(a) => Some(a),
    };
    for a in aggregates.into_iter().chain(outer.map(|r| &r.aggregate)) {
        exprs.extend(&a.group_by);
        exprs.extend(a.aggregates.iter().filter_map(|c| c.input.as_ref()));
        exprs.extend(&a.having);
        exprs.extend(a.columns.iter().filter_map(|(_, c)| match c {
            ColumnSource::Computed(e) => Some(e),
            _ => None,
        }));
    }
    exprs
        .into_iter()
        .map(complexity)
        .fold(Complexity::default(), Complexity::and)
}

/// Fails with a message naming the limit if `plan`'s expressions exceed
/// [`MAX_EXPR_DEPTH`] or [`MAX_EXPR_NODES`].
pub fn check_plan(plan: &Plan) -> Result<(), String> {
    let joins = plan.join.iter().count() + plan.more_joins.len();
    if joins > MAX_JOINS {
        return Err(format!(
            "a query joins at most {MAX_JOINS} tables and streams, the limit (max_joins; got {joins})"
        ));
    }
    plan_complexity(plan).check()
}

/// The direct sub-expressions of `e`.
fn children_of<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Field(_) | Expr::Column(_) | Expr::Key | Expr::RecordTimestamp | Expr::Literal(_) => {
        }
        Expr::Unary(_, x) | Expr::Cast(x, _) | Expr::IsNull { expr: x, .. } => out.push(x),
        Expr::Binary(_, l, r)
        | Expr::Like {
            expr: l,
            pattern: r,
            ..
        } => out.extend([&**l, &**r]),
        Expr::InList { expr, list, .. } => {
            out.push(expr);
            out.extend(list);
        }
        Expr::Between {
            expr, low, high, ..
        } => out.extend([&**expr, &**low, &**high]),
        Expr::Case {
            operand,
            branches,
            otherwise,
        } => {
            out.extend(operand.as_deref());
            for (when, then) in branches {
                out.extend([when, then]);
            }
            out.extend(otherwise.as_deref());
        }
        Expr::Function(_, args) => out.extend(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `1 + 1 + .. + 1` with `terms` terms, built without recursion.
    fn chain(terms: usize) -> Expr {
        let mut e = Expr::lit(1);
        for _ in 1..terms {
            e = e.add(Expr::lit(1));
        }
        e
    }

    #[test]
    fn complexity_counts_depth_and_nodes() {
        assert_eq!(complexity(&Expr::lit(1)), Complexity { depth: 1, nodes: 1 });
        let e = chain(3);
        assert_eq!(complexity(&e), Complexity { depth: 3, nodes: 5 });
        let f = Expr::Function(crate::expr::Function::Coalesce, vec![e, Expr::Key]);
        assert_eq!(complexity(&f), Complexity { depth: 4, nodes: 7 });
    }

    #[test]
    fn complexity_walks_a_chain_far_past_any_stack_without_recursing() {
        // Deep enough that a recursive walk would overflow a 2 MiB stack.
        let deep = chain(200_000);
        let c = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                let c = complexity(&deep);
                // Dismantle iteratively: `Drop` of the chain recurses.
                let mut e = deep;
                while let Expr::Binary(_, l, _) = e {
                    e = *l;
                }
                c
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(c.depth, 200_000);
        assert!(c.check().unwrap_err().contains("more than 250 levels"));
    }

    #[test]
    fn a_chain_at_the_limit_passes_and_one_more_fails() {
        assert!(complexity(&chain(MAX_EXPR_DEPTH)).check().is_ok());
        let err = complexity(&chain(MAX_EXPR_DEPTH + 1)).check().unwrap_err();
        assert!(err.contains("max_expression_depth"), "{err}");
        let wide = Expr::Function(
            crate::expr::Function::Coalesce,
            vec![Expr::Key; MAX_EXPR_NODES],
        );
        let err = complexity(&wide).check().unwrap_err();
        assert!(err.contains("max_expression_nodes"), "{err}");
    }
}
