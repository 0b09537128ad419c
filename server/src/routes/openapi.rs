//! The OpenAPI document of `GET /v1/openapi.json`, assembled when first
//! asked for: the schemas are derived from the kappa-wire types (the ones
//! the server serializes and the CLI reads, `utoipa::ToSchema`), the
//! operations — summary, parameters, the schema of each answer and what
//! each error answer means — come from the table in `openapi/table.rs`.
//! `server/tests/http_contract.rs` checks the document against the router
//! and docs/http-api.md.

mod table;

use std::sync::OnceLock;

use kappa_wire::admin::{
    CreateToken, DegradedOut, ErrorBody, HistoryOut, NewToken, RevokedOut, StatusOut, TokensOut,
};
use kappa_wire::clusters::{ClustersOut, KappaClusterOut};
use kappa_wire::statements::{StatementsOut, StatementsRequest};
use kappa_wire::{
    AlterTopic, CommitRequest, CreateTopic, DiffOut, GroupOffsetsOut, GroupReadResponse, GroupsOut,
    OffsetsResponse, ProduceBody, ProduceResponse, ReadResponse, ReplayOut, ReplayRequest,
    ResetRequest, RowsOut, ServedOut, TopicOut, TopicsOut, ViewOut, ViewsOut,
};
use serde_json::{json, Map, Value};
use utoipa::OpenApi;

/// Every request and response type the operations name (the types they
/// hold are collected with them).
#[derive(OpenApi)]
#[openapi(components(schemas(
    ErrorBody,
    StatusOut,
    DegradedOut,
    HistoryOut,
    CreateTopic,
    AlterTopic,
    TopicOut,
    TopicsOut,
    ProduceBody,
    ProduceResponse,
    ReadResponse,
    GroupReadResponse,
    GroupsOut,
    CommitRequest,
    OffsetsResponse,
    GroupOffsetsOut,
    ResetRequest,
    StatementsRequest,
    StatementsOut,
    ViewOut,
    ViewsOut,
    RowsOut,
    ReplayRequest,
    ReplayOut,
    ServedOut,
    DiffOut,
    CreateToken,
    NewToken,
    TokensOut,
    RevokedOut,
    ClustersOut,
    KappaClusterOut,
)))]
struct Schemas;

/// One operation of the document.
pub(super) struct Op {
    /// `GET`, `POST`, `PATCH` or `DELETE`.
    pub method: &'static str,
    /// The path template, as the router has it.
    pub path: &'static str,
    /// `operationId`.
    pub id: &'static str,
    /// Its tag.
    pub tag: &'static str,
    /// One line.
    pub summary: &'static str,
    /// More, if anything.
    pub description: &'static str,
    /// False for the open routes (console, health, readiness).
    pub security: bool,
    /// Parameters: a shared one's name, or a parameter object (JSON).
    pub params: &'static [&'static str],
    /// Request body: content type and schema.
    pub body: &'static [(&'static str, &'static str)],
    /// The answers.
    pub responses: &'static [R],
}

/// One answer of an operation.
pub(super) enum R {
    /// A shared error answer (status, name in `components.responses`).
    Shared(u16, &'static str),
    /// Status, description, content type and schema (both empty: no body).
    Own(u16, &'static str, &'static str, &'static str),
}

/// A schema as the table gives it: a wire type's name (a reference), a
/// schema object (JSON), or nothing.
fn schema(s: &str) -> Option<Value> {
    if s.is_empty() {
        None
    } else if s.starts_with('{') {
        Some(serde_json::from_str(s).expect("the table's schemas are JSON"))
    } else {
        Some(json!({ "$ref": format!("#/components/schemas/{s}") }))
    }
}

/// A parameter as the table gives it.
fn parameter(p: &str) -> Value {
    if p.starts_with('{') {
        serde_json::from_str(p).expect("the table's parameters are JSON")
    } else {
        json!({ "$ref": format!("#/components/parameters/{p}") })
    }
}

/// The document.
pub fn document() -> Value {
    let mut doc = serde_json::to_value(Schemas::openapi()).expect("the document serializes");
    doc["info"] = json!({
        "title": "Kappa",
        "version": env!("CARGO_PKG_VERSION"),
        "description": table::DESCRIPTION,
    });
    doc["servers"] = json!([{ "url": "http://127.0.0.1:8080" }]);
    doc["security"] = json!([{ "bearer": [] }]);
    doc["tags"] = table::TAGS
        .iter()
        .map(|(name, description)| match *description {
            "" => json!({ "name": name }),
            d => json!({ "name": name, "description": d }),
        })
        .collect();
    let components = &mut doc["components"];
    components["securitySchemes"] = json!({
        "bearer": { "type": "http", "scheme": "bearer", "description": table::BEARER }
    });
    components["parameters"] = table::PARAMETERS
        .iter()
        .map(|(name, p)| (name.to_string(), parameter(p)))
        .collect::<Map<_, _>>()
        .into();
    components["responses"] = table::RESPONSES
        .iter()
        .map(|(name, description)| {
            let answer = json!({
                "description": description,
                "content": { "application/json": { "schema": schema("ErrorBody") } },
            });
            (name.to_string(), answer)
        })
        .collect::<Map<_, _>>()
        .into();
    let mut paths = Map::new();
    for op in table::OPERATIONS {
        let item = paths
            .entry(op.path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object");
        item.insert(op.method.to_lowercase(), operation(op));
    }
    doc["paths"] = paths.into();
    doc
}

/// One operation object.
fn operation(op: &Op) -> Value {
    let mut o = Map::new();
    o.insert("operationId".into(), op.id.into());
    o.insert("tags".into(), json!([op.tag]));
    o.insert("summary".into(), op.summary.into());
    if !op.description.is_empty() {
        o.insert("description".into(), op.description.into());
    }
    if !op.security {
        o.insert("security".into(), json!([]));
    }
    if !op.params.is_empty() {
        o.insert(
            "parameters".into(),
            op.params.iter().map(|p| parameter(p)).collect(),
        );
    }
    if !op.body.is_empty() {
        let content: Map<String, Value> = op
            .body
            .iter()
            .map(|(ct, s)| (ct.to_string(), json!({ "schema": schema(s) })))
            .collect();
        // A replay's body is optional (empty: every default).
        let required = !op.path.ends_with("/replay");
        o.insert(
            "requestBody".into(),
            json!({ "required": required, "content": content }),
        );
    }
    let mut responses = Map::new();
    for r in op.responses {
        match r {
            R::Shared(status, name) => {
                responses.insert(
                    status.to_string(),
                    json!({ "$ref": format!("#/components/responses/{name}") }),
                );
            }
            R::Own(status, description, ct, s) => {
                let answer = responses
                    .entry(status.to_string())
                    .or_insert_with(|| json!({ "description": description }));
                if let Some(s) = schema(s) {
                    answer["content"][*ct] = json!({ "schema": s });
                }
            }
        }
    }
    o.insert("responses".into(), responses.into());
    o.into()
}

/// The document as served (built once).
pub fn json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| serde_json::to_string_pretty(&document()).expect("JSON serializes"))
}
