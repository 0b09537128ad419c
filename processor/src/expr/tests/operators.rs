//! Logic, arithmetic, comparison, `||`, `LIKE`, `CASE`, `IN` and
//! `BETWEEN`.

use super::*;
use serde_json::json;

#[test]
fn three_valued_logic_for_and_or_not() {
    let (t, f, n) = (json!(true), json!(false), Value::Null);
    let and = |a: &Value, b: &Value| bin(BinaryOp::And, a.clone(), b.clone());
    let or = |a: &Value, b: &Value| bin(BinaryOp::Or, a.clone(), b.clone());
    assert_eq!(and(&n, &f), f);
    assert_eq!(and(&f, &n), f);
    assert_eq!(and(&n, &t), n);
    assert_eq!(and(&n, &n), n);
    assert_eq!(and(&t, &t), t);
    assert_eq!(or(&n, &t), t);
    assert_eq!(or(&t, &n), t);
    assert_eq!(or(&n, &f), n);
    assert_eq!(or(&f, &f), f);
    assert_eq!(ev(lit(n.clone()).not()), n);
    assert_eq!(ev(lit(t).not()), f);
    // Non-booleans count as NULL.
    assert_eq!(and(&json!(1), &json!(true)), Value::Null);
    assert_eq!(and(&json!("x"), &json!(false)), json!(false));
}

#[test]
fn is_true_only_accepts_boolean_true() {
    let r = row(json!({"flag": true, "n": 1}));
    assert!(Expr::field("flag").is_true(&r));
    assert!(!Expr::field("n").is_true(&r));
    assert!(!Expr::field("missing").is_true(&r));
    assert!(!Expr::field("missing").eq(Expr::lit(1)).is_true(&r));
    assert!(!Expr::field("missing").eq(Expr::lit(1)).not().is_true(&r));
}

#[test]
fn integer_arithmetic_stays_integer_and_doubles_make_doubles() {
    assert_eq!(bin(BinaryOp::Add, json!(2), json!(3)), json!(5));
    assert!(bin(BinaryOp::Add, json!(2), json!(3)).is_i64());
    assert_eq!(bin(BinaryOp::Mul, json!(2), json!(1.5)), json!(3.0));
    assert!(bin(BinaryOp::Add, json!(2), json!(1.0)).is_f64());
    assert_eq!(bin(BinaryOp::Sub, json!(2.5), json!(3)), json!(-0.5));
    assert_eq!(ev(-Expr::lit(5)), json!(-5));
    assert_eq!(ev(Expr::lit(7) / Expr::lit(2.0)), json!(3.5));
    // No implicit casts.
    assert_eq!(bin(BinaryOp::Add, json!("1"), json!(1)), Value::Null);
    assert_eq!(bin(BinaryOp::Add, json!(true), json!(1)), Value::Null);
}

#[test]
fn integer_overflow_saturates_and_never_becomes_a_double() {
    let max = json!(i64::MAX);
    assert_eq!(bin(BinaryOp::Add, max.clone(), json!(1)), json!(i64::MAX));
    assert_eq!(bin(BinaryOp::Mul, max.clone(), json!(2)), json!(i64::MAX));
    assert_eq!(bin(BinaryOp::Mul, max.clone(), json!(-2)), json!(i64::MIN));
    assert_eq!(
        bin(BinaryOp::Sub, json!(i64::MIN), json!(1)),
        json!(i64::MIN)
    );
    assert_eq!(
        bin(BinaryOp::Div, json!(i64::MIN), json!(-1)),
        json!(i64::MAX)
    );
    assert_eq!(bin(BinaryOp::Mod, json!(i64::MIN), json!(-1)), json!(0));
    assert_eq!(ev(-Expr::lit(i64::MIN)), json!(i64::MAX));
    assert_eq!(call(Function::Abs, vec![json!(i64::MIN)]), json!(i64::MAX));
    // u64 beyond i64 is a double.
    assert_eq!(
        bin(BinaryOp::Add, json!(u64::MAX), json!(0)),
        json!(1.8446744073709552e19)
    );
    // A double overflowing to infinity is NULL.
    assert_eq!(bin(BinaryOp::Mul, json!(1e308), json!(10)), Value::Null);
}

#[test]
fn integer_division_truncates_and_modulo_takes_dividend_sign() {
    assert_eq!(bin(BinaryOp::Div, json!(7), json!(2)), json!(3));
    assert_eq!(bin(BinaryOp::Div, json!(-7), json!(2)), json!(-3));
    assert_eq!(bin(BinaryOp::Mod, json!(7), json!(3)), json!(1));
    assert_eq!(bin(BinaryOp::Mod, json!(-7), json!(2)), json!(-1));
    assert_eq!(bin(BinaryOp::Mod, json!(7), json!(-2)), json!(1));
    assert_eq!(bin(BinaryOp::Mod, json!(7.5), json!(2)), json!(1.5));
    assert_eq!(bin(BinaryOp::Div, json!(7), json!(2.0)), json!(3.5));
}

