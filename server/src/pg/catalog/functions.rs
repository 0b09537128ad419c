//! PostgreSQL's functions as catalog queries call them, answered from
//! Kappa's catalog: visibility and ownership (`pg_table_is_visible`,
//! `pg_get_userbyid`), types (`format_type`), the session
//! (`current_schema`, `current_setting`, `version`), strings and arrays
//! (`quote_ident`, `string_to_array`, `array_to_string`, ..), privileges
//! (`has_table_privilege`: true — the catalogs list only what the
//! principal may see), and the definitions of objects Kappa does not have
//! (`pg_get_expr`, `obj_description`, ..: `NULL`). Any other function is
//! an error (`42883`) naming it.

use sqlparser::ast::BinaryOperator;

use super::eval::{check_rows, Evaluator};
use super::expr::unknown_function;
use super::relations::{on_search_path, schema_name, type_by_name, SETTINGS};
use super::schema::{builtin_type, format_type, DATABASE, OWNER, OWNER_OID};
use super::value::{compare, parse_array, Ty, Value};
use super::CatalogError;

/// The value of a keyword PostgreSQL reads as a function without
/// parentheses (`current_user`, `current_catalog`, ..).
pub fn keyword_value(name: &str) -> Option<Value> {
    Some(match name {
        "current_user" | "user" | "session_user" | "current_role" => Value::text(OWNER),
        "current_catalog" => Value::text(DATABASE),
        "current_schema" => Value::text("public"),
        _ => return None,
    })
}

/// The type a function's result is declared with, where it matters to
/// clients.
pub fn return_ty(name: &str) -> Option<Ty> {
    Some(match name {
        "pg_get_userbyid" | "current_database" | "current_schema" | "current_user" | "user"
        | "session_user" => Ty::Name,
        "format_type"
        | "quote_ident"
        | "version"
        | "current_setting"
        | "array_to_string"
        | "pg_get_expr"
        | "obj_description"
        | "col_description"
        | "pg_encoding_to_char"
        | "pg_size_pretty"
        | "string_agg" => Ty::Text,
        "count"
        | "row_number"
        | "pg_table_size"
        | "pg_relation_size"
        | "pg_total_relation_size" => Ty::Int8,
        "pg_table_is_visible"
        | "pg_type_is_visible"
        | "has_table_privilege"
        | "has_schema_privilege"
        | "has_any_column_privilege"
        | "has_column_privilege"
        | "has_database_privilege"
        | "pg_relation_is_publishable"
        | "pg_is_in_recovery" => Ty::Bool,
        _ => return None,
    })
}

