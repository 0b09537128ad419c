//! PostgreSQL's binary format for the values Kappa answers and the
//! parameters drivers bind.
//!
//! Answers hold their values in the text format ([`super::answer`]); a
//! column a client asks for in binary (a `Bind`'s result format codes, as
//! psycopg's `binary=True` sends) is converted from that text by its
//! column's type: `bool` one byte, `int2`/`int4`/`int8`/`oid` big-endian
//! integers, `float4`/`float8` IEEE 754 big-endian, `numeric` as
//! PostgreSQL's base-10000 digits ([`numeric`]), `timestamptz` as
//! microseconds since 2000-01-01 UTC, `text`-like types as their UTF-8
//! bytes. A parameter sent in binary is read back into the text a literal
//! is written from.

pub mod numeric;

use std::error::Error;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use pgwire::api::Type;
use pgwire::types::format::FormatOptions;
use pgwire::types::ToSqlText;
use postgres_types::{FromSql, IsNull, ToSql};

/// An error of the encoders and decoders here.
type BoxError = Box<dyn Error + Sync + Send>;

/// A value held in PostgreSQL's text format (`None`: `NULL`), sent in
/// either format: as its text, or converted to binary by its column's
/// type.
#[derive(Debug)]
pub struct Cell<'a>(pub Option<&'a str>);

impl ToSqlText for Cell<'_> {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _format_options: &FormatOptions,
    ) -> Result<IsNull, BoxError> {
        match self.0 {
            None => Ok(IsNull::Yes),
            Some(text) => {
                out.extend_from_slice(text.as_bytes());
                Ok(IsNull::No)
            }
        }
    }
}

impl ToSql for Cell<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self.0 {
            None => Ok(IsNull::Yes),
            Some(text) => encode(text, ty, out).map(|()| IsNull::No),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    postgres_types::to_sql_checked!();
}

/// Whether values of `ty` are sent in binary as their text's UTF-8 bytes.
fn text_like(ty: &Type) -> bool {
    [
        Type::TEXT,
        Type::VARCHAR,
        Type::NAME,
        Type::BPCHAR,
        Type::UNKNOWN,
        Type::JSON,
    ]
    .contains(ty)
}

/// Writes `text`, a value of `ty` in the text format, in the binary format.
fn encode(text: &str, ty: &Type, out: &mut BytesMut) -> Result<(), BoxError> {
    let not = |what: &str| -> BoxError { format!("{text:?} is not {what}").into() };
    match *ty {
        Type::BOOL => match text {
            "t" | "true" => true.to_sql(ty, out),
            "f" | "false" => false.to_sql(ty, out),
            _ => Err(not("a boolean")),
        },
        Type::INT8 => integer(text).ok_or_else(|| not("an int8"))?.to_sql(ty, out),
        Type::INT4 => i32::try_from(integer(text).ok_or_else(|| not("an int4"))?)?.to_sql(ty, out),
        Type::INT2 => i16::try_from(integer(text).ok_or_else(|| not("an int2"))?)?.to_sql(ty, out),
        Type::OID => text
            .parse::<u32>()
            .map_err(|_| not("an oid"))?
            .to_sql(ty, out),
        Type::FLOAT8 => text
            .parse::<f64>()
            .map_err(|_| not("a float8"))?
            .to_sql(ty, out),
        Type::FLOAT4 => text
            .parse::<f32>()
            .map_err(|_| not("a float4"))?
            .to_sql(ty, out),
        Type::NUMERIC => numeric::encode(text, out).map(|()| IsNull::No),
        Type::TIMESTAMPTZ | Type::TIMESTAMP => timestamp(text)
            .ok_or_else(|| not("a timestamp"))?
            .to_sql(ty, out),
        _ if text_like(ty) => {
            out.extend_from_slice(text.as_bytes());
            Ok(IsNull::No)
        }
        _ => Err(format!("the binary format of type {ty} is not supported: ask for text").into()),
    }
    .map(|_| ())
}

