//! The OpenAPI document describes exactly the routes the router serves.

use std::collections::BTreeSet;

use kappa_server::routes::{routes, OPENAPI_JSON};

#[test]
fn openapi_paths_match_the_routes_the_router_serves() {
    let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).expect("openapi.json is JSON");
    assert_eq!(
        doc["openapi"].as_str().map(|v| v.starts_with("3.")),
        Some(true)
    );
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "delete", "patch"] {
            if item.get(method).is_some() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    // The router is built from this table: a route added without
    // documenting it fails here.
    let served: BTreeSet<(String, String)> = routes()
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let missing: Vec<_> = served.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&served).collect();
    assert!(missing.is_empty(), "served but not documented: {missing:?}");
    assert!(extra.is_empty(), "documented but not served: {extra:?}");
}

#[test]
fn every_operation_documents_its_error_shape() {
    let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
    assert!(doc["components"]["schemas"]["Error"].is_object());
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !path.starts_with("/v1/")
                || path == "/v1/openapi.json"
                || op.get("responses").is_none()
            {
                continue;
            }
            let has_error = op["responses"]
                .as_object()
                .unwrap()
                .iter()
                .any(|(status, _)| status.starts_with('4') || status.starts_with('5'));
            assert!(has_error, "{method} {path} documents no error response");
        }
    }
}
