//! [`Arithmetic`]: an expression of numbers, top-level fields and the
//! arithmetic operators, compiled against the fields a row holds by
//! index, so that a projection's computed number (Nexmark q1's
//! `0.908 * price`) is made from a field's number without building the
//! row's values or looking its name up.

use super::eval::{arith, negate, num};
use super::{BinaryOp, Expr, Num, UnaryOp};

/// An arithmetic expression over numbers and fields read by index: what
/// [`Expr::eval`] gives for it, made from the fields' numbers alone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arithmetic {
    /// A constant: its number, `None` for a literal that is not one
    /// (arithmetic on it is NULL).
    Constant(Option<Num>),
    /// The top-level field at this index among the row's fields.
    Field(usize),
    /// `-x`.
    Neg(Box<Arithmetic>),
    /// `x op y`, `op` one of `+ - * / %`.
    Binary(BinaryOp, Box<Arithmetic>, Box<Arithmetic>),
}

impl Arithmetic {
    /// `expr` compiled, `index` giving a top-level field's index among
    /// the row's fields; `None` unless `expr` is `+ - * / %` or `-x` over
    /// numbers, literals, top-level fields that `index` knows and more of
    /// the same. A literal or field alone is not compiled: its value is
    /// itself, not its number (`'web'`, `true`, a `u64` above `i64::MAX`).
    pub(crate) fn compile(expr: &Expr, index: &dyn Fn(&str) -> Option<usize>) -> Option<Self> {
        match expr {
            Expr::Unary(UnaryOp::Neg, _) | Expr::Binary(..) => Self::operand(expr, index),
            _ => None,
        }
    }

