//! The HTTP contract is one thing: the routes the router serves, the
//! OpenAPI document it serves (derived from the kappa-wire types), and
//! docs/http-api.md must agree. Each test names what disagrees.
//!
//! The conventions docs/http-api.md follows (stated at its top):
//! - every route appears as `` `METHOD /path` `` (a query string or `[` may
//!   follow the path inside the backticks);
//! - every field of a route's success answer appears — as `` `field` `` or
//!   `"field"` — in the section that names the route (from its heading to
//!   the next heading); a field of a type another route answers (a view in
//!   a `DESCRIBE`) is that route's to document;
//! - the settings table ("Server settings") names exactly the fields of
//!   `ServerConfig`, first in each row;
//! - the metrics table ("Metrics") names only metrics the code defines, and
//!   it and docs/kafka.md together name all of them.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use kappa_server::config::ServerConfig;
use kappa_server::routes::{openapi, routes};
use serde_json::Value;

/// The workspace root.
fn root() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .parent()
    .expect("server/ is in the workspace")
    .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn http_api() -> String {
    read("docs/http-api.md")
}

const METHODS: [&str; 5] = ["GET", "POST", "PATCH", "DELETE", "PUT"];

/// Every `` `METHOD /path` `` the text names.
fn named_routes(text: &str) -> BTreeSet<(String, String)> {
    let mut named = BTreeSet::new();
    for span in text.split('`').skip(1).step_by(2) {
        let Some((method, rest)) = span.split_once(' ') else {
            continue;
        };
        if !METHODS.contains(&method) || !rest.starts_with('/') {
            continue;
        }
        let path = rest
            .split(['?', '[', ' '])
            .next()
            .expect("split yields one part");
        named.insert((method.to_string(), path.to_string()));
    }
    named
}

fn served() -> BTreeSet<(String, String)> {
    routes()
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect()
}

fn documented_operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            ops.insert((method.to_uppercase(), path.clone()));
        }
    }
    ops
}

#[test]
fn the_document_describes_exactly_the_routes_the_router_serves() {
    let doc = openapi::document();
    assert_eq!(
        doc["openapi"].as_str().map(|v| v.starts_with("3.")),
        Some(true)
    );
    let documented = documented_operations(&doc);
    let served = served();
    let missing: Vec<_> = served.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&served).collect();
    assert!(
        missing.is_empty(),
        "served but not in the document: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "in the document but not served: {extra:?}"
    );
    // What is served is the document built here.
    let served_doc: Value = serde_json::from_str(openapi::json()).unwrap();
    assert_eq!(served_doc, doc);
}

#[test]
fn docs_name_exactly_the_routes_the_router_serves() {
    let named = named_routes(&http_api());
    let served = served();
    let missing: Vec<_> = served.difference(&named).collect();
    let extra: Vec<_> = named.difference(&served).collect();
    assert!(
        missing.is_empty(),
        "served but not named in docs/http-api.md as `METHOD /path`: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "named in docs/http-api.md but not served: {extra:?}"
    );
}

#[test]
fn every_operation_documents_its_error_shape() {
    let doc = openapi::document();
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !path.starts_with("/v1/") || path == "/v1/openapi.json" {
                continue;
            }
            let has_error = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .any(|status| status.starts_with('4') || status.starts_with('5'));
            assert!(has_error, "{method} {path} documents no error response");
        }
    }
    // Every reference resolves.
    let text = doc.to_string();
    for piece in text.split("\"$ref\":\"#/components/").skip(1) {
        let target = piece.split('"').next().unwrap();
        let (kind, name) = target.split_once('/').unwrap();
        assert!(
            doc["components"][kind][name].is_object(),
            "dangling reference #/components/{target}"
        );
    }
}

/// The schema a JSON success answer of `op` has, if any.
fn success_schema(op: &Value) -> Option<&Value> {
    op["responses"]
        .as_object()?
        .iter()
        .filter(|(status, _)| status.starts_with('2'))
        .find_map(|(_, r)| r["content"]["application/json"].get("schema"))
}

fn ref_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")?
        .as_str()?
        .strip_prefix("#/components/schemas/")
}

/// Every property name in `schema`, through references, compositions,
/// arrays and maps; a reference to one of `owned` (a type another route
/// answers) is not followed.
fn fields(
    doc: &Value,
    schema: &Value,
    owned: &BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    out: &mut BTreeSet<String>,
) {
    if let Some(name) = ref_name(schema) {
        if owned.contains(name) || !seen.insert(name.to_string()) {
            return;
        }
        let target = &doc["components"]["schemas"][name];
        return fields(doc, target, owned, seen, out);
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            out.insert(name.clone());
            fields(doc, prop, owned, seen, out);
        }
    }
    for key in ["allOf", "oneOf", "anyOf", "prefixItems"] {
        for s in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            fields(doc, s, owned, seen, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(s) = schema.get(key).filter(|s| s.is_object()) {
            fields(doc, s, owned, seen, out);
        }
    }
}

/// The section of `text` that documents `` `method path` ``: from the
/// heading before the mention to the next heading. A heading that names
/// the route wins, then a list item that starts with it, then the first
/// mention.
fn section<'a>(text: &'a str, method: &str, path: &str) -> Option<&'a str> {
    let needle = format!("`{method} {path}");
    let at = text
        .match_indices(&needle)
        .map(|(i, _)| i)
        .filter(|&i| text[i + needle.len()..].starts_with(['`', '?', '[', ' ']))
        .min_by_key(|&i| {
            let line = &text[text[..i].rfind('\n').map_or(0, |l| l + 1)..i];
            let rank = if line.starts_with('#') {
                0
            } else if line.trim() == "-" {
                1
            } else {
                2
            };
            (rank, i)
        })?;
    let start = text[..at].rfind("\n#").map_or(0, |i| i + 1);
    let end = text[at..].find("\n#").map_or(text.len(), |i| at + i);
    Some(&text[start..end])
}

