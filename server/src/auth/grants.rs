//! Grants: what a token may do, written as short strings so that the CLI,
//! the API and the stored file all use one form.
//!
//! | grant | allows |
//! |---|---|
//! | `admin` | everything: topic create/alter/delete, SQL DDL, replay/promote/rollback, tokens, and every grant below |
//! | `produce:PATTERN` | produce to topics matching PATTERN (auto-create included) |
//! | `read:PATTERN` | read records of topics matching PATTERN |
//! | `read-view:PATTERN` | read views matching PATTERN (rows, changes, diff, `SELECT`, `DESCRIBE`) |
//! | `group:PATTERN` | use consumer groups matching PATTERN; reading through a group, committing, resetting and fetching its offsets of a topic also need `read` on that topic (`Principal::may_commit`) |
//! | `metrics` | `GET /metrics` |
//!
//! A PATTERN is a name in which `*` stands for any run of characters
//! (possibly empty): `orders` is that topic only, `orders.*` every topic
//! whose name starts with `orders.`, `*` every topic.

use std::fmt;

/// The longest pattern (topic and group names are at most 249 bytes).
pub const MAX_PATTERN_CHARS: usize = 255;

/// A name pattern: `*` matches any run of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(String);

impl Pattern {
    /// Parses a pattern: 1..=255 printable ASCII characters, no spaces.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        if text.is_empty() || text.len() > MAX_PATTERN_CHARS {
            return Err(format!(
                "a name pattern has 1 to {MAX_PATTERN_CHARS} characters, got {}",
                text.len()
            ));
        }
        if let Some(bad) = text.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(format!(
                "a name pattern holds printable ASCII without spaces; {bad:?} is not allowed"
            ));
        }
        Ok(Pattern(text.to_string()))
    }

    /// Whether `name` matches. Iterative wildcard matching: O(pattern ×
    /// name) at worst, with both bounded in length.
    pub fn matches(&self, name: &str) -> bool {
        let (p, n) = (self.0.as_bytes(), name.as_bytes());
        let (mut pi, mut ni) = (0, 0);
        // Where the last `*` was, and the name position it matched up to.
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            if pi < p.len() && p[pi] == b'*' {
                star = Some((pi, ni));
                pi += 1;
            } else if pi < p.len() && p[pi] == n[ni] {
                pi += 1;
                ni += 1;
            } else if let Some((sp, sn)) = star {
                // Let the last `*` take one more character.
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&c| c == b'*')
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One thing a token may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// Everything.
    Admin,
    /// `GET /metrics`.
    Metrics,
    /// Produce to matching topics.
    Produce(Pattern),
    /// Read matching topics' records.
    Read(Pattern),
    /// Read matching views.
    ReadView(Pattern),
    /// Use matching consumer groups.
    Group(Pattern),
}

impl Grant {
    /// Parses `admin`, `metrics` or `KIND:PATTERN`.
    pub fn parse(text: &str) -> Result<Grant, String> {
        let text = text.trim();
        match text {
            "admin" => return Ok(Grant::Admin),
            "metrics" => return Ok(Grant::Metrics),
            _ => {}
        }
        let Some((kind, pattern)) = text.split_once(':') else {
            return Err(format!(
                "unknown grant {text:?}: use admin, metrics, produce:PATTERN, read:PATTERN, \
                 read-view:PATTERN or group:PATTERN"
            ));
        };
        let pattern = Pattern::parse(pattern).map_err(|e| format!("grant {text:?}: {e}"))?;
        match kind {
            "produce" => Ok(Grant::Produce(pattern)),
            "read" => Ok(Grant::Read(pattern)),
            "read-view" => Ok(Grant::ReadView(pattern)),
            "group" => Ok(Grant::Group(pattern)),
            other => Err(format!(
                "unknown grant kind {other:?} in {text:?}: use produce, read, read-view or group \
                 (or admin, metrics without a pattern)"
            )),
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Admin => f.write_str("admin"),
            Grant::Metrics => f.write_str("metrics"),
            Grant::Produce(p) => write!(f, "produce:{p}"),
            Grant::Read(p) => write!(f, "read:{p}"),
            Grant::ReadView(p) => write!(f, "read-view:{p}"),
            Grant::Group(p) => write!(f, "group:{p}"),
        }
    }
}

/// What one request (or one SQL statement) needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Nothing: the console page, its files, `/health`, `/ready`.
    Open,
    /// Any valid token (lists are then filtered to what it may see).
    Token,
    /// The `admin` grant.
    Admin,
    /// The `metrics` grant.
    Metrics,
    /// `produce` on the topic.
    Produce(String),
    /// `read` on the topic.
    Read(String),
    /// `read` or `produce` on the topic (describing it).
    ReadOrProduce(String),
    /// `read-view` on the view.
    ReadView(String),
    /// `group` on the group.
    Group(String),
    /// `group` on the group and `read` on the topic.
    GroupRead {
        /// The consumer group.
        group: String,
        /// The topic read through it.
        topic: String,
    },
}