/// Calls the scalar function `name` on `args`.
pub fn call(ev: &Evaluator, name: &str, args: Vec<Value>) -> Result<Value, CatalogError> {
    let arg = |i: usize| args.get(i).cloned().unwrap_or(Value::Null);
    let text_arg = |i: usize| arg(i).as_string();
    Ok(match name {
        "pg_table_is_visible" => match arg(0).as_int()? {
            None => Value::Null,
            Some(oid) => Value::Bool(
                ev.catalog
                    .relation_by_oid(oid)
                    .is_some_and(|r| on_search_path(r.schema)),
            ),
        },
        "pg_type_is_visible" => match arg(0).as_int()? {
            None => Value::Null,
            Some(oid) => Value::Bool(builtin_type(oid).is_some()),
        },
        "pg_get_userbyid" => match arg(0).as_int()? {
            None => Value::Null,
            Some(OWNER_OID) => Value::text(OWNER),
            Some(oid) => Value::text(format!("unknown (OID={oid})")),
        },
        "format_type" => match arg(0).as_int()? {
            None => Value::Null,
            Some(oid) => Value::text(format_type(oid, arg(1).as_int()?.unwrap_or(-1))),
        },
        // Definitions and comments of objects Kappa does not have.
        "pg_get_expr"
        | "pg_get_constraintdef"
        | "pg_get_indexdef"
        | "pg_get_viewdef"
        | "pg_get_triggerdef"
        | "pg_get_ruledef"
        | "pg_get_partkeydef"
        | "pg_get_statisticsobjdef_columns"
        | "pg_get_function_arguments"
        | "pg_get_function_result"
        | "obj_description"
        | "col_description"
        | "shobj_description"
        | "pg_get_serial_sequence" => Value::Null,
        // The catalogs list only what the principal may read.
        "has_table_privilege"
        | "has_schema_privilege"
        | "has_any_column_privilege"
        | "has_column_privilege"
        | "has_database_privilege" => Value::Bool(true),
        "pg_relation_is_publishable" | "pg_is_in_recovery" | "pg_is_other_temp_schema" => {
            Value::Bool(false)
        }
        "pg_table_size" | "pg_relation_size" | "pg_total_relation_size" | "pg_indexes_size" => {
            Value::Int(0)
        }
        "pg_size_pretty" => match arg(0).as_int()? {
            None => Value::Null,
            Some(n) => Value::text(format!("{n} bytes")),
        },
        "pg_encoding_to_char" => Value::text("UTF8"),
        "current_database" => Value::text(DATABASE),
        "current_schema" => Value::text("public"),
        "current_user" | "user" | "session_user" | "current_role" => Value::text(OWNER),
        "current_schemas" => {
            let mut schemas = vec![Value::text("public")];
            if arg(0).truth()? == Some(true) {
                schemas.insert(0, Value::text("pg_catalog"));
            }
            Value::Array(schemas)
        }
        "current_setting" => {
            let wanted = text_arg(0).unwrap_or_default();
            match SETTINGS
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(&wanted))
            {
                Some((_, v)) => Value::text(*v),
                None if arg(1).truth()? == Some(true) => Value::Null,
                None => {
                    return Err(CatalogError::new(
                        "42704",
                        format!("unrecognized configuration parameter \"{wanted}\""),
                    ))
                }
            }
        }
        "version" => Value::text(format!(
            "PostgreSQL {} on Kappa {}",
            crate::pg::session::SERVER_VERSION,
            env!("CARGO_PKG_VERSION")
        )),
        "pg_backend_pid" => Value::Int(i64::from(std::process::id())),
        "to_regclass" => match text_arg(0) {
            None => Value::Null,
            Some(t) => match regclass(ev, &t) {
                Ok(v) => v,
                Err(_) => Value::Null,
            },
        },
        "quote_ident" => text_arg(0).map_or(Value::Null, |s| Value::text(quote_ident(&s))),
        "parse_ident" => text_arg(0).map_or(Ok(Value::Null), |s| parse_ident(&s))?,
        "coalesce" => args
            .into_iter()
            .find(|v| !v.is_null())
            .unwrap_or(Value::Null),
        "nullif" => match compare(&arg(0), &arg(1))? {
            Some(std::cmp::Ordering::Equal) => Value::Null,
            _ => arg(0),
        },
        "greatest" | "least" => {
            let mut best = Value::Null;
            for v in args.into_iter().filter(|v| !v.is_null()) {
                let better = best.is_null()
                    || match compare(&v, &best)? {
                        Some(o) => (o == std::cmp::Ordering::Greater) == (name == "greatest"),
                        None => false,
                    };
                if better {
                    best = v;
                }
            }
            best
        }
        "lower" | "upper" | "length" | "char_length" | "character_length" | "btrim" | "trim"
        | "ltrim" | "rtrim" | "replace" | "substring" | "substr" | "split_part" | "left"
        | "right" | "concat" | "concat_ws" | "format" | "starts_with" | "position" | "strpos" => {
            return super::strings::call(name, &args)
        }
        "string_to_array" => match (text_arg(0), text_arg(1)) {
            (Some(s), Some(sep)) if !sep.is_empty() => {
                Value::Array(s.split(sep.as_str()).map(Value::text).collect())
            }
            (Some(s), Some(_)) => {
                Value::Array(s.chars().map(|c| Value::text(c.to_string())).collect())
            }
            _ => Value::Null,
        },
        "array_to_string" => match (arg(0), text_arg(1)) {
            (Value::Array(items), Some(sep)) => {
                let null = text_arg(2);
                let parts: Vec<String> = items
                    .iter()
                    .filter_map(|v| v.as_string().or_else(|| null.clone()))
                    .collect();
                Value::text(parts.join(&sep))
            }
            (Value::Text(t), Some(sep)) => call(
                ev,
                "array_to_string",
                vec![Value::Array(parse_array(&t)?), Value::text(sep)],
            )?,
            _ => Value::Null,
        },
        "array_length" | "array_upper" | "cardinality" => match array(arg(0))? {
            Some(items) if !items.is_empty() => Value::Int(items.len() as i64),
            Some(_) if name == "cardinality" => Value::Int(0),
            _ => Value::Null,
        },
        "array_lower" => match array(arg(0))? {
            Some(items) if !items.is_empty() => Value::Int(1),
            _ => Value::Null,
        },
        _ => return Err(unknown_function(name)),
    })
}