fn mentions(section: &str, field: &str) -> bool {
    [
        format!("`{field}`"),
        format!("\"{field}\""),
        format!("`{field}:"),
        format!("`{field}=",),
        format!("`{field}["),
    ]
    .iter()
    .any(|form| section.contains(form.as_str()))
}

#[test]
fn docs_document_every_field_of_every_answer() {
    let doc = openapi::document();
    let text = http_api();
    let mut answers = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if let Some(schema) = success_schema(op) {
                answers.insert((method.to_uppercase(), path.clone()), schema.clone());
            }
        }
    }
    let owned: BTreeMap<String, (String, String)> = answers
        .iter()
        .filter_map(|(route, s)| Some((ref_name(s)?.to_string(), route.clone())))
        .collect();

    // A type several routes answer (a topic: create, describe, alter) is
    // documented once, in any of their sections.
    let mut by_type: BTreeMap<String, (Value, Vec<(String, String)>)> = BTreeMap::new();
    for (route, schema) in &answers {
        let key = ref_name(schema).map_or_else(|| schema.to_string(), str::to_string);
        by_type
            .entry(key)
            .or_insert_with(|| (schema.clone(), Vec::new()))
            .1
            .push(route.clone());
    }
    let mut undocumented = Vec::new();
    for (name, (schema, routes)) in &by_type {
        let mut sections = String::new();
        for (method, path) in routes {
            match section(&text, method, path) {
                Some(s) => sections.push_str(s),
                None => undocumented.push(format!("{method} {path}: no section names it")),
            }
        }
        // This answer's own type is followed; other routes' types are not.
        let others: BTreeSet<String> = owned.keys().filter(|n| *n != name).cloned().collect();
        let mut names = BTreeSet::new();
        fields(&doc, schema, &others, &mut BTreeSet::new(), &mut names);
        for field in names {
            if !mentions(&sections, &field) {
                undocumented.push(format!("{routes:?} ({name}): `{field}`"));
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "answer fields docs/http-api.md does not mention in the route's section:\n{}",
        undocumented.join("\n")
    );
}

/// The rows of the first table after the heading `heading`: their cells.
fn table_rows(text: &str, heading: &str) -> Vec<Vec<String>> {
    let at = text
        .find(heading)
        .unwrap_or_else(|| panic!("docs/http-api.md has no {heading:?}"));
    let rest = &text[at..];
    let end = rest[heading.len()..]
        .find("\n#")
        .map_or(rest.len(), |i| heading.len() + i);
    rest[..end]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and the separator
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The names in backticks in `cell`.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_settings_table_lists_exactly_the_server_settings() {
    let config = serde_json::to_value(ServerConfig::default()).expect("the config serializes");
    let fields: BTreeSet<String> = config
        .as_object()
        .expect("the config is an object")
        .keys()
        .cloned()
        .collect();
    let mut listed = BTreeSet::new();
    for row in table_rows(&http_api(), "### Server settings") {
        // `name` / `--flag` / `KAPPA_NAME`: the TOML names come first.
        let toml = row[0].split(" / ").next().unwrap_or_default();
        listed.extend(
            ticked(toml)
                .into_iter()
                .filter(|n| !n.starts_with("KAPPA_")),
        );
    }
    let missing: Vec<_> = fields.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&fields).collect();
    assert!(
        missing.is_empty(),
        "ServerConfig fields the settings table of docs/http-api.md lacks: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "settings in docs/http-api.md that ServerConfig lacks: {extra:?}"
    );
}

/// Every `pub const NAME: &str = "kappa_..."` of the crates' metric files.
fn defined_metrics() -> BTreeSet<String> {
    let files = [
        "server/src/metrics.rs",
        "server/src/tls.rs",
        "log/src/metrics.rs",
        "processor/src/metrics.rs",
        "server/cluster/src/source.rs",
        "server/cluster/src/sink.rs",
    ];
    let mut names = BTreeSet::new();
    for file in files {
        for line in read(file).lines() {
            let line = line.trim();
            if !line.starts_with("pub const ") || !line.contains(": &str = \"kappa_") {
                continue;
            }
            let name = line.split('"').nth(1).expect("a quoted name");
            names.insert(name.to_string());
        }
    }
    assert!(names.len() > 30, "found only {names:?}");
    names
}

#[test]
fn the_metrics_table_and_the_listener_docs_list_exactly_the_metrics() {
    let defined = defined_metrics();
    let mut listed = BTreeSet::new();
    for row in table_rows(&http_api(), "## Metrics") {
        listed.extend(
            ticked(&row[0])
                .into_iter()
                .filter(|n| n.starts_with("kappa_")),
        );
    }
    // The Kafka and PostgreSQL listeners' metrics are listed in their own
    // documents.
    let listeners = read("docs/kafka.md") + &read("docs/pg.md");
    let extra: Vec<_> = listed.difference(&defined).collect();
    assert!(
        extra.is_empty(),
        "metrics in the table of docs/http-api.md no code defines: {extra:?}"
    );
    let missing: Vec<_> = defined
        .iter()
        .filter(|m| !listed.contains(*m) && !listeners.contains(&format!("`{m}")))
        .collect();
    assert!(
        missing.is_empty(),
        "metrics neither the table of docs/http-api.md nor docs/kafka.md nor docs/pg.md lists: {missing:?}"
    );
}