#[test]
fn division_and_modulo_by_zero_are_null() {
    for (a, b) in [
        (json!(1), json!(0)),
        (json!(1.5), json!(0)),
        (json!(1), json!(0.0)),
    ] {
        assert_eq!(bin(BinaryOp::Div, a.clone(), b.clone()), Value::Null);
        assert_eq!(bin(BinaryOp::Mod, a, b), Value::Null);
    }
    assert_eq!(bin(BinaryOp::Div, json!(0), json!(-0.0)), Value::Null);
}

#[test]
fn comparisons_across_integers_and_doubles() {
    use BinaryOp::*;
    assert_eq!(bin(Eq, json!(1), json!(1.0)), json!(true));
    assert_eq!(bin(Lt, json!(1), json!(1.5)), json!(true));
    assert_eq!(bin(Gt, json!(2.5), json!(2)), json!(true));
    assert_eq!(bin(GtEq, json!(-2), json!(-2.0)), json!(true));
    assert_eq!(bin(LtEq, json!(-2), json!(-2.5)), json!(false));
    assert_eq!(bin(NotEq, json!(3), json!(3.0)), json!(false));
    // Exact beyond 2^53: 2^53 + 1 as f64 rounds to 2^53.
    let big = (1_i64 << 53) + 1;
    assert_eq!(bin(Gt, json!(big), json!(9007199254740992.0)), json!(true));
    assert_eq!(bin(Eq, json!(big), json!(9007199254740992.0)), json!(false));
    assert_eq!(bin(Lt, json!(i64::MAX), json!(1e19)), json!(true));
    assert_eq!(bin(Gt, json!(i64::MIN), json!(-1e19)), json!(true));
    assert_eq!(bin(Lt, json!(i64::MAX), json!(u64::MAX)), json!(true));
}

#[test]
fn strings_and_booleans_compare_and_mixed_types_are_null() {
    use BinaryOp::*;
    assert_eq!(bin(Lt, json!("apple"), json!("banana")), json!(true));
    assert_eq!(bin(Lt, json!("Z"), json!("a")), json!(true));
    assert_eq!(bin(Eq, json!("é"), json!("é")), json!(true));
    assert_eq!(bin(Lt, json!(false), json!(true)), json!(true));
    assert_eq!(bin(Eq, json!("1"), json!(1)), Value::Null);
    assert_eq!(bin(Lt, json!(true), json!(1)), Value::Null);
    assert_eq!(bin(Eq, json!([1, 2]), json!([1.0, 2])), json!(true));
    assert_eq!(bin(Eq, json!({"a": 1}), json!({"a": 2})), json!(false));
    assert_eq!(bin(Lt, json!([1]), json!([2])), Value::Null);
    assert_eq!(bin(Eq, json!([1]), json!("[1]")), Value::Null);
}

#[test]
fn concat_operator_stringifies_scalars_and_propagates_null() {
    assert_eq!(bin(BinaryOp::Concat, json!("a"), json!(1)), json!("a1"));
    assert_eq!(
        bin(BinaryOp::Concat, json!(1.5), json!(true)),
        json!("1.5true")
    );
    assert_eq!(bin(BinaryOp::Concat, json!("x"), json!([1])), json!("x[1]"));
    assert_eq!(bin(BinaryOp::Concat, json!("x"), Value::Null), Value::Null);
    // The CONCAT function skips NULLs, as ksqlDB's does.
    let r = call(Function::Concat, vec![json!("a"), Value::Null, json!(2)]);
    assert_eq!(r, json!("a2"));
    assert_eq!(call(Function::Concat, vec![Value::Null]), json!(""));
}

fn like_expr(s: &str, p: &str, negated: bool) -> Value {
    ev(Expr::Like {
        expr: Box::new(Expr::lit(s)),
        pattern: Box::new(Expr::lit(p)),
        negated,
    })
}

