//! String, math, time and NULL-handling functions; names and arities.

use super::*;
use crate::time::DAY_MS;
use serde_json::json;

#[test]
fn string_functions_count_unicode_characters() {
    assert_eq!(call(Function::Length, vec![json!("héllo")]), json!(5));
    assert_eq!(call(Function::Length, vec![json!("日本語")]), json!(3));
    assert_eq!(call(Function::Length, vec![json!("")]), json!(0));
    assert_eq!(
        call(Function::Upper, vec![json!("straße")]),
        json!("STRASSE")
    );
    assert_eq!(call(Function::Lower, vec![json!("ÉCOLE")]), json!("école"));
    assert_eq!(call(Function::Trim, vec![json!("\t hi \n")]), json!("hi"));
    let r = call(
        Function::Replace,
        vec![json!("a.b.c"), json!("."), json!("→")],
    );
    assert_eq!(r, json!("a→b→c"));
    assert_eq!(call(Function::Length, vec![json!(12)]), Value::Null);
    assert_eq!(call(Function::Upper, vec![json!(["a"])]), Value::Null);
}

#[test]
fn substring_is_one_based_over_characters() {
    let sub = |args: Value| {
        let args = args.as_array().unwrap().clone();
        call(Function::Substring, args)
    };
    assert_eq!(sub(json!(["hello", 1, 2])), json!("he"));
    assert_eq!(sub(json!(["hello", 2])), json!("ello"));
    assert_eq!(sub(json!(["héllo", 2, 3])), json!("éll"));
    assert_eq!(sub(json!(["日本語", 3])), json!("語"));
    assert_eq!(sub(json!(["hello", 0, 2])), json!("he"));
    assert_eq!(sub(json!(["hello", -3])), json!("llo"));
    assert_eq!(sub(json!(["hello", -3, 2])), json!("ll"));
    assert_eq!(sub(json!(["hello", -10, 2])), json!("he"));
    assert_eq!(sub(json!(["hello", 9])), json!(""));
    assert_eq!(sub(json!(["hello", 2, -1])), json!(""));
    assert_eq!(sub(json!(["hello", 2, i64::MAX])), json!("ello"));
    assert_eq!(sub(json!(["hello", i64::MIN, i64::MAX])), json!("hello"));
    assert_eq!(sub(json!(["hello", 1.5])), Value::Null);
}

#[test]
fn format_timestamp_writes_utc_rfc3339_and_round_trips() {
    assert_eq!(
        format_timestamp(0).as_deref(),
        Some("1970-01-01T00:00:00.000Z")
    );
    assert_eq!(
        format_timestamp(-1).as_deref(),
        Some("1969-12-31T23:59:59.999Z")
    );
    assert_eq!(
        format_timestamp(1_709_210_096_789).as_deref(),
        Some("2024-02-29T12:34:56.789Z")
    );
    assert_eq!(format_timestamp(i64::MAX), None);
    assert_eq!(format_timestamp(i64::MIN), None);
    for ms in [
        0,
        -1,
        951_782_400_000,
        -62_167_219_200_000,
        253_402_300_799_999,
    ] {
        let s = format_timestamp(ms).unwrap();
        assert_eq!(ts(&s), Some(ms), "{s}");
    }
    let r = call(Function::FormatTimestamp, vec![json!(1000)]);
    assert_eq!(r, json!("1970-01-01T00:00:01.000Z"));
    let r = call(
        Function::ToTimestamp,
        vec![json!("1970-01-01T00:00:01+00:00")],
    );
    assert_eq!(r, json!(1000));
    assert_eq!(
        call(Function::ToTimestamp, vec![json!("nope")]),
        Value::Null
    );
}

#[test]
fn date_trunc_truncates_in_utc() {
    let t = ts("2024-05-15T13:45:30.250Z").unwrap();
    let trunc = |unit: &str| call(Function::DateTrunc, vec![json!(unit), json!(t)]);
    let at = |s: &str| json!(ts(s).unwrap());
    assert_eq!(trunc("second"), at("2024-05-15T13:45:30Z"));
    assert_eq!(trunc("MINUTE"), at("2024-05-15T13:45:00Z"));
    assert_eq!(trunc("hour"), at("2024-05-15T13:00:00Z"));
    assert_eq!(trunc("day"), at("2024-05-15T00:00:00Z"));
    assert_eq!(trunc("week"), at("2024-05-13T00:00:00Z"));
    assert_eq!(trunc("month"), at("2024-05-01T00:00:00Z"));
    assert_eq!(trunc("quarter"), at("2024-04-01T00:00:00Z"));
    assert_eq!(trunc("year"), at("2024-01-01T00:00:00Z"));
    assert_eq!(trunc("fortnight"), Value::Null);
    let before = call(Function::DateTrunc, vec![json!("day"), json!(-1)]);
    assert_eq!(before, json!(-DAY_MS));
    let edge = call(Function::DateTrunc, vec![json!("year"), json!(i64::MIN)]);
    assert_eq!(edge, Value::Null);
}