/// An integer written as one (`12`), or as a number with no fraction
/// (`12.0`, as a JSON double may read).
fn integer(text: &str) -> Option<i64> {
    text.parse::<i64>().ok().or_else(|| {
        let f = text.parse::<f64>().ok()?;
        // Exact: only integral values within i64's range convert.
        (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
    })
}

/// The time of a `timestamptz` in the text format Kappa writes
/// (`2024-01-01 00:00:00.000+00`; other RFC 3339 forms are read too).
fn timestamp(text: &str) -> Option<SystemTime> {
    let rfc3339 = match text.strip_suffix("+00") {
        Some(utc) => format!("{utc}Z"),
        None => text.to_string(),
    };
    let ms = kappa_processor::time::parse_timestamp(&serde_json::Value::String(rfc3339))?;
    let offset = Duration::from_millis(ms.unsigned_abs());
    match ms >= 0 {
        true => UNIX_EPOCH.checked_add(offset),
        false => UNIX_EPOCH.checked_sub(offset),
    }
}

/// The text of a parameter of type `ty` sent in the binary format, as a
/// literal is written from it; `Err` names what was wrong.
pub fn parameter_text(bytes: &[u8], ty: &Type) -> Result<String, String> {
    let read = || -> Result<String, BoxError> {
        Ok(match *ty {
            Type::BOOL => bool::from_sql(ty, bytes)?.to_string(),
            Type::INT2 => i16::from_sql(ty, bytes)?.to_string(),
            Type::INT4 => i32::from_sql(ty, bytes)?.to_string(),
            Type::INT8 => i64::from_sql(ty, bytes)?.to_string(),
            Type::OID => u32::from_sql(ty, bytes)?.to_string(),
            Type::FLOAT4 => f32::from_sql(ty, bytes)?.to_string(),
            Type::FLOAT8 => f64::from_sql(ty, bytes)?.to_string(),
            Type::NUMERIC => numeric::decode(bytes)?,
            Type::TIMESTAMPTZ | Type::TIMESTAMP => {
                let at = SystemTime::from_sql(ty, bytes)?;
                let ms = match at.duration_since(UNIX_EPOCH) {
                    Ok(after) => i64::try_from(after.as_millis())?,
                    Err(before) => -i64::try_from(before.duration().as_millis())?,
                };
                kappa_processor::time::format_timestamp(ms)
                    .ok_or("a timestamp outside years 0000 to 9999")?
            }
            _ if text_like(ty) => String::from_utf8(bytes.to_vec())?,
            _ => return Err(format!("type {ty}").into()),
        })
    };
    read().map_err(|e| format!("a binary parameter of type {ty} could not be read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(text: &str, ty: &Type) -> Vec<u8> {
        let mut out = BytesMut::new();
        Cell(Some(text)).to_sql(ty, &mut out).unwrap();
        out.to_vec()
    }

    #[test]
    fn values_held_as_text_are_sent_in_binary_by_their_type() {
        assert_eq!(binary("t", &Type::BOOL), [1]);
        assert_eq!(binary("-2", &Type::INT8), (-2_i64).to_be_bytes());
        assert_eq!(binary("3.0", &Type::INT8), 3_i64.to_be_bytes());
        assert_eq!(binary("2.5", &Type::FLOAT8), 2.5_f64.to_be_bytes());
        assert_eq!(binary("16384", &Type::OID), 16384_u32.to_be_bytes());
        assert_eq!(binary("héllo", &Type::TEXT), "héllo".as_bytes());
        // 2000-01-01 00:00:01 UTC: one second after PostgreSQL's epoch.
        assert_eq!(
            binary("2000-01-01 00:00:01.000+00", &Type::TIMESTAMPTZ),
            1_000_000_i64.to_be_bytes()
        );
        let mut out = BytesMut::new();
        assert!(Cell(Some("x")).to_sql(&Type::INT8, &mut out).is_err());
        assert!(Cell(Some("1")).to_sql(&Type::INTERVAL, &mut out).is_err());
        assert!(matches!(
            Cell(None).to_sql(&Type::INT8, &mut out).unwrap(),
            IsNull::Yes
        ));
    }

    #[test]
    fn binary_parameters_read_back_as_text() {
        let text = |bytes: &[u8], ty| parameter_text(bytes, ty).unwrap();
        assert_eq!(text(&42_i32.to_be_bytes(), &Type::INT4), "42");
        assert_eq!(text(&(-7_i64).to_be_bytes(), &Type::INT8), "-7");
        assert_eq!(text(&[0], &Type::BOOL), "false");
        assert_eq!(text(b"u1", &Type::TEXT), "u1");
        assert_eq!(
            text(&1_000_000_i64.to_be_bytes(), &Type::TIMESTAMPTZ),
            "2000-01-01T00:00:01.000Z"
        );
        assert!(parameter_text(&[1, 2], &Type::INT8).is_err());
        assert!(parameter_text(&[0xff], &Type::TEXT).is_err());
        assert!(parameter_text(&[0; 16], &Type::INTERVAL).is_err());
    }
}
