//! A simple query holding several statements, some of them session
//! statements (`SET ..; SELECT ..`, as drivers and `psql -c` send): cut
//! at each top-level `;` so that the session statements are answered here
//! and the others run as Kappa's statements, in order. A query with no
//! session statement among several runs whole, as `POST /v1/statements`
//! runs it (parsed and authorized before anything runs).

use super::answer;

/// The parts of `query` to run in order when it holds several statements
/// and one of them is a session statement: each session statement alone,
/// each stretch of other statements as one text. `None`: run `query` as
/// it is.
pub fn parts_with_session_statements(query: &str) -> Option<Vec<String>> {
    if !query.trim_end().trim_end_matches(';').contains(';') {
        return None;
    }
    let statements: Vec<(&str, bool)> = statements(query)
        .into_iter()
        .map(|s| (s, answer::session_statement(s).is_some()))
        .collect();
    if statements.len() < 2 || !statements.iter().any(|(_, session)| *session) {
        return None;
    }
    let mut parts: Vec<String> = Vec::new();
    let mut kappa: Vec<&str> = Vec::new();
    for (statement, session) in statements {
        if session {
            if !kappa.is_empty() {
                parts.push(kappa.join(";\n"));
                kappa.clear();
            }
            parts.push(statement.to_string());
        } else {
            kappa.push(statement);
        }
    }
    if !kappa.is_empty() {
        parts.push(kappa.join(";\n"));
    }
    Some(parts)
}

/// The non-empty statements of `text`, cut at each `;` outside quotes
/// (`'..'`, `".."`, `$tag$..$tag$`) and comments (`-- ..`, `/* .. */`).
fn statements(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => {
                let quote = bytes[i];
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    i += 1;
                }
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |end| i + 2 + end + 1);
            }
            b'$' => {
                if let Some(tag_len) = text[i + 1..].find('$').filter(|&n| {
                    text[i + 1..i + 1 + n]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                }) {
                    let tag = &text[i..i + tag_len + 2];
                    let body = i + tag.len();
                    i = text[body..]
                        .find(tag)
                        .map_or(bytes.len(), |end| body + end + tag.len() - 1);
                }
            }
            b';' => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&text[start.min(text.len())..]);
    out.into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_cut_outside_quotes_and_comments() {
        assert_eq!(
            statements("SET a = 'x;y'; SELECT \"c;d\" -- e;f\n FROM v; /* g;h */ SHOW x;"),
            vec![
                "SET a = 'x;y'",
                "SELECT \"c;d\" -- e;f\n FROM v",
                "/* g;h */ SHOW x"
            ]
        );
        assert_eq!(
            statements("SELECT $$a;b$$; SELECT $t$;$t$"),
            vec!["SELECT $$a;b$$", "SELECT $t$;$t$"]
        );
        assert_eq!(statements("SELECT 1"), vec!["SELECT 1"]);
    }

    #[test]
    fn session_statements_are_cut_from_the_others() {
        assert_eq!(
            parts_with_session_statements("SET x = 1; SELECT * FROM v; SHOW TABLES; BEGIN"),
            Some(vec![
                "SET x = 1".to_string(),
                "SELECT * FROM v;\nSHOW TABLES".to_string(),
                "BEGIN".to_string()
            ])
        );
        // Without a session statement, or with one statement: run as is.
        assert_eq!(
            parts_with_session_statements("SELECT * FROM v; SHOW TABLES"),
            None
        );
        assert_eq!(parts_with_session_statements("SET x = 1;"), None);
        assert_eq!(parts_with_session_statements("SELECT 'a;b'"), None);
    }
}