#[test]
fn math_functions_round_floor_ceil_abs_sqrt() {
    use Function::*;
    assert_eq!(call(Round, vec![json!(2.5)]), json!(3));
    assert!(call(Round, vec![json!(2.5)]).is_i64());
    assert_eq!(call(Round, vec![json!(-2.5)]), json!(-3));
    assert_eq!(call(Round, vec![json!(1.005), json!(2)]), json!(1.01));
    assert_eq!(call(Round, vec![json!(1234.5), json!(-2)]), json!(1200.0));
    assert_eq!(call(Round, vec![json!(1250), json!(-2)]), json!(1300));
    assert_eq!(call(Round, vec![json!(-1250), json!(-2)]), json!(-1300));
    assert_eq!(call(Round, vec![json!(7), json!(2)]), json!(7));
    assert_eq!(
        call(Round, vec![json!(i64::MAX), json!(-1)]),
        json!(9.223372036854776e18)
    );
    assert_eq!(call(Round, vec![json!(i64::MAX), json!(-19)]), json!(1e19));
    assert_eq!(call(Round, vec![json!(5), json!(-30)]), json!(0.0));
    assert_eq!(call(Round, vec![json!(1.5), json!(1.5)]), Value::Null);
    assert_eq!(call(Floor, vec![json!(-1.5)]), json!(-2.0));
    assert_eq!(call(Ceil, vec![json!(1.2)]), json!(2.0));
    assert_eq!(call(Floor, vec![json!(4)]), json!(4));
    assert_eq!(call(Abs, vec![json!(-4)]), json!(4));
    assert_eq!(call(Abs, vec![json!(-4.5)]), json!(4.5));
    assert_eq!(call(Sqrt, vec![json!(9)]), json!(3.0));
    assert_eq!(call(Sqrt, vec![json!(-1)]), Value::Null);
    assert_eq!(call(Sqrt, vec![json!("9")]), Value::Null);
}

#[test]
fn coalesce_ifnull_greatest_least_handle_nulls() {
    use Function::*;
    assert_eq!(
        call(Coalesce, vec![Value::Null, json!(2), json!(3)]),
        json!(2)
    );
    assert_eq!(call(Coalesce, vec![Value::Null]), Value::Null);
    assert_eq!(call(IfNull, vec![Value::Null, json!("d")]), json!("d"));
    assert_eq!(call(IfNull, vec![json!(0), json!("d")]), json!(0));
    assert_eq!(
        call(Greatest, vec![json!(1), Value::Null, json!(2.5)]),
        json!(2.5)
    );
    assert_eq!(
        call(Least, vec![json!(1), Value::Null, json!(2.5)]),
        json!(1)
    );
    assert_eq!(call(Greatest, vec![json!("a"), json!("b")]), json!("b"));
    assert_eq!(call(Greatest, vec![Value::Null, Value::Null]), Value::Null);
    assert_eq!(call(Greatest, vec![json!(1), json!("b")]), Value::Null);
}

#[test]
fn wrong_argument_counts_give_null() {
    assert_eq!(call(Function::Upper, vec![]), Value::Null);
    assert_eq!(
        call(Function::Upper, vec![json!("a"), json!("b")]),
        Value::Null
    );
    assert_eq!(call(Function::Coalesce, vec![]), Value::Null);
    assert_eq!(Function::Replace.apply(&[json!("a")]), Value::Null);
}

#[test]
fn function_names_are_case_insensitive_with_aliases() {
    assert_eq!(Function::from_name("ifnull"), Some(Function::IfNull));
    assert_eq!(Function::from_name("Coalesce"), Some(Function::Coalesce));
    assert_eq!(Function::from_name("len"), Some(Function::Length));
    assert_eq!(Function::from_name("LENGTH"), Some(Function::Length));
    assert_eq!(Function::from_name("substr"), Some(Function::Substring));
    assert_eq!(Function::from_name("SUBSTRING"), Some(Function::Substring));
    assert_eq!(Function::from_name("ceiling"), Some(Function::Ceil));
    assert_eq!(Function::from_name("CEIL"), Some(Function::Ceil));
    assert_eq!(Function::from_name("nope"), None);
    for f in Function::ALL {
        assert_eq!(Function::from_name(f.name()), Some(*f));
        assert_eq!(Function::from_name(&f.name().to_lowercase()), Some(*f));
        let (min, max) = f.arity();
        assert!(min >= 1 && max.is_none_or(|m| m >= min), "{f:?}");
    }
    assert_eq!(Function::Substring.arity(), (2, Some(3)));
    assert_eq!(Function::Coalesce.arity(), (1, None));
}