    /// An operand of arithmetic compiled: a literal that is not a number
    /// makes the result NULL, as a field that does not hold one.
    fn operand(expr: &Expr, index: &dyn Fn(&str) -> Option<usize>) -> Option<Self> {
        Some(match expr {
            Expr::Literal(value) => Arithmetic::Constant(num(value)),
            Expr::Field(path) => match path.as_slice() {
                [name] => Arithmetic::Field(index(name)?),
                _ => return None,
            },
            Expr::Unary(UnaryOp::Neg, operand) => {
                Arithmetic::Neg(Box::new(Self::operand(operand, index)?))
            }
            Expr::Binary(
                op
                @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod),
                left,
                right,
            ) => Arithmetic::Binary(
                *op,
                Box::new(Self::operand(left, index)?),
                Box::new(Self::operand(right, index)?),
            ),
            _ => return None,
        })
    }

    /// The number [`Expr::eval`] gives (`None` for NULL) on a row whose
    /// field `i` has the number `field(i)` (`Some(None)` for a value that
    /// is not a number, NULL included); `None` as soon as `field` gives
    /// `None` (it cannot tell). Every field is asked, even where NULL
    /// already decides the result.
    pub(crate) fn eval(
        &self,
        field: &impl Fn(usize) -> Option<Option<Num>>,
    ) -> Option<Option<Num>> {
        Some(match self {
            Arithmetic::Constant(n) => *n,
            Arithmetic::Field(i) => field(*i)?,
            Arithmetic::Neg(operand) => operand.eval(field)?.map(negate),
            Arithmetic::Binary(op, left, right) => {
                let (x, y) = (left.eval(field)?, right.eval(field)?);
                x.zip(y).and_then(|(x, y)| arith(*op, x, y))
            }
        })
    }

    /// Appends to `out` the JSON text of a result of [`Arithmetic::eval`],
    /// the text serde_json writes of its value (`eval.rs`'s `num_value`;
    /// NULL for `None`) without making the value: itoa's digits for an
    /// integer and zmij's shortest text for a finite double, as serde_json
    /// writes them; `null` for `None` and a result that is not finite.
    pub(crate) fn write_text(n: Option<Num>, out: &mut Vec<u8>) {
        match n {
            Some(Num::Int(i)) => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
            Some(Num::Float(f)) if f.is_finite() => {
                out.extend_from_slice(zmij::Buffer::new().format_finite(f).as_bytes())
            }
            _ => out.extend_from_slice(b"null"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::eval::num_value;
    use super::*;
    use crate::expr::{Expr, Row};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// The JSON value of a result of [`Arithmetic::eval`], as `Expr::eval`
    /// makes it: NULL for `None`, and for a result that is not finite.
    fn json_of(n: Option<Num>) -> Value {
        n.map_or(Value::Null, num_value)
    }

    /// A row of two top-level fields, `a` and `b`.
    struct Fields(Vec<Value>);

    impl Row for Fields {
        fn field(&self, path: &[String]) -> Option<&Value> {
            match path {
                [name] if name == "a" => self.0.first(),
                [name] if name == "b" => self.0.get(1),
                _ => None,
            }
        }
        fn key(&self) -> Option<&str> {
            None
        }
        fn record_timestamp(&self) -> i64 {
            0
        }
    }

    fn index(name: &str) -> Option<usize> {
        ["a", "b"].iter().position(|n| *n == name)
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            Just(json!("7")),
            Just(json!(true)),
            any::<i64>().prop_map(Value::from),
            (-3_i64..4).prop_map(Value::from),
            Just(json!(i64::MIN)),
            Just(json!(u64::MAX)),
            (-1e6_f64..1e6).prop_map(Value::from),
            Just(json!(0.0)),
            Just(json!(0.908)),
        ]
    }

    fn expr() -> impl Strategy<Value = Expr> {
        let leaf = prop_oneof![
            Just(Expr::Field(vec!["a".into()])),
            Just(Expr::Field(vec!["b".into()])),
            value().prop_map(Expr::Literal),
        ];
        let operators = leaf.clone().prop_recursive(4, 16, 2, |inner| {
            prop_oneof![
                inner
                    .clone()
                    .prop_map(|e| Expr::Unary(UnaryOp::Neg, Box::new(e))),
                (
                    prop_oneof![
                        Just(BinaryOp::Add),
                        Just(BinaryOp::Sub),
                        Just(BinaryOp::Mul),
                        Just(BinaryOp::Div),
                        Just(BinaryOp::Mod),
                    ],
                    inner.clone(),
                    inner
                )
                    .prop_map(|(op, l, r)| Expr::Binary(
                        op,
                        Box::new(l),
                        Box::new(r)
                    )),
            ]
        });
        // A literal or field alone too: it must not compile.
        prop_oneof![1 => leaf, 4 => operators]
    }

    proptest! {
        /// A result's text is serde_json's text of its value, for any
        /// integer and any double (NaN, infinities, -0.0 and subnormals
        /// among them).
        #[test]
        fn result_text_is_serde_json_text_of_the_value(
            n in prop_oneof![
                Just(None),
                any::<i64>().prop_map(|i| Some(Num::Int(i))),
                any::<f64>().prop_map(|f| Some(Num::Float(f))),
                prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-0.0), Just(5e-324), Just(1e21), Just(2.0)]
                    .prop_map(|f| Some(Num::Float(f))),
            ],
        ) {
            let mut out = b"x".to_vec();
            Arithmetic::write_text(n, &mut out);
            let want = serde_json::to_string(&json_of(n)).unwrap();
            prop_assert_eq!(&out[1..], want.as_bytes());
        }

        /// Compiled, an arithmetic expression gives what evaluating it
        /// gives, whatever its fields hold; nothing else compiles.
        #[test]
        fn compiled_arithmetic_equals_eval(e in expr(), a in value(), b in value()) {
            let Some(compiled) = Arithmetic::compile(&e, &index) else {
                prop_assert!(matches!(e, Expr::Field(_) | Expr::Literal(_)), "{:?}", e);
                return Ok(());
            };
            let row = Fields(vec![a, b]);
            let field = |i: usize| Some(num(&row.0[i]));
            let got = json_of(compiled.eval(&field).expect("every field tells"));
            prop_assert_eq!(got, e.eval(&row));
        }
    }

    #[test]
    fn only_arithmetic_over_known_top_level_fields_compiles() {
        let a = || Box::new(Expr::Field(vec!["a".into()]));
        let compiles = |e: &Expr| Arithmetic::compile(e, &index).is_some();
        assert!(compiles(&Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Literal(json!(0.908))),
            a()
        )));
        // Alone, a literal or field is its value, not its number.
        assert!(!compiles(&Expr::Literal(json!("web"))));
        assert!(!compiles(&Expr::Literal(json!(u64::MAX))));
        assert!(!compiles(&a()));
        assert!(!compiles(&Expr::Binary(
            BinaryOp::Mul,
            a(),
            Box::new(Expr::Field(vec!["c".into()]))
        )));
        assert!(!compiles(&Expr::Field(vec!["a".into(), "b".into()])));
        assert!(!compiles(&Expr::Binary(BinaryOp::Concat, a(), a())));
        assert!(!compiles(&Expr::Unary(UnaryOp::Not, a())));
        assert!(!compiles(&Expr::Key));
    }

    #[test]
    fn a_field_that_cannot_tell_leaves_the_row_to_eval() {
        let e = Arithmetic::compile(
            &Expr::Binary(
                BinaryOp::Mul,
                Box::new(Expr::Literal(Value::Null)),
                Box::new(Expr::Field(vec!["b".into()])),
            ),
            &index,
        )
        .unwrap();
        // NULL decides the product, but the field is still asked.
        assert_eq!(e.eval(&|_| None), None);
        assert_eq!(e.eval(&|_| Some(Some(Num::Int(2)))), Some(None));
    }
}
