//! The values a catalog query computes with, their PostgreSQL types, and
//! how they compare, cast and print (PostgreSQL's text format).
//!
//! A quoted literal is untyped until compared: `c.oid = '16384'` reads the
//! string as an `oid`, `c.relkind = 'r'` as a `"char"`, as PostgreSQL
//! coerces an `unknown` literal to the other side's type.

use std::cmp::Ordering;

use pgwire::api::Type;

use super::CatalogError;

/// A catalog column's or an expression's PostgreSQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// `bool`.
    Bool,
    /// `"char"` (one byte: `relkind`, `typtype`, ..).
    Char,
    /// `name`.
    Name,
    /// `text`.
    Text,
    /// `int2`.
    Int2,
    /// `int4`.
    Int4,
    /// `int8`.
    Int8,
    /// `oid`.
    Oid,
    /// `float4`.
    Float4,
    /// `float8`.
    Float8,
    /// `regclass`: an oid printed as a relation's name.
    RegClass,
    /// `regtype`: an oid printed as a type's name.
    RegType,
    /// `regproc`: a function's name (`-` when none).
    RegProc,
    /// `regnamespace`: an oid printed as a schema's name.
    RegNamespace,
    /// `text[]` (also `name[]`, `aclitem[]`, `"char"[]`).
    TextArray,
    /// `oid[]` (also `oidvector`).
    OidArray,
    /// `int2[]` (also `int2vector`).
    Int2Array,
}

impl Ty {
    /// The type clients are told a column of this type has.
    pub fn pg_type(self) -> Type {
        match self {
            Ty::Bool => Type::BOOL,
            Ty::Char => Type::CHAR,
            Ty::Name => Type::NAME,
            Ty::Text => Type::TEXT,
            Ty::Int2 => Type::INT2,
            Ty::Int4 => Type::INT4,
            Ty::Int8 => Type::INT8,
            Ty::Oid => Type::OID,
            Ty::Float4 => Type::FLOAT4,
            Ty::Float8 => Type::FLOAT8,
            Ty::RegClass => Type::REGCLASS,
            Ty::RegType => Type::REGTYPE,
            Ty::RegProc => Type::REGPROC,
            Ty::RegNamespace => Type::TEXT,
            Ty::TextArray => Type::TEXT_ARRAY,
            Ty::OidArray => Type::OID_ARRAY,
            Ty::Int2Array => Type::INT2_ARRAY,
        }
    }

    /// The type a cast to `name` (lower-case, without `pg_catalog.`)
    /// gives, if a catalog query may cast to it.
    pub fn named(name: &str) -> Option<Ty> {
        Some(match name {
            "bool" | "boolean" => Ty::Bool,
            "char" | "\"char\"" | "bpchar" | "character" => Ty::Char,
            "name" => Ty::Name,
            "text" | "varchar" | "character varying" | "string" | "pg_node_tree" => Ty::Text,
            "int2" | "smallint" => Ty::Int2,
            "int4" | "int" | "integer" => Ty::Int4,
            "int8" | "bigint" => Ty::Int8,
            "oid" | "regproc_oid" => Ty::Oid,
            "float4" | "real" => Ty::Float4,
            "float8" | "double precision" | "numeric" | "decimal" => Ty::Float8,
            "regclass" => Ty::RegClass,
            "regtype" => Ty::RegType,
            "regproc" | "regprocedure" => Ty::RegProc,
            "regnamespace" => Ty::RegNamespace,
            "text[]" | "name[]" | "_text" | "_name" | "char[]" | "\"char\"[]" | "varchar[]" => {
                Ty::TextArray
            }
            "oid[]" | "_oid" | "oidvector" => Ty::OidArray,
            "int2[]" | "_int2" | "int2vector" | "smallint[]" | "int4[]" | "int[]" | "integer[]"
            | "_int4" => Ty::Int2Array,
            _ => return None,
        })
    }
}

/// A value of a catalog query.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL `NULL`.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer of any width (and oids).
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string (text, name, `"char"`, and untyped literals).
    Text(String),
    /// An oid shown as a name (`regclass`, `regtype`, ..): compares as the
    /// oid, prints as the name.
    Reg(i64, String),
    /// An array (1-based in SQL).
    Array(Vec<Value>),
}