impl Need {
    /// Whether `grants` allow it.
    pub fn allowed_by(&self, grants: &[Grant]) -> bool {
        if grants.contains(&Grant::Admin) {
            return true;
        }
        let any = |f: &dyn Fn(&Grant) -> bool| grants.iter().any(f);
        match self {
            Need::Open | Need::Token => true,
            Need::Admin => false,
            Need::Metrics => any(&|g| *g == Grant::Metrics),
            Need::Produce(t) => any(&|g| matches!(g, Grant::Produce(p) if p.matches(t))),
            Need::Read(t) => any(&|g| matches!(g, Grant::Read(p) if p.matches(t))),
            Need::ReadOrProduce(t) => {
                Need::Read(t.clone()).allowed_by(grants)
                    || Need::Produce(t.clone()).allowed_by(grants)
            }
            Need::ReadView(v) => any(&|g| matches!(g, Grant::ReadView(p) if p.matches(v))),
            Need::Group(name) => any(&|g| matches!(g, Grant::Group(p) if p.matches(name))),
            Need::GroupRead { group, topic } => {
                Need::Group(group.clone()).allowed_by(grants)
                    && Need::Read(topic.clone()).allowed_by(grants)
            }
        }
    }

    /// The grant that would allow it, as the 403 answer names it.
    pub fn describe(&self) -> String {
        match self {
            Need::Open | Need::Token => "a valid token".into(),
            Need::Admin => "admin".into(),
            Need::Metrics => "metrics".into(),
            Need::Produce(t) => format!("produce on topic {t:?}"),
            Need::Read(t) => format!("read on topic {t:?}"),
            Need::ReadOrProduce(t) => format!("read or produce on topic {t:?}"),
            Need::ReadView(v) => format!("read-view on view {v:?}"),
            Need::Group(g) => format!("group on consumer group {g:?}"),
            Need::GroupRead { group, topic } => {
                format!("group on consumer group {group:?} and read on topic {topic:?}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        Pattern::parse(s).unwrap()
    }

    #[test]
    fn patterns_match_exact_names_and_star_runs() {
        assert!(p("orders").matches("orders"));
        assert!(!p("orders").matches("orders.eu"));
        assert!(!p("orders").matches("order"));
        assert!(p("orders.*").matches("orders.eu"));
        assert!(p("orders.*").matches("orders."));
        assert!(!p("orders.*").matches("orders"));
        assert!(!p("orders.*").matches("payments"));
        assert!(p("*").matches("anything"));
        assert!(p("*").matches(""));
        assert!(p("a*b*c").matches("a-x-b-y-c"));
        assert!(!p("a*b*c").matches("a-x-c-y-b"));
        assert!(p("*-eu").matches("orders-eu"));
        assert!(!p("*-eu").matches("orders-eu-2"));
        // Many stars against a long non-match stays quick (bounded loop).
        let long = "a".repeat(249);
        assert!(!p(&"*a".repeat(100)).matches(&format!("{long}b")));
    }

    #[test]
    fn grants_round_trip_and_bad_ones_are_named() {
        for text in [
            "admin",
            "metrics",
            "produce:orders.*",
            "read:*",
            "read-view:purchase_stats",
            "group:billing-*",
        ] {
            assert_eq!(Grant::parse(text).unwrap().to_string(), text);
        }
        for bad in [
            "",
            "write:orders",
            "produce:",
            "produce",
            "read:a b",
            "admin:x",
        ] {
            assert!(Grant::parse(bad).is_err(), "{bad}");
        }
        let error = Grant::parse("write:orders").unwrap_err();
        assert!(error.contains("write"), "{error}");
    }

    #[test]
    fn needs_are_met_only_by_the_matching_grant_or_admin() {
        let producer = vec![Grant::parse("produce:orders.*").unwrap()];
        assert!(Need::Produce("orders.eu".into()).allowed_by(&producer));
        assert!(!Need::Produce("payments".into()).allowed_by(&producer));
        assert!(!Need::Read("orders.eu".into()).allowed_by(&producer));
        assert!(Need::ReadOrProduce("orders.eu".into()).allowed_by(&producer));
        assert!(!Need::Admin.allowed_by(&producer));
        assert!(!Need::Metrics.allowed_by(&producer));
        assert!(Need::Token.allowed_by(&producer));
        let consumer = vec![
            Grant::parse("group:billing").unwrap(),
            Grant::parse("read:orders").unwrap(),
        ];
        let read_through = |group: &str, topic: &str| Need::GroupRead {
            group: group.into(),
            topic: topic.into(),
        };
        assert!(read_through("billing", "orders").allowed_by(&consumer));
        assert!(!read_through("billing", "payments").allowed_by(&consumer));
        assert!(!read_through("other", "orders").allowed_by(&consumer));
        let admin = vec![Grant::Admin];
        for need in [
            Need::Admin,
            Need::Metrics,
            Need::Produce("x".into()),
            Need::ReadView("v".into()),
            read_through("g", "t"),
        ] {
            assert!(need.allowed_by(&admin), "{need:?}");
        }
    }
}
