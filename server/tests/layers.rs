//! The server's layers, checked from its source: the frontends (the HTTP
//! API and console, the Kafka listener, the CLI client) import the node
//! core and the wire types, never each other; the core imports no
//! frontend; the wire types import nothing of the server. And the one
//! authorization decision: the Kafka listener asks `Session::allows`
//! (which asks `auth::authorize`), never a principal's grants directly.
//! And the server runs and reads views through `kappa_processor::host`,
//! never the processor's runners or stores, nor RocksDB.
//!
//! A reference is any `crate::<module>` path outside comments, including
//! each item of a `use crate::{a, b::c}` group. ARCHITECTURE.md describes
//! the layers; this test keeps it true.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer of each top-level module of `server/src`.
fn layer_of(module: &str) -> Option<&'static str> {
    Some(match module {
        // The HTTP frontend: accept loop, routes and console, status map.
        "http" | "routes" | "error" => "http frontend",
        "kafka" => "kafka frontend",
        "pg" => "pg frontend",
        "cli" => "cli frontend",
        "node" | "auth" | "config" | "datadir" | "views" | "statements" | "history" | "metrics"
        | "tls" | "clusters" | "nodes" => "core",
        "dto" => "wire",
        // lib.rs/main.rs wire everything together; `fuzzing` exposes
        // decoders to the fuzz targets.
        "lib" | "main" | "fuzzing" => "root",
        _ => return None,
    })
}

/// What the crate root re-exports, by the module that defines it.
fn root_item_module(item: &str) -> &str {
    match item {
        "AppState" => "node",
        "ServerConfig" => "config",
        other => other,
    }
}

/// May a module of layer `from` reference one of layer `to`?
fn allowed(from: &str, to: &str) -> bool {
    from == to
        || from == "root"
        || to == "root"
        || match from {
            "core" => to == "wire",
            "wire" => false,
            _ => to == "core" || to == "wire",
        }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without `//` comments (doc comments included) and string
/// contents are kept: a path in a string is rare and would only be a
/// false alarm, never a miss.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first identifier of every `crate::` path in `code`.
fn crate_references(code: &str) -> Vec<String> {
    references(code, "crate::")
}

/// The first identifier after `prefix` (a crate and `::`) of every path
/// starting with it in `code`, including each item of a `{..}` group.
fn references(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `kappa_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: depth-1 identifiers.
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && (c.is_alphabetic() || c == '_') => {
                        item_start = false;
                        out.push(identifier(&group[i..]));
                    }
                    _ => {}
                }
            }
        } else {
            out.push(identifier(rest));
        }
    }
    out
}

fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level module a file of `server/src` belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    Path::new(first)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn no_frontend_imports_another_and_the_core_imports_none() {
    let src = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let from = layer_of(&module)
            .unwrap_or_else(|| panic!("{}: module {module} has no layer here", file.display()));
        let code = without_comments(&std::fs::read_to_string(file).unwrap());
        for reference in crate_references(&code) {
            if reference == "self" || reference.is_empty() {
                continue;
            }
            let target = root_item_module(&reference);
            let to = layer_of(target).unwrap_or("root");
            if !allowed(from, to) {
                wrong
                    .entry(format!(
                        "{} ({from})",
                        file.strip_prefix(&src).unwrap().display()
                    ))
                    .or_default()
                    .push(format!("crate::{reference} ({to})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "references across layers (see ARCHITECTURE.md):\n{}",
        wrong
            .iter()
            .map(|(file, refs)| format!("  {file} -> {}", refs.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_kafka_listener_asks_the_one_authorization_decision() {
    let kafka = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("src/kafka");
    let mut files = Vec::new();
    rust_files(&kafka, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let code = without_comments(&std::fs::read_to_string(file).unwrap());
        for (n, line) in code.lines().enumerate() {
            for direct in [
                ".may(",
                ".may_see_",
                ".may_commit(",
                "allowed_by(",
                ".grants",
            ] {
                if line.contains(direct) {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Kafka handlers decide authorization themselves instead of asking \
         Session::allows (auth::authorize):\n{}",
        found.join("\n")
    );
}

/// The processor's modules the server may use: the language (SQL, plans,
/// expressions, timestamps), the data it answers with (rows, changes, diffs,
/// progress, errors), `host`, the one way to run views and read them, and
/// `source`, the interface their inputs are read through (the server hands
/// in its clusters), and `spread`, the interfaces of a version spread over
/// a Kappa cluster's nodes (the server hands in which partitions this node
/// owns and where checkpoints go), and `read_cancel`, how whoever runs a
/// statement stops the view reads it started. Runners, stores and RocksDB
/// stay behind `host`.
const PROCESSOR_SURFACE: &[&str] = &[
    "accumulators",
    "changes",
    "diff",
    "dsl",
    "error",
    "event",
    "expr",
    "host",
    "read_cancel",
    "limits",
    "plan",
    "progress",
    "sink",
    "source",
    "spread",
    "sql",
    "time",
    "view",
    "window",
];

#[test]
fn the_server_hosts_views_through_the_processors_host_only() {
    let src = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        // White-box unit tests inject faults into stores.
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let code = without_comments(&std::fs::read_to_string(file).unwrap());
        // A file's unit tests (its last item) may too.
        let code = code
            .split("#[cfg(test)]\nmod tests {")
            .next()
            .unwrap_or_default();
        for module in references(code, "kappa_processor::") {
            if !PROCESSOR_SURFACE.contains(&module.as_str()) {
                found.push(format!("{}: kappa_processor::{module}", file.display()));
            }
        }
        if code.contains("rocksdb::") {
            found.push(format!("{}: rocksdb", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "the server reaches past kappa_processor::host into the engine:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reference_scanner_reads_groups_and_skips_comments() {
    let code = without_comments(
        "use crate::{auth::{self, Need}, node::AppState};\n\
         // crate::kafka in a comment\n\
         let x = crate::views::open(); /// crate::cli\n",
    );
    assert_eq!(crate_references(&code), ["auth", "node", "views"]);
    assert_eq!(
        references(
            "use kappa_processor::{host::Scope, state::store::Store};",
            "kappa_processor::"
        ),
        ["host", "state"]
    );
}