impl Value {
    /// A text value.
    pub fn text(s: impl Into<String>) -> Value {
        Value::Text(s.into())
    }

    /// Whether this is `NULL`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The type of a value whose column declares none.
    pub fn natural_ty(&self) -> Ty {
        match self {
            Value::Bool(_) => Ty::Bool,
            Value::Int(_) => Ty::Int8,
            Value::Float(_) => Ty::Float8,
            Value::Reg(..) | Value::Text(_) | Value::Null => Ty::Text,
            Value::Array(items) => match items.iter().find(|v| !v.is_null()) {
                Some(Value::Int(_)) => Ty::Int2Array,
                _ => Ty::TextArray,
            },
        }
    }

    /// The value in PostgreSQL's text format (`None`: `NULL`).
    pub fn to_text(&self) -> Option<String> {
        match self {
            Value::Null => None,
            Value::Bool(b) => Some(if *b { "t" } else { "f" }.to_string()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(float_text(*f)),
            Value::Text(s) | Value::Reg(_, s) => Some(s.clone()),
            Value::Array(items) => Some(array_text(items)),
        }
    }

    /// SQL truth: `Some(true)`, `Some(false)` or `None` (`NULL`).
    pub fn truth(&self) -> Result<Option<bool>, CatalogError> {
        match self {
            Value::Null => Ok(None),
            Value::Bool(b) => Ok(Some(*b)),
            Value::Text(s) => parse_bool(s).map(Some),
            other => Err(CatalogError::mismatch(format!(
                "argument of a condition must be type boolean, not {other:?}"
            ))),
        }
    }

    /// The value as an integer (an untyped literal is parsed).
    pub fn as_int(&self) -> Result<Option<i64>, CatalogError> {
        match self {
            Value::Null => Ok(None),
            Value::Int(i) | Value::Reg(i, _) => Ok(Some(*i)),
            Value::Float(f) => Ok(Some(f.round() as i64)),
            Value::Bool(b) => Ok(Some(i64::from(*b))),
            Value::Text(s) => s
                .trim()
                .parse::<i64>()
                .map(Some)
                .map_err(|_| CatalogError::invalid_text("integer", s)),
            Value::Array(_) => Err(CatalogError::mismatch(
                "an array is not an integer".to_string(),
            )),
        }
    }

    /// The value as text (`NULL` stays `None`).
    pub fn as_string(&self) -> Option<String> {
        self.to_text()
    }
}

fn parse_bool(s: &str) -> Result<bool, CatalogError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "t" | "true" | "yes" | "y" | "on" | "1" => Ok(true),
        "f" | "false" | "no" | "n" | "off" | "0" => Ok(false),
        _ => Err(CatalogError::invalid_text("boolean", s)),
    }
}

fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        f.to_string()
    }
}

/// An array in PostgreSQL's text format: `{a,b,"c d",NULL}`.
fn array_text(items: &[Value]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|v| match v.to_text() {
            None => "NULL".to_string(),
            Some(s) => {
                let plain = !s.is_empty()
                    && !s.eq_ignore_ascii_case("null")
                    && !s
                        .chars()
                        .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
                if plain {
                    s
                } else {
                    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
                }
            }
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// Parses an array literal's text (`{a,b}`), elements as untyped text.
pub fn parse_array(s: &str) -> Result<Vec<Value>, CatalogError> {
    let inner = s
        .trim()
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(|| CatalogError::invalid_text("array", s))?;
    let mut items = Vec::new();
    let mut chars = inner.chars().peekable();
    while chars.peek().is_some() {
        let mut item = String::new();
        let mut quoted = false;
        if chars.peek() == Some(&'"') {
            quoted = true;
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => item.extend(chars.next()),
                    '"' => break,
                    c => item.push(c),
                }
            }
        }
        for c in chars.by_ref() {
            if c == ',' {
                break;
            }
            item.push(c);
        }
        let item = if quoted {
            item
        } else {
            item.trim().to_string()
        };
        items.push(if !quoted && item.eq_ignore_ascii_case("null") {
            Value::Null
        } else {
            Value::Text(item)
        });
    }
    Ok(items)
}

