//! Expression tests: the helpers and the general ones here (NULL
//! propagation, reading rows, the DSL, serde, a property test that eval
//! never panics), operators, casts and functions beside.

mod cast;
mod functions;
mod operators;

use super::cast::round_decimal;
use super::*;
use proptest::prelude::*;
use serde_json::{json, Map, Number};

/// A row over a JSON value with a key, a timestamp and computed columns.
#[derive(Debug)]
struct TestRow {
    value: Value,
    key: Option<String>,
    ts: i64,
    columns: Map<String, Value>,
}

impl Row for TestRow {
    fn field(&self, path: &[String]) -> Option<&Value> {
        get_path(&self.value, path)
    }
    fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }
    fn record_timestamp(&self) -> i64 {
        self.ts
    }
    fn column(&self, name: &str) -> Option<&Value> {
        self.columns.get(name)
    }
}

fn row(value: Value) -> TestRow {
    TestRow {
        value,
        key: None,
        ts: 0,
        columns: Map::new(),
    }
}

/// Evaluates against an empty row.
fn ev(e: Expr) -> Value {
    e.eval(&row(json!({})))
}

fn lit(v: Value) -> Expr {
    Expr::Literal(v)
}

fn bin(op: BinaryOp, a: Value, b: Value) -> Value {
    ev(Expr::binary(op, lit(a), lit(b)))
}

fn call(f: Function, args: Vec<Value>) -> Value {
    ev(Expr::Function(f, args.into_iter().map(lit).collect()))
}

fn cast_lit(v: Value, ty: DataType) -> Value {
    ev(Expr::Cast(Box::new(lit(v)), ty))
}

fn ts(s: &str) -> Option<i64> {
    parse_timestamp(&json!(s))
}

#[test]
fn null_propagates_through_arithmetic_comparison_concat_and_functions() {
    use BinaryOp::*;
    for op in [
        Add, Sub, Mul, Div, Mod, Eq, NotEq, Lt, LtEq, Gt, GtEq, Concat,
    ] {
        assert_eq!(bin(op, Value::Null, json!(1)), Value::Null, "{op:?}");
        assert_eq!(bin(op, json!("a"), Value::Null), Value::Null, "{op:?}");
    }
    assert_eq!(bin(Eq, Value::Null, Value::Null), Value::Null);
    assert_eq!(ev(-lit(Value::Null)), Value::Null);
    assert_eq!(call(Function::Upper, vec![Value::Null]), Value::Null);
    assert_eq!(
        call(Function::Substring, vec![json!("abc"), Value::Null]),
        Value::Null
    );
    assert_eq!(cast_lit(Value::Null, DataType::String), Value::Null);
    let like = Expr::Like {
        expr: Box::new(lit(Value::Null)),
        pattern: Box::new(Expr::lit("%")),
        negated: false,
    };
    assert_eq!(ev(like), Value::Null);
}

#[test]
fn missing_fields_unknown_columns_and_absent_key_are_null() {
    let r = row(json!({"a": {"b": 1}}));
    assert_eq!(Expr::field("a.c").eval(&r), Value::Null);
    assert_eq!(Expr::field("a.b.c").eval(&r), Value::Null);
    assert_eq!(
        Expr::field("A.b").eval(&r),
        Value::Null,
        "paths are case-sensitive"
    );
    assert_eq!(Expr::column("COUNT").eval(&r), Value::Null);
    assert_eq!(Expr::Key.eval(&r), Value::Null);
    assert!(Expr::IsNull {
        expr: Box::new(Expr::field("zzz")),
        negated: false
    }
    .is_true(&r));
    assert!(!Expr::IsNull {
        expr: Box::new(Expr::field("a.b")),
        negated: false
    }
    .is_true(&r));
}

#[test]
fn key_rowtime_and_columns_are_readable() {
    let mut r = row(json!({}));
    r.key = Some("user-1".into());
    r.ts = 42;
    r.columns.insert("WINDOWSTART".into(), json!(1000));
    assert_eq!(Expr::Key.eval(&r), json!("user-1"));
    assert_eq!(Expr::RecordTimestamp.eval(&r), json!(42));
    assert!(Expr::column("WINDOWSTART")
        .gt_eq(Expr::lit(1000))
        .is_true(&r));
}

#[test]
fn fields_collects_nested_paths_once() {
    let e = Expr::field("a.b")
        .add(Expr::field("c"))
        .gt(Expr::lit(1))
        .and(Expr::Function(
            Function::Coalesce,
            vec![Expr::field("a.b"), Expr::field("d.e.f")],
        ))
        .or(Expr::Case {
            operand: Some(Box::new(Expr::field("g"))),
            branches: vec![(Expr::field("h"), Expr::Key)],
            otherwise: Some(Box::new(Expr::Cast(
                Box::new(Expr::field("i")),
                DataType::String,
            ))),
        });
    let path = |s: &str| s.split('.').map(str::to_owned).collect::<Vec<_>>();
    let want: Vec<Vec<String>> = ["a.b", "c", "d.e.f", "g", "h", "i"].map(path).to_vec();
    assert_eq!(e.fields(), want);
    assert!(Expr::column("x").fields().is_empty());
}