fn array(v: Value) -> Result<Option<Vec<Value>>, CatalogError> {
    match v {
        Value::Null => Ok(None),
        Value::Array(items) => Ok(Some(items)),
        Value::Text(t) => parse_array(&t).map(Some),
        other => Err(CatalogError::mismatch(format!("{other:?} is not an array"))),
    }
}

/// `quote_ident(s)`: `s` as an identifier, quoted unless it is a plain
/// lower-case name that is not a reserved word.
pub fn quote_ident(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$')
        && !RESERVED.contains(&s);
    if plain {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

/// PostgreSQL's reserved key words (`quote_ident` quotes them).
const RESERVED: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "current_catalog",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "localtime",
    "localtimestamp",
    "not",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "session_user",
    "some",
    "symmetric",
    "table",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

/// `parse_ident(s)`: the parts of a qualified name, unquoted ones
/// lower-cased.
fn parse_ident(s: &str) -> Result<Value, CatalogError> {
    let mut parts = Vec::new();
    let mut chars = s.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    Some('"') => break,
                    Some(c) => part.push(c),
                    None => return Err(CatalogError::invalid_text("identifier", s)),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                part.push(c.to_ascii_lowercase());
                chars.next();
            }
            part = part.trim().to_string();
        }
        if part.is_empty() {
            return Err(CatalogError::invalid_text("identifier", s));
        }
        parts.push(Value::text(part));
        match chars.next() {
            None => break,
            Some('.') => continue,
            Some(_) => return Err(CatalogError::invalid_text("identifier", s)),
        }
    }
    Ok(Value::Array(parts))
}

/// A relation's name as `regclass`: its oid, shown by name.
fn regclass(ev: &Evaluator, name: &str) -> Result<Value, CatalogError> {
    let Value::Array(parts) = parse_ident(name)? else {
        return Err(CatalogError::invalid_text("regclass", name));
    };
    let parts: Vec<String> = parts.iter().filter_map(Value::as_string).collect();
    let (schema, rel) = match parts.as_slice() {
        [rel] => (None, rel),
        [schema, rel] => (Some(schema.as_str()), rel),
        _ => return Err(CatalogError::invalid_text("regclass", name)),
    };
    let r = ev
        .catalog
        .relation_by_name(schema, rel)
        .ok_or_else(|| CatalogError::new("42P01", format!("relation \"{name}\" does not exist")))?;
    Ok(Value::Reg(r.oid, r.name.clone()))
}