/// Compares two values as SQL does (`None`: either is `NULL`). An untyped
/// string compared with a number, boolean or array is read as one.
pub fn compare(a: &Value, b: &Value) -> Result<Option<Ordering>, CatalogError> {
    use Value::*;
    Ok(Some(match (a, b) {
        (Null, _) | (_, Null) => return Ok(None),
        (Int(x), Int(y)) | (Reg(x, _), Reg(y, _)) | (Int(x), Reg(y, _)) | (Reg(x, _), Int(y)) => {
            x.cmp(y)
        }
        (Int(x), Float(y)) => (*x as f64).total_cmp(y),
        (Float(x), Int(y)) => x.total_cmp(&(*y as f64)),
        (Float(x), Float(y)) => x.total_cmp(y),
        (Bool(x), Bool(y)) => x.cmp(y),
        (Text(x), Text(y)) => x.cmp(y),
        (Reg(_, name), Text(t)) => match t.trim().parse::<i64>() {
            Ok(oid) => return compare(a, &Int(oid)),
            Err(_) => name.as_str().cmp(t.as_str()),
        },
        (Text(_), Reg(..)) => return Ok(compare(b, a)?.map(Ordering::reverse)),
        (Int(_) | Float(_), Text(t)) => {
            let n = match t.trim().parse::<i64>() {
                Ok(i) => Int(i),
                Err(_) => Float(
                    t.trim()
                        .parse::<f64>()
                        .map_err(|_| CatalogError::invalid_text("number", t))?,
                ),
            };
            return compare(a, &n);
        }
        (Text(_), Int(_) | Float(_)) => return Ok(compare(b, a)?.map(Ordering::reverse)),
        (Bool(x), Text(t)) => x.cmp(&parse_bool(t)?),
        (Text(t), Bool(y)) => parse_bool(t)?.cmp(y),
        (Array(x), Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                match compare(p, q)? {
                    Some(Ordering::Equal) => {}
                    Some(o) => return Ok(Some(o)),
                    None => return Ok(None),
                }
            }
            x.len().cmp(&y.len())
        }
        (Array(_), Text(t)) => return compare(a, &Array(parse_array(t)?)),
        (Text(t), Array(_)) => return compare(&Array(parse_array(t)?), b),
        (x, y) => {
            return Err(CatalogError::mismatch(format!(
                "cannot compare {x:?} with {y:?}"
            )))
        }
    }))
}

/// The order of two values in `ORDER BY`: `NULL`s last (ascending), as
/// PostgreSQL sorts them.
pub fn sort_order(a: &Value, b: &Value) -> Ordering {
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => compare(a, b)
            .ok()
            .flatten()
            .unwrap_or_else(|| a.to_text().cmp(&b.to_text())),
    }
}

/// Whether two values are the same row value for `DISTINCT`/`UNION`
/// (`NULL` equals `NULL` there).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a.is_null(), b.is_null()) {
        (true, true) => true,
        (false, false) => matches!(compare(a, b), Ok(Some(Ordering::Equal))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untyped_literals_compare_as_the_other_side() {
        let eq = |a: &Value, b: &Value| compare(a, b).unwrap() == Some(Ordering::Equal);
        assert!(eq(&Value::Int(16384), &Value::text("16384")));
        assert!(eq(&Value::Bool(true), &Value::text("t")));
        assert!(eq(&Value::Reg(1259, "pg_class".into()), &Value::Int(1259)));
        assert!(eq(&Value::Array(vec![Value::Int(0)]), &Value::text("{0}")));
        assert_eq!(compare(&Value::Null, &Value::Int(1)).unwrap(), None);
        assert!(compare(&Value::Int(1), &Value::text("x")).is_err());
    }

    #[test]
    fn arrays_print_and_parse_in_the_text_format() {
        let a = Value::Array(vec![Value::text("a"), Value::text("b c"), Value::Null]);
        assert_eq!(a.to_text().unwrap(), r#"{a,"b c",NULL}"#);
        assert_eq!(
            parse_array(r#"{a,"b c",NULL}"#).unwrap(),
            vec![Value::text("a"), Value::text("b c"), Value::Null]
        );
        assert_eq!(parse_array("{}").unwrap(), vec![]);
    }
}
