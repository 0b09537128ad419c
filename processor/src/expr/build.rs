//! Rust-DSL constructors of [`Expr`] trees: `Expr::field("a.b")`,
//! `Expr::lit(5)`, comparison and arithmetic builders, and the operator
//! traits (`+ - * / % ! -`). They build plain data; nothing is computed.

use serde_json::Value;

use super::{BinaryOp, Expr, UnaryOp};

/// Rust-DSL constructors. `add`, `sub`, `mul`, `div` and `not` build
/// expressions rather than compute, so they are methods by design; the
/// operator traits (`+ - * / % ! -`) are implemented too.
#[allow(clippy::should_implement_trait)]
impl Expr {
    /// A field by dotted path: `Expr::field("a.b")` reads value.a.b.
    pub fn field(path: &str) -> Expr {
        Expr::Field(path.split('.').map(str::to_owned).collect())
    }

    /// A named computed column (see [`Row::column`]).
    pub fn column(name: &str) -> Expr {
        Expr::Column(name.to_owned())
    }

    /// A literal: `Expr::lit(5)`, `Expr::lit("x")`, `Expr::lit(serde_json::Value::Null)`.
    pub fn lit(v: impl Into<Value>) -> Expr {
        Expr::Literal(v.into())
    }

    pub(super) fn binary(op: BinaryOp, l: Expr, r: Expr) -> Expr {
        Expr::Binary(op, Box::new(l), Box::new(r))
    }

    /// `self = other`
    pub fn eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Eq, self, other)
    }

    /// `self <> other`
    pub fn not_eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::NotEq, self, other)
    }

    /// `self < other`
    pub fn lt(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Lt, self, other)
    }

    /// `self <= other`
    pub fn lt_eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::LtEq, self, other)
    }

    /// `self > other`
    pub fn gt(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Gt, self, other)
    }

    /// `self >= other`
    pub fn gt_eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::GtEq, self, other)
    }

    /// `self AND other`
    pub fn and(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::And, self, other)
    }

    /// `self OR other`
    pub fn or(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Or, self, other)
    }

    /// `self + other`
    pub fn add(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Add, self, other)
    }

    /// `self - other`
    pub fn sub(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Sub, self, other)
    }

    /// `self * other`
    pub fn mul(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Mul, self, other)
    }

    /// `self / other`
    pub fn div(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Div, self, other)
    }

    /// `NOT self`
    pub fn not(self) -> Expr {
        Expr::Unary(UnaryOp::Not, Box::new(self))
    }
}

impl std::ops::Add for Expr {
    type Output = Expr;
    fn add(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Add, self, rhs)
    }
}

impl std::ops::Sub for Expr {
    type Output = Expr;
    fn sub(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Sub, self, rhs)
    }
}

impl std::ops::Mul for Expr {
    type Output = Expr;
    fn mul(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Mul, self, rhs)
    }
}

impl std::ops::Div for Expr {
    type Output = Expr;
    fn div(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Div, self, rhs)
    }
}

impl std::ops::Rem for Expr {
    type Output = Expr;
    fn rem(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Mod, self, rhs)
    }
}

impl std::ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr::Unary(UnaryOp::Not, Box::new(self))
    }
}

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::Unary(UnaryOp::Neg, Box::new(self))
    }
}
