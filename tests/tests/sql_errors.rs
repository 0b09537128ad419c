//! Bad SQL over HTTP answers `400 sql_error` with the line and column of
//! the mistake and changes nothing; unknown views answer `404
//! unknown_view`; a topic under a declared stream or view cannot be
//! deleted until they are dropped.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::brief::{HIGH_VALUE_ALERTS, PURCHASE_STATS, USER_EVENTS};
use kappa_tests::marks::marked;
use kappa_tests::{assert_error, json, Server, Value};

/// (SQL with the error position marked, words the message must contain).
const BAD_SQL: &[(&str, &str)] = &[
    // Syntax.
    ("¦SELEC * FROM purchase_stats;", "SELEC"),
    ("SHOW ¦FUNCTIONS;", "expected STREAMS, TABLES, VIEWS, TOPICS or CLUSTERS"),
    ("CREATE STREAM x AS SELECT * FROM user_events WHERE event_type = ¦'purchase;", "unterminated string"),
    ("CREATE STREAM s (a VARCHAR¦", "expected ',' or ')'"),
    ("CREATE STREAM s (a ¦FOO) WITH (KAFKA_TOPIC='t');", "expected a type"),
    // Names.
    ("CREATE STREAM x AS SELECT user_id FROM ¦nope;", "unknown stream 'nope'"),
    ("CREATE STREAM x AS SELECT ¦nope FROM user_events;", "unknown column 'nope'"),
    ("CREATE STREAM x AS SELECT ¦FOO(user_id) FROM user_events;", "unknown function 'FOO'"),
    // Aggregates.
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events WHERE ¦COUNT(*) > 1 GROUP BY user_id;", "aggregate COUNT(*) in WHERE"),
    ("CREATE TABLE x AS SELECT ¦event_type, COUNT(*) FROM user_events GROUP BY user_id;", "expected a GROUP BY column"),
    ("CREATE TABLE x AS SELECT ¦user_id, COUNT(*) FROM user_events;", "user_id"),
    ("¦CREATE TABLE x AS SELECT user_id FROM user_events;", "needs GROUP BY or an aggregate"),
    ("¦CREATE STREAM x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id;", "cannot aggregate"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id HAVING ¦event_type = 'a';", "add it to GROUP BY or aggregate it"),
    // Windows.
    (
        "CREATE TABLE x AS\nSELECT user_id, COUNT(*)\nFROM user_events\nWINDOW TUMBLING (SIZE 5 ¦FORTNIGHTS)\nGROUP BY user_id;",
        "expected a time unit",
    ),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events WINDOW TUMBLING (SIZE ¦five MINUTES);", "five"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events WINDOW ¦SLIDING (SIZE 1 MINUTE);", "expected TUMBLING, HOPPING or SESSION"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events ¦WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 2 MINUTES);", "advance must not exceed its size"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id ¦EMIT FINAL;", "EMIT FINAL needs a WINDOW clause"),
    // WITH properties.
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', ¦COLOR='red');", "unknown property COLOR"),
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT=¦'AVRO');", "'AVRO' is not supported"),
    ("CREATE STREAM x WITH (PARTITIONS=¦0) AS SELECT * FROM user_events;", "PARTITIONS must be a whole number"),
    // Not supported.
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id ¦PARTITION BY user_id;", "PARTITION BY applies to CREATE STREAM .. AS"),
    ("SELECT * FROM purchase_stats WHERE ¦WINDOWSTART <> 1;", "WINDOWSTART and WINDOWEND are compared with timestamps"),
    // Multi-line texts: the line and column in the whole text.
    (
        "SHOW TABLES;\n\nCREATE STREAM x AS\n  SELECT user_id\n  FROM user_events\n  WHERE amount > ¦> 3;",
        "expected an expression",
    ),
    (
        "SHOW STREAMS;\nCREATE STREAM y AS\n  SELECT user_id,\n         ¦nope\n  FROM user_events;",
        "unknown column 'nope'",
    ),
    (
        "CREATE STREAM ok_s (a INT) WITH (KAFKA_TOPIC='ok_t');\nCREATE STREAM z AS SELECT * FROM user_events\n  WHERE amount >¦\n;",
        "expected an expression",
    ),
    // Columns count characters, not bytes.
    ("CREATE STREAM x AS SELECT user_id AS \"ünïcödé\", ¦nope FROM user_events;", "unknown column 'nope'"),
];

