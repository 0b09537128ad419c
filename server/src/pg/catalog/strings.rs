//! PostgreSQL's string functions as catalog queries use them (`lower`,
//! `trim`, `replace`, `substring`, `split_part`, `format`, ..), with
//! `NULL` in, `NULL` out (except `concat`, `concat_ws` and `format`,
//! which skip or print it as PostgreSQL does).

use super::functions::quote_ident;
use super::value::Value;
use super::CatalogError;

/// Calls string function `name` on `args`.
pub fn call(name: &str, args: &[Value]) -> Result<Value, CatalogError> {
    let text = |i: usize| args.get(i).and_then(Value::as_string);
    let int = |i: usize| -> Result<Option<i64>, CatalogError> {
        args.get(i).map_or(Ok(None), Value::as_int)
    };
    match name {
        "concat" => {
            return Ok(Value::text(
                args.iter().filter_map(Value::as_string).collect::<String>(),
            ))
        }
        "concat_ws" => {
            let Some(sep) = text(0) else {
                return Ok(Value::Null);
            };
            let parts: Vec<String> = args.iter().skip(1).filter_map(Value::as_string).collect();
            return Ok(Value::text(parts.join(&sep)));
        }
        "format" => return format(args),
        _ => {}
    }
    if args.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let s = text(0).unwrap_or_default();
    Ok(match name {
        "lower" => Value::text(s.to_lowercase()),
        "upper" => Value::text(s.to_uppercase()),
        "length" | "char_length" | "character_length" => Value::Int(s.chars().count() as i64),
        "btrim" | "trim" | "ltrim" | "rtrim" => {
            let set: Vec<char> = text(1).unwrap_or_else(|| " ".to_string()).chars().collect();
            let t = match name {
                "ltrim" => s.trim_start_matches(set.as_slice()),
                "rtrim" => s.trim_end_matches(set.as_slice()),
                _ => s.trim_matches(set.as_slice()),
            };
            Value::text(t)
        }
        "replace" => {
            let from = text(1).unwrap_or_default();
            if from.is_empty() {
                Value::text(s)
            } else {
                Value::text(s.replace(&from, &text(2).unwrap_or_default()))
            }
        }
        "substring" | "substr" => {
            let start = int(1)?.unwrap_or(1);
            let chars: Vec<char> = s.chars().collect();
            let end = match int(2)? {
                Some(n) if n < 0 => {
                    return Err(CatalogError::new(
                        "22011",
                        "negative substring length not allowed",
                    ))
                }
                Some(n) => start.saturating_add(n),
                None => i64::MAX,
            };
            let from = usize::try_from(start.max(1) - 1)
                .unwrap_or(0)
                .min(chars.len());
            let to = usize::try_from(end.max(1) - 1)
                .unwrap_or(usize::MAX)
                .min(chars.len());
            Value::text(chars[from..to.max(from)].iter().collect::<String>())
        }
        "split_part" => {
            let sep = text(1).unwrap_or_default();
            let n = int(2)?.unwrap_or(1);
            let parts: Vec<&str> = if sep.is_empty() {
                vec![s.as_str()]
            } else {
                s.split(sep.as_str()).collect()
            };
            let i = if n > 0 { n - 1 } else { parts.len() as i64 + n };
            Value::text(
                usize::try_from(i)
                    .ok()
                    .and_then(|i| parts.get(i))
                    .copied()
                    .unwrap_or(""),
            )
        }
        "left" | "right" => {
            let chars: Vec<char> = s.chars().collect();
            let n = int(1)?.unwrap_or(0);
            let len = chars.len() as i64;
            let keep =
                usize::try_from(if n >= 0 { n.min(len) } else { (len + n).max(0) }).unwrap_or(0);
            let out: String = if name == "left" {
                chars[..keep].iter().collect()
            } else {
                chars[chars.len() - keep..].iter().collect()
            };
            Value::text(out)
        }
        "starts_with" => Value::Bool(s.starts_with(&text(1).unwrap_or_default())),
        "strpos" | "position" => {
            let needle = text(1).unwrap_or_default();
            Value::Int(
                s.find(&needle)
                    .map_or(0, |b| s[..b].chars().count() as i64 + 1),
            )
        }
        _ => return Err(super::expr::unknown_function(name)),
    })
}

/// `format(fmt, args..)` with `%s`, `%I` (an identifier), `%L` (a
/// literal) and `%%`.
fn format(args: &[Value]) -> Result<Value, CatalogError> {
    let Some(fmt) = args.first().and_then(Value::as_string) else {
        return Ok(Value::Null);
    };
    let mut next = args.iter().skip(1);
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let spec = chars.next();
        if spec == Some('%') {
            out.push('%');
            continue;
        }
        let arg = next
            .next()
            .ok_or_else(|| CatalogError::new("22023", "too few arguments for format()"))?;
        match (spec, arg.as_string()) {
            (Some('s'), v) => out.push_str(&v.unwrap_or_default()),
            (Some('I'), Some(v)) => out.push_str(&quote_ident(&v)),
            (Some('I'), None) => {
                return Err(CatalogError::new(
                    "22004",
                    "null values cannot be formatted as an SQL identifier",
                ))
            }
            (Some('L'), Some(v)) => out.push_str(&format!("'{}'", v.replace('\'', "''"))),
            (Some('L'), None) => out.push_str("NULL"),
            _ => return Err(CatalogError::unsupported("this format() conversion")),
        }
    }
    Ok(Value::text(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_cut_and_formatted_as_postgresql_does() {
        let t = |s: &str| Value::text(s);
        assert_eq!(call("btrim", &[t("  a ")]).unwrap(), t("a"));
        assert_eq!(
            call("substring", &[t("hello"), Value::Int(2), Value::Int(3)]).unwrap(),
            t("ell")
        );
        assert_eq!(
            call("split_part", &[t("a,b"), t(","), Value::Int(2)]).unwrap(),
            t("b")
        );
        assert_eq!(
            call("format", &[t("%I.%I"), t("public"), t("My")]).unwrap(),
            t("public.\"My\"")
        );
        assert_eq!(call("lower", &[Value::Null]).unwrap(), Value::Null);
    }
}
