//! Timestamps: event times from JSON values ([`parse_timestamp`]: epoch
//! milliseconds or RFC 3339 text) and back ([`format_timestamp`]), and the
//! proleptic Gregorian calendar arithmetic both use. Used by event-time
//! extraction, pull-query bounds, `CAST(.. AS TIMESTAMP)` and the time
//! functions; all times are `i64` milliseconds since the Unix epoch, UTC.

use serde_json::Value;

use crate::expr::f64_to_i64;

/// Milliseconds in a day.
pub(crate) const DAY_MS: i64 = 86_400_000;

/// An event time in ms since the epoch from a JSON value: an integer (ms), a
/// double (ms, truncated toward zero) or an RFC 3339 string
/// (`2024-05-01T12:00:00Z`, `...12:00:00.123+02:00`; `T` may be `t` or a
/// space, fractions beyond ms are truncated). None otherwise.
pub fn parse_timestamp(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().and_then(f64_to_i64)),
        Value::String(s) => parse_timestamp_text(s),
        _ => None,
    }
}

/// [`parse_timestamp`] of a JSON string value `s`.
pub(crate) fn parse_timestamp_text(s: &str) -> Option<i64> {
    parse_rfc3339(s.trim().as_bytes())
}

/// [`parse_timestamp_text`] of ASCII text given as bytes (no UTF-8 check
/// needed): trimmed as `str::trim` trims (Unicode white space, which in
/// ASCII is `char::is_whitespace`). `None` for non-ASCII bytes.
pub(crate) fn parse_timestamp_ascii(b: &[u8]) -> Option<i64> {
    parse_rfc3339(trim_ascii(b)?)
}

/// ASCII `b` trimmed as `str::trim` trims; `None` for non-ASCII bytes.
fn trim_ascii(b: &[u8]) -> Option<&[u8]> {
    if !b.is_ascii() {
        return None;
    }
    let kept = |c: &u8| !char::from(*c).is_whitespace();
    let start = b.iter().position(kept).unwrap_or(b.len());
    let end = b.iter().rposition(kept).map_or(start, |i| i + 1);
    Some(&b[start..end])
}

/// `ms` since the epoch as an RFC 3339 UTC string with milliseconds,
/// `YYYY-MM-DDTHH:MM:SS.sssZ`; None outside years 0000..=9999.
pub fn format_timestamp(ms: i64) -> Option<String> {
    let (y, mo, d) = civil_from_days(ms.div_euclid(DAY_MS));
    if !(0..=9999).contains(&y) {
        return None;
    }
    let in_day = ms.rem_euclid(DAY_MS);
    let (h, mi) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (s, milli) = (in_day / 1000 % 60, in_day % 1000);
    Some(format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z"
    ))
}

