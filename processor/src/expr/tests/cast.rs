//! `CAST` to each type, decimal rounding and precision.

use super::*;
use serde_json::json;

#[test]
fn cast_to_boolean_integer_double_and_string() {
    use DataType::*;
    assert_eq!(cast_lit(json!(" TRUE "), Boolean), json!(true));
    assert_eq!(cast_lit(json!("false"), Boolean), json!(false));
    assert_eq!(cast_lit(json!("yes"), Boolean), Value::Null);
    assert_eq!(cast_lit(json!(1), Boolean), Value::Null);
    assert_eq!(cast_lit(json!(" 42 "), Integer), json!(42));
    assert_eq!(cast_lit(json!(-3.9), Integer), json!(-3));
    assert_eq!(cast_lit(json!(1e30), Integer), Value::Null);
    assert_eq!(cast_lit(json!("1.5"), Integer), Value::Null);
    assert_eq!(cast_lit(json!("abc"), Integer), Value::Null);
    assert_eq!(cast_lit(json!(true), Integer), Value::Null);
    assert_eq!(cast_lit(json!(3), Double), json!(3.0));
    assert!(cast_lit(json!(3), Double).is_f64());
    assert_eq!(cast_lit(json!("2.5e3"), Double), json!(2500.0));
    assert_eq!(cast_lit(json!("NaN"), Double), Value::Null);
    assert_eq!(cast_lit(json!("inf"), Double), Value::Null);
    assert_eq!(cast_lit(json!(1.5), String), json!("1.5"));
    assert_eq!(cast_lit(json!(7), String), json!("7"));
    assert_eq!(cast_lit(json!(false), String), json!("false"));
    assert_eq!(cast_lit(json!({"a": [1]}), String), json!(r#"{"a":[1]}"#));
    assert_eq!(cast_lit(json!([1]), Integer), Value::Null);
}

#[test]
fn cast_to_decimal_rounds_half_away_from_zero_and_checks_precision() {
    let dec = |v: Value| {
        cast_lit(
            v,
            DataType::Decimal {
                precision: 10,
                scale: 2,
            },
        )
    };
    assert_eq!(dec(json!(1.005)), json!(1.01));
    assert_eq!(dec(json!(2.345)), json!(2.35));
    assert_eq!(dec(json!(-1.005)), json!(-1.01));
    assert_eq!(dec(json!(1.004)), json!(1.0));
    assert_eq!(dec(json!(0.999)), json!(1.0));
    assert_eq!(dec(json!(-0.001)), json!(0.0));
    assert_eq!(dec(json!(12)), json!(12.0));
    assert_eq!(dec(json!("6.12545")), json!(6.13));
    assert_eq!(dec(json!(12345678.994)), json!(12345678.99));
    // 8 integer digits allowed by DECIMAL(10,2); rounding can push it over.
    assert_eq!(dec(json!(99999999.995)), Value::Null);
    assert_eq!(dec(json!(123456789.1)), Value::Null);
    assert_eq!(dec(json!("abc")), Value::Null);
    assert_eq!(dec(json!(true)), Value::Null);
    let zero_scale = DataType::Decimal {
        precision: 3,
        scale: 0,
    };
    assert_eq!(cast_lit(json!(2.5), zero_scale), json!(3.0));
    assert_eq!(cast_lit(json!(999.5), zero_scale), Value::Null);
    let invalid = DataType::Decimal {
        precision: 2,
        scale: 3,
    };
    assert_eq!(cast_lit(json!(0.1), invalid), Value::Null);
    let huge = DataType::Decimal {
        precision: u32::MAX,
        scale: u32::MAX,
    };
    assert_eq!(cast_lit(json!(0.1), huge), json!(0.1));
}

#[test]
fn cast_to_timestamp_reads_milliseconds_and_rfc3339() {
    use DataType::Timestamp;
    assert_eq!(
        cast_lit(json!(1_700_000_000_000_i64), Timestamp),
        json!(1_700_000_000_000_i64)
    );
    assert_eq!(
        cast_lit(json!("1970-01-01T00:00:01Z"), Timestamp),
        json!(1000)
    );
    assert_eq!(cast_lit(json!("yesterday"), Timestamp), Value::Null);
    assert_eq!(cast_lit(json!(true), Timestamp), Value::Null);
}
