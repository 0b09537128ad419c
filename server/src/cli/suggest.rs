//! "Did you mean": the existing names closest to a mistyped one, by edit
//! distance (Levenshtein, case-insensitive), for the errors naming an
//! unknown view, topic or group.

use super::http::{ApiError, Client};

/// Most names suggested.
const MAX_SUGGESTIONS: usize = 3;

/// Edits (insert, delete, substitute one character) from `a` to `b`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The `candidates` close to `name`, closest first: at most a third of
/// its characters (at least one) edited, fewer edits than it has
/// characters, and at most one edit more than the closest.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let name = name.to_lowercase();
    let length = name.chars().count();
    let limit = (length / 3).max(1);
    let mut near: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(&name, &c.to_lowercase()), c))
        .filter(|&(d, _)| d <= limit && d < length)
        .collect();
    near.sort();
    near.dedup();
    // Far ones are noise next to a near one.
    let best = near.first().map_or(0, |&(d, _)| d);
    near.into_iter()
        .take_while(|&(d, _)| d <= best + 1)
        .take(MAX_SUGGESTIONS)
        .map(|(_, c)| c)
        .collect()
}

/// `; did you mean a, b or c?`, or nothing without suggestions.
pub fn did_you_mean(suggestions: &[&str]) -> String {
    match suggestions {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        [rest @ .., last] => format!("; did you mean {} or {last}?", rest.join(", ")),
    }
}

/// What a command names: a view or a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A view (`unknown_view` when it does not exist).
    View(String),
    /// A topic (`unknown_topic` when it does not exist).
    Topic(String),
}

/// `error` with the existing names closest to the one `named` added to its
/// message when it is the server's `unknown_view` or `unknown_topic` for
/// that kind of object; any other error unchanged. The names come from
/// `GET /v1/views` or `GET /v1/topics`; if that fails, nothing is added.
pub fn unknown(client: &Client, named: &Named, mut error: anyhow::Error) -> anyhow::Error {
    let Some(api) = error.downcast_mut::<ApiError>() else {
        return error;
    };
    let (name, list, field) = match named {
        Named::View(name) if api.code == "unknown_view" => (name, "/v1/views", "views"),
        Named::Topic(name) if api.code == "unknown_topic" => (name, "/v1/topics", "topics"),
        _ => return error,
    };
    let Ok(list) = client.get_json::<serde_json::Value>(list, &[]) else {
        return error;
    };
    let names = list[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str());
    api.message.push_str(&did_you_mean(&closest(name, names)));
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("purchse_stats", "purchase_stats"), 1);
        assert_eq!(edit_distance("é", "e"), 1);
    }

    #[test]
    fn suggests_close_names_closest_first() {
        let views = ["purchase_stats", "purchase_totals", "high_value_alerts"];
        assert_eq!(closest("purchase_stat", views), ["purchase_stats"]);
        assert_eq!(closest("Purchase_Stats", views), ["purchase_stats"]);
        assert_eq!(
            closest("purchase_stat", ["purchase_stats", "purchase_state"]),
            ["purchase_state", "purchase_stats"]
        );
        assert!(closest("zzzzzzzzzz", views).is_empty());
        assert!(closest("g", ["h"]).is_empty());
    }

    #[test]
    fn phrases_suggestions() {
        assert_eq!(did_you_mean(&[]), "");
        assert_eq!(did_you_mean(&["a"]), "; did you mean a?");
        assert_eq!(did_you_mean(&["a", "b", "c"]), "; did you mean a, b or c?");
    }
}