/// `v` cast to type `ty`.
pub fn cast(ev: &Evaluator, v: Value, ty: Ty) -> Result<Value, CatalogError> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    Ok(match ty {
        Ty::Bool => Value::Bool(v.truth()?.unwrap_or(false)),
        Ty::Char | Ty::Name | Ty::Text => match v.as_string() {
            Some(s) if ty == Ty::Char => {
                Value::text(s.chars().next().map(String::from).unwrap_or_default())
            }
            Some(s) => Value::text(s),
            None => Value::Null,
        },
        Ty::Int2 | Ty::Int4 | Ty::Int8 | Ty::Oid => match v {
            Value::Reg(oid, _) => Value::Int(oid),
            other => other.as_int()?.map_or(Value::Null, Value::Int),
        },
        Ty::Float4 | Ty::Float8 => match v {
            Value::Float(f) => Value::Float(f),
            Value::Text(t) => Value::Float(
                t.trim()
                    .parse::<f64>()
                    .map_err(|_| CatalogError::invalid_text("double precision", &t))?,
            ),
            other => other
                .as_int()?
                .map_or(Value::Null, |i| Value::Float(i as f64)),
        },
        Ty::RegClass => match v {
            Value::Text(t) if t.trim().parse::<i64>().is_err() => regclass(ev, &t)?,
            other => {
                let oid = other.as_int()?.unwrap_or(0);
                let name = ev
                    .catalog
                    .relation_by_oid(oid)
                    .map_or_else(|| oid.to_string(), |r| r.name.clone());
                Value::Reg(oid, name)
            }
        },
        Ty::RegType => match v {
            Value::Text(t) if t.trim().parse::<i64>().is_err() => {
                let found = type_by_name(t.trim()).ok_or_else(|| {
                    CatalogError::new("42704", format!("type \"{t}\" does not exist"))
                })?;
                Value::Reg(found.oid, found.formatted.to_string())
            }
            other => {
                let oid = other.as_int()?.unwrap_or(0);
                Value::Reg(
                    oid,
                    builtin_type(oid).map_or_else(|| oid.to_string(), |t| t.formatted.to_string()),
                )
            }
        },
        Ty::RegNamespace => {
            let oid = v.as_int()?.unwrap_or(0);
            Value::Reg(
                oid,
                schema_name(oid).map_or_else(|| oid.to_string(), str::to_string),
            )
        }
        Ty::RegProc => match v {
            Value::Int(0) => Value::Reg(0, "-".to_string()),
            other => Value::text(other.as_string().unwrap_or_default()),
        },
        Ty::TextArray | Ty::OidArray | Ty::Int2Array => {
            let items = match v {
                Value::Array(items) => items,
                Value::Text(t) => parse_array(&t)?,
                other => {
                    return Err(CatalogError::mismatch(format!(
                        "cannot cast {other:?} to an array"
                    )))
                }
            };
            let element = if ty == Ty::TextArray {
                Ty::Text
            } else {
                Ty::Int8
            };
            Value::Array(
                items
                    .into_iter()
                    .map(|i| cast(ev, i, element))
                    .collect::<Result<_, _>>()?,
            )
        }
    })
}

/// `l op r` for an arithmetic operator.
pub fn arithmetic(op: &BinaryOperator, l: &Value, r: &Value) -> Result<Value, CatalogError> {
    if l.is_null() || r.is_null() {
        return Ok(Value::Null);
    }
    let float = |v: &Value| match v {
        Value::Float(f) => Ok(*f),
        other => other.as_int().map(|i| i.unwrap_or(0) as f64),
    };
    if matches!(l, Value::Float(_)) || matches!(r, Value::Float(_)) {
        let (a, b) = (float(l)?, float(r)?);
        return Ok(Value::Float(match op {
            BinaryOperator::Plus => a + b,
            BinaryOperator::Minus => a - b,
            BinaryOperator::Multiply => a * b,
            BinaryOperator::Divide if b == 0.0 => return Err(division_by_zero()),
            BinaryOperator::Divide => a / b,
            _ => a % b,
        }));
    }
    let (a, b) = (l.as_int()?.unwrap_or(0), r.as_int()?.unwrap_or(0));
    let overflow = || CatalogError::new("22003", "integer out of range");
    Ok(Value::Int(match op {
        BinaryOperator::Plus => a.checked_add(b).ok_or_else(overflow)?,
        BinaryOperator::Minus => a.checked_sub(b).ok_or_else(overflow)?,
        BinaryOperator::Multiply => a.checked_mul(b).ok_or_else(overflow)?,
        BinaryOperator::Divide => a.checked_div(b).ok_or_else(division_by_zero)?,
        _ => a.checked_rem(b).ok_or_else(division_by_zero)?,
    }))
}

fn division_by_zero() -> CatalogError {
    CatalogError::new("22012", "division by zero")
}

