//! Text helpers shared by the subcommands: aligned tables, timestamps as
//! RFC 3339, byte values as UTF-8 text or hex.

/// A timestamp (ms) as RFC 3339 UTC, or the raw number outside 0000..9999.
pub fn time(ms: i64) -> String {
    if ms == i64::MIN {
        return "-".into();
    }
    kappa_processor::expr::format_timestamp(ms).unwrap_or_else(|| ms.to_string())
}

/// Bytes as text when valid UTF-8 without control characters (besides tab),
/// else as `0x…` hex.
pub fn bytes(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if !s.chars().any(|c| c.is_control() && c != '\t') => s.to_owned(),
        _ => {
            let mut out = String::with_capacity(2 + 2 * b.len());
            out.push_str("0x");
            for byte in b {
                out.push_str(&format!("{byte:02x}"));
            }
            out
        }
    }
}

/// Renders rows under a header, columns padded to their widest cell;
/// columns listed in `right` are right-aligned.
pub fn table(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            let pad = w - cell.chars().count();
            if right.contains(&i) {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                if i + 1 < cells.len() {
                    out.push_str(&" ".repeat(pad));
                }
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
