//! PostgreSQL's binary `numeric`, from and to a decimal's text.
//!
//! The bytes (big-endian): `ndigits: i16`, `weight: i16` (the power of
//! 10,000 of the first digit), `sign: u16` (`0x0000` positive, `0x4000`
//! negative, `0xC000` NaN), `dscale: u16` (decimal digits after the
//! point), then `ndigits` base-10,000 digits as `i16`, most significant
//! first, leading and trailing zero digits left out.

use std::fmt::Write;

use bytes::{BufMut, BytesMut};

use super::BoxError;

const POSITIVE: u16 = 0x0000;
const NEGATIVE: u16 = 0x4000;
const NAN: u16 = 0xC000;

/// The most base-10,000 digits written or read (PostgreSQL's own limit is
/// 131,072 decimal digits before the point and 16,383 after).
const MAX_DIGITS: i64 = 40_000;

/// Writes `text` (`-12.340`, `1e-3`, `NaN`) as a binary `numeric`.
pub fn encode(text: &str, out: &mut BytesMut) -> Result<(), BoxError> {
    let bad = || -> BoxError { format!("{text:?} is not a numeric").into() };
    let text = text.trim();
    if text.eq_ignore_ascii_case("nan") {
        put_header(out, 0, 0, NAN, 0);
        return Ok(());
    }
    let (sign, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (NEGATIVE, &text[1..]),
        Some(b'+') => (POSITIVE, &text[1..]),
        _ => (POSITIVE, text),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().map_err(|_| bad())?),
        None => (unsigned, 0),
    };
    if exponent.abs() > 4 * MAX_DIGITS {
        return Err(bad());
    }
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !all_digits(whole) || !all_digits(fraction) {
        return Err(bad());
    }
    let dscale = (fraction.len() as i64 - exponent).max(0);
    let dscale = u16::try_from(dscale).map_err(|_| bad())?;
    // The decimal digits and where the point falls among them.
    let digits: Vec<u8> = whole
        .bytes()
        .chain(fraction.bytes())
        .map(|b| b - b'0')
        .collect();
    let mut point = whole.len() as i64 + exponent;
    let leading = digits.iter().take_while(|d| **d == 0).count();
    let trailing = digits[leading..]
        .iter()
        .rev()
        .take_while(|d| **d == 0)
        .count();
    let significant = &digits[leading..digits.len() - trailing];
    point -= leading as i64;
    if significant.is_empty() {
        put_header(out, 0, 0, POSITIVE, dscale);
        return Ok(());
    }
    // Digit i stands for 10^(point - 1 - i); its base-10,000 group is
    // that power divided by 4, rounded down.
    let group = |power: i64| power.div_euclid(4);
    let weight = group(point - 1);
    let last = group(point - significant.len() as i64);
    let count = weight - last + 1;
    if count > MAX_DIGITS {
        return Err(bad());
    }
    let mut groups = vec![0_i16; usize::try_from(count).map_err(|_| bad())?];
    for (i, d) in significant.iter().enumerate() {
        let power = point - 1 - i as i64;
        let at = usize::try_from(weight - group(power)).map_err(|_| bad())?;
        groups[at] += i16::from(*d) * 10_i16.pow(power.rem_euclid(4) as u32);
    }
    let weight = i16::try_from(weight).map_err(|_| bad())?;
    let ndigits = i16::try_from(count).map_err(|_| bad())?;
    put_header(out, ndigits, weight, sign, dscale);
    for g in groups {
        out.put_i16(g);
    }
    Ok(())
}

fn put_header(out: &mut BytesMut, ndigits: i16, weight: i16, sign: u16, dscale: u16) {
    out.put_i16(ndigits);
    out.put_i16(weight);
    out.put_u16(sign);
    out.put_u16(dscale);
}

/// The decimal text of a binary `numeric` (`dscale` digits after the
/// point, as PostgreSQL writes it).
pub fn decode(bytes: &[u8]) -> Result<String, BoxError> {
    let word = |i: usize| -> Result<u16, BoxError> {
        match bytes.get(2 * i..2 * i + 2) {
            Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
            None => Err("a numeric cut short".into()),
        }
    };
    let ndigits = word(0)? as i16;
    let weight = i64::from(word(1)? as i16);
    let sign = word(2)?;
    let dscale = usize::from(word(3)?);
    if sign == NAN {
        return Ok("NaN".into());
    }
    if !(0..=MAX_DIGITS).contains(&i64::from(ndigits)) || bytes.len() != 8 + 2 * ndigits as usize {
        return Err("a numeric of the wrong length".into());
    }
    let digits: Vec<u16> = (0..ndigits as usize)
        .map(|i| word(4 + i))
        .collect::<Result<_, _>>()?;
    if digits.iter().any(|d| *d > 9999) {
        return Err("a numeric digit beyond 9999".into());
    }
    // Digit k stands for 10000^(weight - k).
    let at = |power: i64| -> u16 {
        usize::try_from(weight - power)
            .ok()
            .and_then(|k| digits.get(k).copied())
            .unwrap_or(0)
    };
    let mut text = String::new();
    if sign == NEGATIVE && !digits.is_empty() {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        for power in (0..=weight).rev() {
            match power == weight {
                true => write!(text, "{}", at(power))?,
                false => write!(text, "{:04}", at(power))?,
            }
        }
    }
    if dscale > 0 {
        let mut fraction = String::new();
        let mut power = -1;
        while fraction.len() < dscale {
            write!(fraction, "{:04}", at(power))?;
            power -= 1;
        }
        fraction.truncate(dscale);
        text.push('.');
        text.push_str(&fraction);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(text: &str) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(text, &mut out).unwrap();
        out.to_vec()
    }

    fn words(w: &[i16]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    #[test]
    fn decimals_are_written_as_postgresql_writes_them() {
        // 12345.678: digits 1 | 2345 | 6780, weight 1, dscale 3.
        assert_eq!(encoded("12345.678"), words(&[3, 1, 0, 3, 1, 2345, 6780]));
        assert_eq!(encoded("-0.5"), words(&[1, -1, 0x4000, 1, 5000]));
        assert_eq!(encoded("0"), words(&[0, 0, 0, 0]));
        assert_eq!(encoded("10000"), words(&[1, 1, 0, 0, 1]));
        assert_eq!(encoded("0.00001"), words(&[1, -2, 0, 5, 1000]));
        assert_eq!(encoded("1.5e3"), encoded("1500"));
        assert_eq!(encoded("15e-1"), encoded("1.5"));
        for bad in ["", "1.2.3", "abc", "1e999999999", "--1", "."] {
            assert!(encode(bad, &mut BytesMut::new()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_numeric_reads_back_to_its_text() {
        for text in [
            "12345.678",
            "-0.5",
            "0",
            "10000",
            "0.00001",
            "123456789012345678901234567890.123456789",
            "-1.00",
            "NaN",
        ] {
            assert_eq!(decode(&encoded(text)).unwrap(), text);
        }
        assert!(decode(&[0, 1]).is_err());
        assert!(decode(&words(&[2, 0, 0, 0, 1])).is_err());
        assert!(decode(&words(&[1, 0, 0, 0, 10000])).is_err());
    }
}