/// The aggregate `name` over the argument values of a group's rows.
pub fn aggregate(name: &str, values: Vec<Vec<Value>>) -> Result<Value, CatalogError> {
    let firsts = || {
        values
            .iter()
            .map(|v| v.first().cloned().unwrap_or(Value::Null))
            .filter(|v| !v.is_null())
    };
    Ok(match name {
        "count" => Value::Int(firsts().count() as i64),
        "array_agg" => {
            if values.is_empty() {
                Value::Null
            } else {
                Value::Array(
                    values
                        .iter()
                        .map(|v| v.first().cloned().unwrap_or(Value::Null))
                        .collect(),
                )
            }
        }
        "string_agg" => {
            let parts: Vec<(String, String)> = values
                .iter()
                .filter_map(|v| {
                    Some((
                        v.first()?.as_string()?,
                        v.get(1).and_then(Value::as_string).unwrap_or_default(),
                    ))
                })
                .collect();
            if parts.is_empty() {
                Value::Null
            } else {
                let mut out = String::new();
                for (i, (s, sep)) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    out.push_str(s);
                }
                Value::text(out)
            }
        }
        "min" | "max" => {
            let mut best = Value::Null;
            for v in firsts() {
                let better = best.is_null()
                    || compare(&v, &best)?
                        .is_some_and(|o| (o == std::cmp::Ordering::Greater) == (name == "max"));
                if better {
                    best = v;
                }
            }
            best
        }
        "sum" | "avg" => {
            let all: Vec<Value> = firsts().collect();
            if all.is_empty() {
                Value::Null
            } else {
                let mut total = Value::Int(0);
                for v in &all {
                    total = arithmetic(&BinaryOperator::Plus, &total, v)?;
                }
                if name == "avg" {
                    let t = match total {
                        Value::Float(f) => f,
                        other => other.as_int()?.unwrap_or(0) as f64,
                    };
                    Value::Float(t / all.len() as f64)
                } else {
                    total
                }
            }
        }
        "bool_and" | "bool_or" => {
            let mut result: Option<bool> = None;
            for v in firsts() {
                let b = v.truth()?.unwrap_or(false);
                result = Some(match result {
                    None => b,
                    Some(r) if name == "bool_and" => r && b,
                    Some(r) => r || b,
                });
            }
            result.map_or(Value::Null, Value::Bool)
        }
        _ => return Err(unknown_function(name)),
    })
}

/// The rows of `generate_series(start, stop[, step])`, at most
/// [`super::MAX_ROWS`].
pub fn generate_series(args: &[Value]) -> Result<Vec<Value>, CatalogError> {
    let int = |i: usize| {
        args.get(i)
            .map(Value::as_int)
            .transpose()
            .map(Option::flatten)
    };
    let (Some(start), Some(stop)) = (int(0)?, int(1)?) else {
        return Ok(Vec::new());
    };
    let step = int(2)?.unwrap_or(1);
    if step == 0 {
        return Err(CatalogError::new("22023", "step size cannot equal zero"));
    }
    let count = if (step > 0 && start > stop) || (step < 0 && start < stop) {
        0
    } else {
        ((stop as i128 - start as i128) / step as i128 + 1) as u128
    };
    check_rows(usize::try_from(count).unwrap_or(usize::MAX))?;
    Ok((0..count as i64)
        .map(|i| Value::Int(start + i * step))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_ident_quotes_what_needs_it() {
        assert_eq!(quote_ident("purchase_stats"), "purchase_stats");
        assert_eq!(quote_ident("Mixed"), "\"Mixed\"");
        assert_eq!(quote_ident("user"), "\"user\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn parse_ident_splits_and_folds() {
        assert_eq!(
            parse_ident("Public.\"My.Table\"").unwrap(),
            Value::Array(vec![Value::text("public"), Value::text("My.Table")])
        );
        assert!(parse_ident("a..b").is_err());
    }

    #[test]
    fn generate_series_is_bounded() {
        assert_eq!(
            generate_series(&[Value::Int(1), Value::Int(3)]).unwrap(),
            vec![Value::Int(1), Value::Int(2), Value::Int(3)]
        );
        assert!(generate_series(&[Value::Int(0), Value::Int(i64::MAX)]).is_err());
    }
}