#[test]
fn like_matches_percent_and_underscore_wildcards() {
    let cases = [
        ("hello", "hello", true),
        ("hello", "h%", true),
        ("hello", "%llo", true),
        ("hello", "%l%", true),
        ("hello", "h_llo", true),
        ("hello", "h_lo", false),
        ("hello", "%", true),
        ("", "%", true),
        ("", "_", false),
        ("héllo", "h_llo", true),
        ("日本語", "_本%", true),
        ("abcabd", "%ab_", true),
        ("aaa", "%a%a%a%", true),
        ("aa", "%a%a%a%", false),
        ("Hello", "hello", false),
        ("a.c", "a.c", true),
        ("abc", "a.c", false),
        ("a*c", "a*c", true),
        ("mississippi", "%issip%i", true),
        ("mississippi", "m%ss%ss%", true),
        ("mississippi", "m%ss%ss%ss%", false),
    ];
    for (s, p, want) in cases {
        assert_eq!(like_expr(s, p, false), json!(want), "{s} LIKE {p}");
        assert_eq!(like_expr(s, p, true), json!(!want), "{s} NOT LIKE {p}");
    }
    let non_string = Expr::Like {
        expr: Box::new(Expr::lit(5)),
        pattern: Box::new(Expr::lit("5")),
        negated: false,
    };
    assert_eq!(ev(non_string), Value::Null);
}

#[test]
fn like_does_not_blow_up_on_many_wildcards() {
    let text = "a".repeat(2000);
    let pattern = format!("{}b", "%a".repeat(50));
    assert_eq!(like_expr(&text, &pattern, false), json!(false));
}

#[test]
fn case_with_operand_compares_for_equality() {
    let e = Expr::Case {
        operand: Some(Box::new(Expr::field("n"))),
        branches: vec![
            (Expr::lit(1), Expr::lit("one")),
            (Expr::lit(2.0), Expr::lit("two")),
        ],
        otherwise: Some(Box::new(Expr::lit("many"))),
    };
    assert_eq!(e.eval(&row(json!({"n": 1}))), json!("one"));
    assert_eq!(e.eval(&row(json!({"n": 2}))), json!("two"));
    assert_eq!(e.eval(&row(json!({"n": 3}))), json!("many"));
    // NULL never equals a WHEN value.
    assert_eq!(e.eval(&row(json!({}))), json!("many"));
}

#[test]
fn case_without_operand_takes_first_true_branch() {
    let e = Expr::Case {
        operand: None,
        branches: vec![
            (Expr::field("n").lt(Expr::lit(0)), Expr::lit("neg")),
            (Expr::field("n").lt(Expr::lit(10)), Expr::lit("small")),
            (
                Expr::field("n").lt(Expr::lit(100)),
                Expr::lit("never reached first"),
            ),
        ],
        otherwise: None,
    };
    assert_eq!(e.eval(&row(json!({"n": -1}))), json!("neg"));
    assert_eq!(e.eval(&row(json!({"n": 5}))), json!("small"));
    assert_eq!(e.eval(&row(json!({"n": 500}))), Value::Null);
    assert_eq!(e.eval(&row(json!({"n": "x"}))), Value::Null);
}

#[test]
fn in_list_and_between_follow_sql_null_rules() {
    let in_list = |v: Value, items: Vec<Value>, negated: bool| {
        ev(Expr::InList {
            expr: Box::new(lit(v)),
            list: items.into_iter().map(lit).collect(),
            negated,
        })
    };
    assert_eq!(
        in_list(json!(2), vec![json!(1), json!(2.0)], false),
        json!(true)
    );
    assert_eq!(
        in_list(json!(3), vec![json!(1), json!(2)], false),
        json!(false)
    );
    assert_eq!(
        in_list(json!(3), vec![json!(1), json!(2)], true),
        json!(true)
    );
    assert_eq!(
        in_list(json!(3), vec![json!(1), Value::Null], false),
        Value::Null
    );
    assert_eq!(
        in_list(json!(1), vec![json!(1), Value::Null], false),
        json!(true)
    );
    assert_eq!(
        in_list(json!(3), vec![json!(1), Value::Null], true),
        Value::Null
    );
    assert_eq!(in_list(Value::Null, vec![json!(1)], false), Value::Null);
    assert_eq!(in_list(json!("a"), vec![], false), json!(false));

    let between = |v: Value, lo: Value, hi: Value, negated: bool| {
        ev(Expr::Between {
            expr: Box::new(lit(v)),
            low: Box::new(lit(lo)),
            high: Box::new(lit(hi)),
            negated,
        })
    };
    assert_eq!(between(json!(5), json!(1), json!(5), false), json!(true));
    assert_eq!(between(json!(0.5), json!(1), json!(5), false), json!(false));
    assert_eq!(between(json!(0.5), json!(1), json!(5), true), json!(true));
    assert_eq!(
        between(json!("b"), json!("a"), json!("c"), false),
        json!(true)
    );
    assert_eq!(
        between(json!(0), json!(1), Value::Null, false),
        json!(false)
    );
    assert_eq!(between(json!(3), json!(1), Value::Null, false), Value::Null);
    assert_eq!(between(json!(3), json!("a"), json!(5), false), Value::Null);
}