#[test]
fn dsl_builds_plain_trees_that_evaluate() {
    let e = Expr::field("a.b").eq(Expr::lit(1));
    let want = Expr::Binary(
        BinaryOp::Eq,
        Box::new(Expr::Field(vec!["a".into(), "b".into()])),
        Box::new(Expr::Literal(json!(1))),
    );
    assert_eq!(e, want);
    let r = row(json!({"x": 10, "y": 4, "items": [5, 6]}));
    let x = || Expr::field("x");
    let y = || Expr::field("y");
    assert_eq!(x().add(y()).eval(&r), json!(14));
    assert_eq!(x().sub(y()).eval(&r), json!(6));
    assert_eq!(x().mul(y()).eval(&r), json!(40));
    assert_eq!(x().div(y()).eval(&r), json!(2));
    assert_eq!((x() % y()).eval(&r), json!(2));
    assert!(x()
        .not_eq(y())
        .and(x().gt(y()))
        .and(y().lt_eq(x()))
        .is_true(&r));
    assert!(y().gt_eq(x()).or(x().lt(y()).not()).is_true(&r));
    assert_eq!(Expr::field("items.1").eval(&r), json!(6));
}

#[test]
fn expressions_round_trip_through_serde() {
    let e = Expr::Case {
        operand: None,
        branches: vec![(
            Expr::field("a").lt(Expr::lit(1.5)),
            Expr::Function(Function::Upper, vec![Expr::lit("x")]),
        )],
        otherwise: Some(Box::new(Expr::Cast(
            Box::new(Expr::RecordTimestamp),
            DataType::Decimal {
                precision: 10,
                scale: 2,
            },
        ))),
    };
    let text = serde_json::to_string(&e).unwrap();
    let back: Expr = serde_json::from_str(&text).unwrap();
    assert_eq!(back, e);
}

// -- property test: eval never panics ---------------------------------

fn arb_json() -> impl Strategy<Value = Value> {
    let strings = prop::sample::select(vec![
        "",
        "a",
        "b%",
        "_",
        "héllo",
        "日本語",
        "2024-02-29T12:34:56.789+05:30",
        "1.005",
        " 42 ",
        "true",
        "day",
        "year",
        "week",
        "NaN",
        "-1e400",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![i64::MIN, i64::MAX, -1, 0, 1, 2, 3, 60]).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        strings.prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((arb_name(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn arb_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c", "0"]).prop_map(str::to_owned)
}

fn arb_type() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::Boolean),
        Just(DataType::Integer),
        Just(DataType::Double),
        Just(DataType::String),
        Just(DataType::Timestamp),
        (any::<u32>(), any::<u32>())
            .prop_map(|(precision, scale)| DataType::Decimal { precision, scale }),
        (0_u32..20, 0_u32..20)
            .prop_map(|(precision, scale)| DataType::Decimal { precision, scale }),
    ]
}

fn arb_binop() -> impl Strategy<Value = BinaryOp> {
    use BinaryOp::*;
    prop::sample::select(vec![
        Add, Sub, Mul, Div, Mod, Eq, NotEq, Lt, LtEq, Gt, GtEq, And, Or, Concat,
    ])
}

fn arb_expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        prop::collection::vec(arb_name(), 0..3).prop_map(Expr::Field),
        arb_name().prop_map(Expr::Column),
        Just(Expr::Key),
        Just(Expr::RecordTimestamp),
        arb_json().prop_map(Expr::Literal),
    ];
    leaf.prop_recursive(4, 48, 4, |inner| {
        let b = || inner.clone().prop_map(Box::new);
        prop_oneof![
            (prop::sample::select(vec![UnaryOp::Not, UnaryOp::Neg]), b())
                .prop_map(|(op, e)| Expr::Unary(op, e)),
            (arb_binop(), b(), b()).prop_map(|(op, l, r)| Expr::Binary(op, l, r)),
            (b(), any::<bool>()).prop_map(|(expr, negated)| Expr::IsNull { expr, negated }),
            (
                b(),
                prop::collection::vec(inner.clone(), 0..3),
                any::<bool>()
            )
                .prop_map(|(expr, list, negated)| Expr::InList {
                    expr,
                    list,
                    negated
                }),
            (b(), b(), b(), any::<bool>()).prop_map(|(expr, low, high, negated)| {
                Expr::Between {
                    expr,
                    low,
                    high,
                    negated,
                }
            }),
            (b(), b(), any::<bool>()).prop_map(|(expr, pattern, negated)| Expr::Like {
                expr,
                pattern,
                negated
            }),
            (
                prop::option::of(b()),
                prop::collection::vec((inner.clone(), inner.clone()), 0..3),
                prop::option::of(b()),
            )
                .prop_map(|(operand, branches, otherwise)| Expr::Case {
                    operand,
                    branches,
                    otherwise,
                }),
            (b(), arb_type()).prop_map(|(e, ty)| Expr::Cast(e, ty)),
            (
                prop::sample::select(Function::ALL.to_vec()),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(f, args)| Expr::Function(f, args)),
        ]
    })
}

fn arb_row() -> impl Strategy<Value = TestRow> {
    (
        arb_json(),
        prop::option::of(any::<String>()),
        any::<i64>(),
        prop::collection::vec((arb_name(), arb_json()), 0..3),
    )
        .prop_map(|(value, key, ts, cols)| TestRow {
            value,
            key,
            ts,
            columns: cols.into_iter().collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn eval_never_panics_on_random_trees_and_rows(e in arb_expr(), r in arb_row()) {
        let v = e.eval(&r);
        prop_assert_eq!(&v, &e.eval(&r), "eval is deterministic");
        prop_assert_eq!(e.is_true(&r), v == Value::Bool(true));
        for path in e.fields() {
            prop_assert!(e.walk_contains_field(&path));
        }
    }


    #[test]
    fn decimal_rounding_never_panics(x in any::<f64>(), scale in any::<i32>()) {
        if let Some(d) = round_decimal(x, scale) {
            let _ = d.to_f64();
            let _ = d.integer_digits();
        }
    }
}

impl Expr {
    fn walk_contains_field(&self, path: &[String]) -> bool {
        let mut found = false;
        self.walk(&mut |e| found |= matches!(e, Expr::Field(p) if p == path));
        found
    }
}