/// The number in `b[at..at + n]` if all are ASCII digits.
fn digits_at(b: &[u8], at: usize, n: usize) -> Option<i64> {
    let slice = b.get(at..at + n)?;
    slice.iter().try_fold(0_i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn byte_is(b: &[u8], at: usize, allowed: &[u8]) -> bool {
    b.get(at).is_some_and(|c| allowed.contains(c))
}

fn parse_rfc3339(b: &[u8]) -> Option<i64> {
    let minute = b.get(..MINUTE_LEN)?;
    parse_rest(b, parse_minute(minute)?)
}

/// Length of an RFC 3339 text's minute, `YYYY-MM-DDTHH:MM`.
const MINUTE_LEN: usize = 16;

/// The start of the minute `b` (`YYYY-MM-DDTHH:MM`, `T` also `t` or a
/// space) in ms since the epoch, before any UTC offset.
fn parse_minute(b: &[u8]) -> Option<i64> {
    let separators = byte_is(b, 4, b"-")
        && byte_is(b, 7, b"-")
        && byte_is(b, 10, b"Tt ")
        && byte_is(b, 13, b":");
    if !separators {
        return None;
    }
    let (year, month, day) = (
        digits_at(b, 0, 4)?,
        digits_at(b, 5, 2)?,
        digits_at(b, 8, 2)?,
    );
    let (hour, minute) = (digits_at(b, 11, 2)?, digits_at(b, 14, 2)?);
    let valid = (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60;
    if !valid {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000)
}

/// The time of the RFC 3339 text `b` whose minute starts at `minute_ms`:
/// `:SS`, an optional fraction and the offset follow the minute.
fn parse_rest(b: &[u8], minute_ms: i64) -> Option<i64> {
    if !byte_is(b, MINUTE_LEN, b":") {
        return None;
    }
    let second = digits_at(b, 17, 2)?;
    // 60: a leap second, counted into the next minute.
    if second > 60 {
        return None;
    }
    let (millis, rest) = parse_fraction(b, 19)?;
    let offset_s = parse_offset(&b[rest..])?;
    Some(minute_ms + (second - offset_s) * 1000 + millis)
}

/// The last minute [`parse_timestamp_memo`] read: the events of a
/// stream mostly come in time order, so most share their minute with the
/// one before and only their seconds need reading.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MinuteMemo {
    /// The minute's text.
    text: [u8; MINUTE_LEN],
    /// Its start ([`parse_minute`]).
    ms: i64,
}

/// [`parse_timestamp_ascii`] of the text `b`, reading a minute equal to the
/// last one read (`memo`) from memory, and the common form in that minute
/// in place ([`canonical_in_minute`]); `None` when `b` is not ASCII (the
/// text parse decides then), else the answer.
pub(crate) fn parse_timestamp_memo(
    b: &[u8],
    memo: &std::cell::Cell<Option<MinuteMemo>>,
) -> Option<Option<i64>> {
    // The common form needs no ASCII check: it is made of the ASCII bytes
    // it compares.
    if let Some(ms) = canonical_in_minute(b, memo.get()) {
        return Some(Some(ms));
    }
    b.is_ascii().then(|| parse_ascii_memo(b, memo))
}

/// [`parse_timestamp_ascii`] of ASCII `b` through the minute memo.
fn parse_ascii_memo(b: &[u8], memo: &std::cell::Cell<Option<MinuteMemo>>) -> Option<i64> {
    let b = trim_ascii(b)?;
    let minute: &[u8; MINUTE_LEN] = b.first_chunk()?;
    let minute_ms = match memo.get() {
        Some(last) if last.text == *minute => last.ms,
        _ => {
            let ms = parse_minute(minute)?;
            memo.set(Some(MinuteMemo { text: *minute, ms }));
            ms
        }
    };
    parse_rest(b, minute_ms)
}

/// The time of `b` when it is `YYYY-MM-DDTHH:MM:SS.sssZ` exactly — what
/// most producers write — in the minute of `memo`: the seconds and
/// milliseconds read in place. `None` for anything else (the general parse
/// decides). The same answer as the general parse: `b` starts with a digit
/// (the memo's minute does) and ends with `Z`, so trimming keeps it whole,
/// and the rest is `:SS`, a three-digit fraction and the offset `Z`.
#[inline]
fn canonical_in_minute(b: &[u8], memo: Option<MinuteMemo>) -> Option<i64> {
    let last = memo?;
    let b: &[u8; 24] = b.try_into().ok()?;
    if b[..MINUTE_LEN] != last.text || b[16] != b':' || b[19] != b'.' || b[23] != b'Z' {
        return None;
    }
    let second = digits_at(b, 17, 2)?;
    let millis = digits_at(b, 20, 3)?;
    // 60: a leap second, counted into the next minute (as `parse_rest`).
    (second <= 60).then_some(last.ms + second * 1000 + millis)
}

/// An optional `.fraction` at `at`: (milliseconds, index after it).
fn parse_fraction(b: &[u8], at: usize) -> Option<(i64, usize)> {
    if !byte_is(b, at, b".") {
        return Some((0, at));
    }
    let start = at + 1;
    let len = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
    if len == 0 {
        return None;
    }
    let millis = b[start..start + len.min(3)]
        .iter()
        .chain(std::iter::repeat(&b'0'))
        .take(3)
        .fold(0, |acc, &c| acc * 10 + i64::from(c - b'0'));
    Some((millis, start + len))
}

/// The whole rest must be `Z`/`z` or `±HH:MM`: the offset in seconds.
fn parse_offset(b: &[u8]) -> Option<i64> {
    match b {
        [b'Z' | b'z'] => Some(0),
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (digits_at(b, 1, 2)?, digits_at(b, 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = (h * 60 + m) * 60;
            Some(if *sign == b'-' { -secs } else { secs })
        }
        _ => None,
    }
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn ts(s: &str) -> Option<i64> {
        parse_timestamp(&json!(s))
    }

    #[test]
    fn parse_timestamp_reads_rfc3339_with_offsets_and_fractions() {
        assert_eq!(ts("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(ts("2024-02-29T12:34:56Z"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29T12:34:56.789Z"), Some(1_709_210_096_789));
        assert_eq!(ts("2024-02-29T12:34:56.7Z"), Some(1_709_210_096_700));
        assert_eq!(
            ts("2024-02-29T12:34:56.123456789Z"),
            Some(1_709_210_096_123)
        );
        assert_eq!(ts("2024-02-29T14:34:56+02:00"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29T18:04:56.789+05:30"), Some(1_709_210_096_789));
        assert_eq!(ts("2024-02-29T04:34:56-08:00"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29t12:34:56z"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29 12:34:56Z"), Some(1_709_210_096_000));
        assert_eq!(ts(" 1970-01-01T00:00:00Z "), Some(0));
    }

    #[test]
    fn parse_timestamp_handles_dates_before_1970() {
        assert_eq!(ts("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(ts("1969-12-31T23:59:59Z"), Some(-1000));
        assert_eq!(ts("1900-01-01T00:00:00Z"), Some(-2_208_988_800_000));
        assert_eq!(ts("0000-01-01T00:00:00Z"), Some(-62_167_219_200_000));
        assert_eq!(ts("1970-01-01T00:59:59+01:00"), Some(-1000));
    }

    #[test]
    fn parse_timestamp_reads_numbers_and_rejects_bad_input() {
        assert_eq!(
            parse_timestamp(&json!(1_700_000_000_123_i64)),
            Some(1_700_000_000_123)
        );
        assert_eq!(parse_timestamp(&json!(-5)), Some(-5));
        assert_eq!(parse_timestamp(&json!(1234.9)), Some(1234));
        assert_eq!(parse_timestamp(&json!(-1234.9)), Some(-1234));
        assert_eq!(parse_timestamp(&json!(1e300)), None);
        assert_eq!(parse_timestamp(&json!(u64::MAX)), None);
        assert_eq!(parse_timestamp(&json!(true)), None);
        assert_eq!(parse_timestamp(&Value::Null), None);
        for bad in [
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+2:00",
            "2024-01-01T00:00:00+24:00",
            "2024-01-01T00:00:00Zjunk",
            "2024-01-01",
            "1700000000000",
            "2024-1-01T00:00:00Z",
            "",
            "２０２４-01-01T00:00:00Z",
        ] {
            assert_eq!(ts(bad), None, "{bad}");
        }
    }

    proptest! {
        /// The ASCII parse is the text parse.
        #[test]
        fn ascii_parse_equals_text_parse(
            s in "[ \t\x0b\x0c\r\n\x1c]{0,2}[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,4})?([Zz]|[+-][0-9]{2}:[0-9]{2})?[ \t\x1f]{0,2}",
        ) {
            prop_assert_eq!(parse_timestamp_ascii(s.as_bytes()), parse_timestamp_text(&s));
        }

        /// Read one after the other with one memo, texts parse as they do
        /// alone: whatever minute the memo holds, and for damaged texts.
        #[test]
        fn the_minute_memo_changes_no_answer(
            texts in proptest::collection::vec(
                prop_oneof![
                    "2026-0[12]-0[1-3]T0[0-2]:0[0-2]:[0-6][0-9](\\.[0-9]{0,4})?(Z|[+-]0[0-2]:[0-5]0)",
                    // The canonical form (read in place when the minute
                    // repeats), and its near misses.
                    "2026-01-01T00:0[01]:[0-6][0-9]\\.[0-9]{3}Z",
                    "2026-01-01T00:0[01][:.][0-6][0-9a][.:][0-9a]{3}[Zz ]",
                    "[0-9T:.Z \x00-]{0,26}",
                    Just("\0".repeat(20)),
                ],
                1..40,
            ),
        ) {
            let memo = std::cell::Cell::new(None);
            for text in &texts {
                prop_assert_eq!(
                    parse_timestamp_memo(text.as_bytes(), &memo),
                    Some(parse_timestamp_ascii(text.as_bytes())),
                    "{:?}", text
                );
            }
        }

        #[test]
        fn timestamps_format_and_parse_back(ms in -62_167_219_200_000_i64..253_402_300_800_000) {
            let s = format_timestamp(ms).unwrap();
            prop_assert_eq!(parse_timestamp(&Value::String(s)), Some(ms));
        }
    }
}
