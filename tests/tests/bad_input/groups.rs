//! Corpus sections about consumer groups: reset targets, commits and group
//! names.

use super::corpus::*;
use super::*;

/// Reset targets: 400 bad_request.
pub(crate) fn reset_targets(c: &mut Corpus, _ends: &[u64]) {
    for to in [
        json!("middle"),
        json!({"offset": -1}),
        json!({"offset": 3, "timestamp": 5}),
        json!({"offset": 3, "bogus": 1}),
        json!({"offset": 1.5}),
        json!({"timestamp": "x"}),
        json!({}),
        json!(5),
        json!(null),
    ] {
        c.post_json(
            format!("reset to {to}"),
            "/v1/groups/g/reset",
            json!({"topic": TOPIC, "to": to}).to_string(),
            400,
            BAD_REQUEST,
        );
    }
    c.post_json(
        "reset without `to`",
        "/v1/groups/g/reset",
        json!({"topic": TOPIC}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "reset with an unknown field",
        "/v1/groups/g/reset",
        json!({"topic": TOPIC, "to": "earliest", "bogus": 1}).to_string(),
        400,
        BAD_REQUEST,
    );
}

/// Commits.
pub(crate) fn commits(c: &mut Corpus, ends: &[u64]) {
    c.post_json(
        "commit beyond the end",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": ends[0] + 1}]}).to_string(),
        400,
        OFFSET_OUT_OF_RANGE,
    );
    c.post_json(
        "commit with ONE good and ONE offset beyond the end",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": 0},
                                            {"partition": 1, "offset": ends[1] + 1}]})
        .to_string(),
        400,
        OFFSET_OUT_OF_RANGE,
    );
    c.post_json(
        "commit at u64::MAX",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": u64::MAX}]}).to_string(),
        400,
        OFFSET_OUT_OF_RANGE,
    );
    c.post_json(
        "commit of an empty offsets list",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": []}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "commit of a negative offset",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": -1}]}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "commit without offsets",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "commit of malformed JSON",
        "/v1/groups/g/offsets",
        r#"{"topic":"good","offsets":[{"partition":0,"offset":0}"#,
        400,
        BAD_REQUEST,
    );
}

/// Group names: 400 invalid_group.
pub(crate) fn group_names(c: &mut Corpus, _ends: &[u64]) {
    let long_group = "g".repeat(256);
    for group in ["g%01x", "g%0Ax", "g%7Fx", long_group.as_str()] {
        let shown = shorten(group, 12);
        c.post_json(
            format!("commit as group {shown:?}"),
            format!("/v1/groups/{group}/offsets"),
            commit_body(),
            400,
            INVALID_GROUP,
        );
        c.post_json(
            format!("reset as group {shown:?}"),
            format!("/v1/groups/{group}/reset"),
            reset_body(),
            400,
            INVALID_GROUP,
        );
        c.get(
            format!("group read as group {shown:?}"),
            group_read(group, ""),
            400,
            INVALID_GROUP,
        );
        c.get(
            format!("offsets listing of group {shown:?}"),
            format!("/v1/groups/{group}/offsets?topic={TOPIC}"),
            400,
            INVALID_GROUP,
        );
        c.get(
            format!("offsets listing (all topics) of group {shown:?}"),
            format!("/v1/groups/{group}/offsets"),
            400,
            INVALID_GROUP,
        );
    }
}
