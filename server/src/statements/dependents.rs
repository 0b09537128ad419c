//! What a `has_dependents` refusal tells the user: the objects in the way
//! and the SQL that drops them, in an order that works — a view before the
//! views whose input it writes are gone is refused, so readers of a view's
//! output topic come first, views before the declarations they read.

use std::collections::BTreeSet;

use kappa_processor::sql::ObjectKind;

use crate::views::catalog::Catalog;
use crate::views::ViewError;

/// `error` with its message naming the dependents and the statements that
/// drop them, when it is a [`ViewError::HasDependents`] (other errors are
/// answered unchanged). `what` names the object being removed
/// (`topic "user_events"`, `stream "clicks"`).
pub(crate) fn explain(error: ViewError, catalog: &Catalog, what: &str) -> ViewError {
    let ViewError::HasDependents { dependents, .. } = &error else {
        return error;
    };
    let statements = drop_statements(catalog, dependents);
    let named: Vec<String> = dependents
        .iter()
        .map(|name| match kind_of(catalog, name) {
            Some(kind) => format!("{kind} {name:?}"),
            None => format!("{name:?}"),
        })
        .collect();
    ViewError::Refused {
        code: "has_dependents",
        message: format!(
            "{what} is used by {}: drop them first ({})",
            named.join(", "),
            statements.join(" ")
        ),
    }
}

/// Whether `name` is a stream or a table (None: not in the catalog).
fn kind_of(catalog: &Catalog, name: &str) -> Option<ObjectKind> {
    match (catalog.views.get(name), catalog.sources.get(name)) {
        (Some(view), _) if view.is_table() => Some(ObjectKind::Table),
        (Some(_), _) => Some(ObjectKind::Stream),
        (None, Some(decl)) => Some(decl.kind),
        (None, None) => None,
    }
}

/// `DROP TABLE x;` / `DROP STREAM x;` for `names` and every view reading
/// what a view among them writes: readers before writers, views before
/// declarations, by name otherwise.
fn drop_statements(catalog: &Catalog, names: &[String]) -> Vec<String> {
    // Views in the way, with the readers of their output topics (a view is
    // refused a drop while another view reads its output).
    let mut views: BTreeSet<&str> = BTreeSet::new();
    let mut todo: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| catalog.views.contains_key(*n))
        .collect();
    while let Some(name) = todo.pop() {
        if !views.insert(name) {
            continue;
        }
        if let Some(topic) = catalog.views[name].output_topic() {
            for reader in catalog.views.values() {
                if reader.name != name && reader.input_topics().iter().any(|t| t == topic) {
                    todo.push(&reader.name);
                }
            }
        }
    }
    let mut ordered: Vec<&str> = Vec::new();
    while !views.is_empty() {
        // Views none of the remaining ones reads from; all of them if a
        // cycle leaves none.
        let free: Vec<&str> = views
            .iter()
            .copied()
            .filter(|&v| {
                let Some(topic) = catalog.views[v].output_topic() else {
                    return true;
                };
                !views
                    .iter()
                    .any(|&r| r != v && catalog.views[r].input_topics().iter().any(|t| t == topic))
            })
            .collect();
        let next = if free.is_empty() {
            views.iter().copied().collect()
        } else {
            free
        };
        for v in next {
            views.remove(v);
            ordered.push(v);
        }
    }
    let sources = names
        .iter()
        .map(String::as_str)
        .filter(|n| !catalog.views.contains_key(*n) && catalog.sources.contains_key(*n));
    ordered
        .into_iter()
        .chain(sources)
        .map(|name| {
            let kind = kind_of(catalog, name).unwrap_or(ObjectKind::Stream);
            format!(
                "DROP {} {};",
                kind.to_string().to_uppercase(),
                sql_name(name)
            )
        })
        .collect()
}

/// `name` as SQL finds it: quoted unless unquoted SQL keeps its spelling.
fn sql_name(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{name}\"")
    }
}