/// Asserts `400 sql_error` at `line`:`column` with a message containing `want`.
fn assert_sql_error(text: &str, status: u16, body: &Value, line: u64, column: u64, want: &str) {
    assert_eq!(status, 400, "{text}\n{body}");
    let error = &body["error"];
    assert_eq!(error["code"], "sql_error", "{text}\n{body}");
    let message = error["message"].as_str().unwrap_or("");
    assert!(!message.trim().is_empty(), "{text}\n{body}");
    assert!(message.contains(want), "{text}\nwant {want:?} in {body}");
    let (l, c) = (error["line"].as_u64(), error["column"].as_u64());
    assert!(l >= Some(1) && c >= Some(1), "{text}\n{body}");
    assert_eq!((l, c), (Some(line), Some(column)), "{text}\n{body}");
}

#[test]
fn bad_sql_answers_400_with_its_position_and_unknown_views_404() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));

    assert!(BAD_SQL.len() >= 20);
    let mut distinct: Vec<&str> = BAD_SQL.iter().map(|(s, _)| *s).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), BAD_SQL.len(), "distinct statements");
    for (sql_text, want) in BAD_SQL {
        let (text, line, column) = marked(sql_text);
        let (status, body) = client.sql(&text);
        assert_sql_error(&text, status, &body, line, column, want);
    }
    // The same as JSON.
    let (text, line, column) = marked(BAD_SQL[5].0);
    let (status, body) = client.post_json("/v1/statements", &json!({ "sql": text }));
    assert_sql_error(&text, status, &body, line, column, BAD_SQL[5].1);

    // Nothing was created: a syntax error anywhere changes nothing, and the
    // statements that ran before a failing one only showed things.
    let shown = client.sql_ok("SHOW STREAMS; SHOW TABLES;");
    let names = |r: &Value| -> Vec<String> {
        r["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["name"].as_str().expect("name").to_string())
            .collect()
    };
    assert_eq!(names(&shown[0]), ["user_events"], "{shown:?}");
    assert_eq!(names(&shown[1]), ["purchase_stats"], "{shown:?}");
    for topic in ["t", "ok_t", "x", "y", "z"] {
        let (status, body) = client.get(&format!("/v1/topics/{topic}"));
        assert_error(topic, status, &body, 404, "unknown_topic");
    }

    // Unknown views.
    for path in [
        "/v1/views/nope",
        "/v1/views/nope/rows",
        "/v1/views/nope/rows?key=u1",
        "/v1/views/nope/changes",
    ] {
        let (status, body) = client.get(path);
        assert_error(path, status, &body, 404, "unknown_view");
    }
    for body in [json!({}), json!({"from": "earliest"})] {
        let (status, answer) = client.post_json("/v1/views/nope/replay", &body);
        assert_error("replay", status, &answer, 404, "unknown_view");
    }
    for text in ["DESCRIBE nope;", "DROP TABLE nope;", "SELECT * FROM nope;"] {
        let (status, body) = client.sql(text);
        assert_eq!(status, 404, "{text}: {body}");
        assert_eq!(body["error"]["code"], "unknown_view", "{text}: {body}");
    }

    // The topic under a declared stream and views cannot be deleted: 409,
    // naming them and the statements that drop them, readers of a derived
    // stream before it, views before the declaration; once they have run
    // it can.
    client.sql_ok(&format!(
        "{HIGH_VALUE_ALERTS}\nCREATE TABLE alerts_per_user AS SELECT user_id, COUNT(*) AS n \
         FROM high_value_alerts GROUP BY user_id;"
    ));
    let (status, body) = client.delete("/v1/topics/user_events");
    assert_error("delete topic", status, &body, 409, "has_dependents");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    let drops = "DROP TABLE alerts_per_user; DROP TABLE purchase_stats; \
                 DROP STREAM high_value_alerts; DROP STREAM user_events;";
    assert!(
        message.starts_with(r#"topic "user_events" is used by "#)
            && message.contains(r#"table "purchase_stats""#)
            && message.contains(r#"stream "high_value_alerts""#)
            && message.contains(r#"stream "user_events""#)
            && message.contains(drops),
        "{body}"
    );
    // Dropping one of them names what is in its way too.
    let (status, body) = client.sql("DROP STREAM high_value_alerts;");
    assert_error("drop a read stream", status, &body, 409, "has_dependents");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(r#"stream "high_value_alerts" is used by table "alerts_per_user""#)
            && message.contains("(DROP TABLE alerts_per_user;)"),
        "{body}"
    );
    client.sql_ok(drops);
    let (status, body) = client.delete("/v1/topics/user_events");
    assert_eq!(status, 204, "{body}");
}
