//! The bad-SQL corpus: each statement must fail with a recognizable message
//! at the position marked `¦` in the text (the marker is removed before
//! parsing; 1-based line and column in characters).

use super::brief::USER_EVENTS;
use super::marks::marked;
use super::*;

const USERS: &str =
    "CREATE TABLE users (id VARCHAR PRIMARY KEY, name VARCHAR, tier VARCHAR) WITH (TOPIC='users')";

const CLICKS: &str =
    "CREATE STREAM clicks (user_id VARCHAR KEY, page VARCHAR, at BIGINT) WITH (TOPIC='clicks', TIMESTAMP='at')";

fn catalog() -> Vec<SourceDecl> {
    [USER_EVENTS, USERS, CLICKS]
        .iter()
        .map(|s| match parse(s).unwrap().remove(0) {
            Statement::CreateSource(d) => d,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Parses (and plans, for CREATE .. AS) and returns the first error.
fn first_error(sql: &str) -> Option<SqlError> {
    let statements = match parse(sql) {
        Ok(s) => s,
        Err(e) => return Some(e),
    };
    let cat = catalog();
    statements.iter().find_map(|s| match s {
        Statement::CreateAs(c) => plan(c, &cat).err(),
        Statement::Explain(Explain::Create(c)) => plan(c, &cat).err(),
        Statement::InsertInto(i) => insert_create(i, "target")
            .and_then(|c| plan(&c, &cat))
            .err(),
        _ => None,
    })
}

const CASES: &[(&str, &str)] = &[
    // Statement level.
    ("¦", "expected a statement"),
    ("¦SELEC * FROM v", "expected CREATE, DROP, SHOW, DESCRIBE, SELECT, EXPLAIN, INSERT, REPLAY, PROMOTE or ROLLBACK, found 'SELEC'"),
    // Version changes.
    ("REPLAY v FROM ¦YESTERDAY", "expected EARLIEST, LATEST, TIMESTAMP or OFFSETS after FROM"),
    ("REPLAY v FROM TIMESTAMP ¦'soon'", "expected milliseconds since the epoch or an RFC 3339 time"),
    ("REPLAY v FROM OFFSETS (1, ¦-2)", "expected an offset (a whole number)"),
    ("REPLAY v FROM OFFSETS (1¦", "expected ',' or ')' after an offset"),
    ("REPLAY v WITH (SWAP = ¦'LATER')", "SWAP must be 'AUTO' or 'MANUAL'"),
    ("REPLAY v WITH (ALLOW_TRUNCATED = ¦'yes')", "expected TRUE or FALSE as the value of ALLOW_TRUNCATED"),
    ("REPLAY v WITH (¦COLOR = 'red')", "unknown property COLOR in REPLAY"),
    ("REPLAY v ¦NOW", "expected FROM .., WITH (..) or the end of statement after REPLAY name"),
    ("PROMOTE v ¦w", "expected end of statement after PROMOTE name"),
    ("ROLLBACK¦", "expected the name of a view after ROLLBACK"),
    ("SHOW ¦FUNCTIONS", "expected STREAMS, TABLES, VIEWS, TOPICS or CLUSTERS"),
    ("DROP STREAM IF EXISTS¦", "expected the name of the stream to drop, found end of statement"),
    ("DESCRIBE a ¦b", "expected end of statement after DESCRIBE name"),
    ("SELECT * FROM v WHERE k = ¦'abc", "unterminated string literal"),
    // Declarations.
    ("CREATE STREAM s (a VARCHAR¦", "expected ',' or ')' after a column definition, found end of statement"),
    ("CREATE STREAM s (a ¦FOO) WITH (KAFKA_TOPIC='t')", "expected a type"),
    ("CREATE STREAM s (a INT)¦", "expected WITH (KAFKA_TOPIC = '..') after the columns"),
    ("CREATE STREAM s (a INT) WITH (VALUE_FORMAT='JSON')¦", "needs WITH (KAFKA_TOPIC = 'topic')"),
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT=¦'AVRO')", "VALUE_FORMAT 'AVRO' is not supported"),
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', ¦COLOR='red')", "unknown property COLOR in CREATE STREAM"),
    ("CREATE TABLE ¦t (a INT, b INT) WITH (KAFKA_TOPIC='t')", "needs a PRIMARY KEY column"),
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', WATERMARK_DELAY=¦'5 FORTNIGHTS')", "expected a duration such as '5 SECONDS'"),
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', TIMESTAMP=¦'nope')", "TIMESTAMP names unknown column 'nope'"),
    ("CREATE STREAM s (a ¦DECIMAL(2, 5)) WITH (KAFKA_TOPIC='t')", "scale not above it"),
    ("CREATE STREAM s (a INT, ¦A INT) WITH (KAFKA_TOPIC='t')", "column 'A' is declared twice"),
    ("CREATE STREAM s (a INT ¦PRIMARY KEY) WITH (KAFKA_TOPIC='t')", "PRIMARY KEY is for tables"),
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', PARTITIONS=1, ¦PARTITIONS=2)", "property PARTITIONS is given twice"),
    // Windows and EMIT.
    (
        "CREATE TABLE x AS\nSELECT user_id, COUNT(*)\nFROM user_events\nWINDOW TUMBLING (SIZE 5 ¦FORTNIGHTS)\nGROUP BY user_id",
        "expected a time unit",
    ),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events WINDOW ¦SLIDING (SIZE 1 MINUTE)", "expected TUMBLING, HOPPING or SESSION"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events WINDOW HOPPING (SIZE 1 MINUTE¦)", "expected ',' and ADVANCE BY"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events ¦WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 2 MINUTES)", "advance must not exceed its size"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events WINDOW TUMBLING (SIZE 1 MINUTE, RETENTION 1 DAY, ¦RETENTION 2 DAYS)", "RETENTION is given twice"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events ¦WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 1 HOUR, RETENTION 1 MINUTE)", "must be at least the GRACE PERIOD"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events EMIT ¦SOMETIMES", "expected CHANGES or FINAL after EMIT"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events EMIT CHANGES ¦LIMIT 1", "expected end of statement after the EMIT clause"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id ¦EMIT FINAL", "EMIT FINAL needs a WINDOW clause"),
    ("CREATE STREAM x AS SELECT * FROM user_events ¦WINDOW TUMBLING (SIZE 1 MINUTE)", "a WINDOW clause needs GROUP BY or an aggregate"),
    ("CREATE TABLE x AS SELECT user_id, ¦WINDOWSTART, COUNT(*) FROM user_events GROUP BY user_id", "WINDOWSTART and WINDOWEND need a WINDOW clause"),
    // Queries.
    ("CREATE STREAM x AS SELECT user_id FROM user_events WHERE¦", "expected an expression, found end of statement"),
    ("CREATE STREAM x AS SELECT user_id FROM ¦nope", "unknown stream 'nope'"),
    ("CREATE STREAM x AS SELECT * FROM ¦users", "'users' is a table, not a stream"),
    ("CREATE STREAM x AS SELECT ¦nope FROM user_events", "unknown column 'nope': stream 'user_events' has user_id"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events WHERE ¦COUNT(*) > 1 GROUP BY user_id", "aggregate COUNT(*) in WHERE"),
    ("CREATE TABLE x AS SELECT ¦event_type, COUNT(*) FROM user_events GROUP BY user_id", "expected a GROUP BY column, a window bound or an aggregate, found 'event_type'"),
    ("CREATE TABLE x AS SELECT user_id, SUM(amount) * ¦event_type FROM user_events GROUP BY user_id", "found 'event_type' in 'SUM(amount) * event_type': add it to GROUP BY"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) + ¦WINDOWSTART FROM user_events GROUP BY user_id", "WINDOWSTART and WINDOWEND need a WINDOW clause"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) AS ¦\"#n\" FROM user_events GROUP BY user_id", "must not start with '#'"),
    ("CREATE TABLE x AS SELECT user_id, SUM(¦COUNT(*)) FROM user_events GROUP BY user_id", "aggregates cannot be nested"),
    ("¦CREATE TABLE x AS SELECT user_id FROM user_events", "CREATE TABLE .. AS needs GROUP BY or an aggregate"),
    ("¦CREATE STREAM x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id", "CREATE STREAM .. AS cannot aggregate"),
    ("CREATE STREAM x AS SELECT ¦FOO(user_id) FROM user_events", "unknown function 'FOO'"),
    ("CREATE STREAM x AS SELECT ¦UPPER(user_id, event_type) FROM user_events", "function UPPER takes 1 argument(s), got 2"),
    ("CREATE STREAM x AS SELECT ¦MOD(amount) FROM user_events", "function MOD takes 2 arguments"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id HAVING ¦event_type = 'a'", "'event_type' is none of them: add it to GROUP BY or aggregate it"),
    ("CREATE TABLE x AS SELECT user_id, ¦SUM(DISTINCT amount) FROM user_events GROUP BY user_id", "only COUNT(DISTINCT x)"),
    ("CREATE STREAM x AS SELECT user_id, ¦event_type AS user_id FROM user_events", "duplicate output column 'user_id'"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN users u ON ¦e.user_id = u.name", "expected ON <stream expression> = <table key column>"),
    // SELECT DISTINCT.
    ("CREATE STREAM x AS ¦SELECT DISTINCT user_id FROM user_events", "SELECT DISTINCT makes a table of the distinct rows"),
    ("CREATE TABLE x AS ¦SELECT DISTINCT user_id, COUNT(*) FROM user_events GROUP BY user_id", "the rows are already one per group"),
    ("CREATE TABLE x AS SELECT DISTINCT ¦* FROM user_events", "SELECT DISTINCT needs its columns listed"),
    ("¦SELECT DISTINCT * FROM v", "SELECT DISTINCT in a pull query is not supported"),
    // Several joins.
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN users u ON e.user_id = u.id JOIN ¦clicks c ON e.user_id = c.user_id", "'clicks' is a stream: a query joins at most one stream, with its first JOIN"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN users u ON e.user_id = u.id JOIN users ¦u ON e.user_id = u.id", "'u' is joined twice: give each join its own alias"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN users u ON e.user_id = u.id JOIN users v ON ¦u.tier = e.user_id", "expected ON <stream expression> = <table key column>"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN users u ON e.user_id = u.id JOIN users v ON ¦v.name = v.id", "the stream side of ON must not read the table"),
    ("CREATE TABLE x AS SELECT u.id FROM users u JOIN users t ON u.tier = t.id JOIN ¦users r ON u.tier = r.id", "a join of tables joins two tables"),
    // Joins of two streams.
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN ¦clicks c ON e.user_id = c.user_id", "a join of two streams needs a time bound, e.g. JOIN clicks WITHIN 10 MINUTES"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN users u ¦WITHIN 1 HOUR ON e.user_id = u.id", "WITHIN bounds a join of two streams; a table is joined as of each event's time"),
    ("CREATE STREAM x AS SELECT * FROM user_events ¦WITHIN 1 HOUR", "the query has no JOIN"),
    ("CREATE STREAM x AS SELECT n FROM ¦(SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q", "use CREATE TABLE"),
    ("¦CREATE TABLE x AS SELECT n FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q", "must aggregate them"),
    ("CREATE TABLE x AS SELECT COUNT(*) AS c FROM ¦(SELECT page FROM clicks) q", "the subquery must aggregate"),
    ("CREATE TABLE x AS SELECT MAX(n) AS m FROM ¦(SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) WHERE n > 1", "needs a name"),
    ("CREATE TABLE x AS SELECT MAX(n) AS m FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q ¦WINDOW TUMBLING (SIZE 1 MINUTE)", "WINDOW applies to the subquery"),
    ("CREATE TABLE x AS SELECT MAX(n) AS m FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q JOIN ¦users u ON q.page = u.id", "cannot JOIN"),
    ("CREATE TABLE x AS WITH q AS (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) SELECT COUNT(*) AS c FROM ¦clicks", "FROM q"),
    ("CREATE TABLE x AS WITH q AS (SELECT page FROM clicks)¦, r AS (SELECT page FROM clicks) SELECT COUNT(*) AS c FROM r", "only one common table expression"),
    ("CREATE TABLE x AS SELECT MAX(n) AS m FROM (SELECT n FROM ¦(SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) a) b", "only one level of subquery"),
    ("CREATE TABLE x AS SELECT LATEST_BY_OFFSET(n) AS m FROM ¦(SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q", "LATEST_BY_OFFSET cannot aggregate a table's rows"),
    ("CREATE TABLE x AS SELECT MAX(n) AS m FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q GROUP BY ¦nope", "unknown column 'nope'"),
    ("CREATE TABLE x AS SELECT page FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q QUALIFY ¦NTILE(2) OVER (ORDER BY n) <= 1", "expected QUALIFY ROW_NUMBER()"),
    ("CREATE TABLE x AS SELECT page FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q QUALIFY ROW_NUMBER() OVER (ORDER BY n) <= ¦0", "1 to 10000 ranks"),
    ("CREATE TABLE x AS SELECT page FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q QUALIFY ¦n > 1", "expected QUALIFY ROW_NUMBER()"),
    ("CREATE TABLE x AS SELECT page, COUNT(*) AS c FROM clicks GROUP BY page QUALIFY ¦ROW_NUMBER() OVER (ORDER BY page) <= 1", "QUALIFY ranks the rows of a subquery"),
    ("SELECT * FROM v QUALIFY ¦ROW_NUMBER() OVER (ORDER BY x) <= 1", "QUALIFY ranks the rows of a subquery"),
    ("CREATE STREAM x AS SELECT * FROM user_events e FULL JOIN ¦users u ON e.user_id = u.id", "FULL JOIN joins two streams"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN clicks c WITHIN 1 HOUR ON ¦e.user_id = e.event_type", "each side reads one of the two streams"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN clicks c WITHIN (1 HOUR¦) ON e.user_id = c.user_id", "expected ',' and the time after"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN clicks c WITHIN 1 ¦FORTNIGHT ON e.user_id = c.user_id", "expected a time unit"),
    ("CREATE STREAM x AS SELECT * FROM user_events e JOIN clicks ¦user_id WITHIN 1 HOUR ON e.user_id = user_id.user_id", "alias 'user_id' would hide stream column 'user_id'"),
    ("¦CREATE STREAM x WITH (JOIN_HISTORY='1 DAY') AS SELECT * FROM user_events e JOIN clicks c WITHIN 1 HOUR ON e.user_id = c.user_id", "JOIN_HISTORY applies to a table join"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id ¦PARTITION BY user_id", "PARTITION BY applies to CREATE STREAM .. AS"),
    ("CREATE STREAM x AS SELECT * FROM user_events PARTITION BY ¦nope", "unknown column 'nope'"),
    ("CREATE STREAM x AS SELECT * FROM user_events ORDER BY ¦user_id", "ORDER BY is not supported"),
    ("CREATE STREAM x AS SELECT * FROM user_events LIMIT ¦5", "LIMIT is only allowed in pull queries"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY ¦1", "positional GROUP BY is not supported"),
    ("CREATE STREAM x AS SELECT * FROM user_events WHERE ¦user_id ILIKE 'a%'", "is not supported"),
    // WITH of CREATE .. AS.
    ("CREATE TABLE x WITH (KAFKA_TOPIC=¦'t') AS SELECT COUNT(*) FROM user_events", "KAFKA_TOPIC applies to CREATE STREAM .. AS"),
    ("¦CREATE STREAM x WITH (LATE_TOPIC='late') AS SELECT * FROM user_events", "LATE_TOPIC needs a WINDOW clause"),
    ("CREATE STREAM x WITH (DEDUP_TTL=¦'1 HOUR') AS SELECT * FROM user_events", "DEDUP_TTL needs DEDUP_BY"),
    ("CREATE STREAM x WITH (DEDUP_BY=¦'nope') AS SELECT * FROM user_events", "DEDUP_BY 'nope': unknown column 'nope'"),
    ("CREATE STREAM x WITH (PARTITIONS=¦0) AS SELECT * FROM user_events", "PARTITIONS must be a whole number"),
    ("CREATE TABLE x WITH (COMPRESSION=¦'lz4') AS SELECT COUNT(*) FROM user_events", "COMPRESSION applies to CREATE STREAM .. AS"),
    ("CREATE STREAM x WITH (COMPRESSION=¦'gzip') AS SELECT * FROM user_events", "COMPRESSION: unknown compression \"gzip\": expected none, zstd or lz4"),
    ("CREATE STREAM x WITH (CLUSTER='c', COMPRESSION=¦'lz4') AS SELECT * FROM user_events", "COMPRESSION applies to an output topic on the built-in log"),
    // INSERT INTO.
    ("INSERT ¦x SELECT * FROM user_events", "expected INTO after INSERT"),
    ("INSERT INTO s ¦VALUES (1)", "expected SELECT after INSERT INTO name"),
    ("INSERT INTO s WITH (¦FOO='x') SELECT * FROM user_events", "unknown property FOO in INSERT INTO"),
    // EXPLAIN.
    ("EXPLAIN¦", "expected CREATE .. AS SELECT .., a pull query or the name of a view after EXPLAIN"),
    ("EXPLAIN v ¦w", "expected end of statement after EXPLAIN name"),
    ("EXPLAIN CREATE STREAM x AS SELECT ¦nope FROM user_events", "unknown column 'nope'"),
    ("EXPLAIN ¦CREATE TABLE x AS SELECT user_id FROM user_events", "CREATE TABLE .. AS needs GROUP BY"),
    ("EXPLAIN CREATE STREAM x ¦(a INT) WITH (KAFKA_TOPIC='t')", "WITH or AS"),
    // Pull queries.
    ("INSERT INTO s\n  SELECT user_id,\n    ¦nope FROM user_events", "unknown column 'nope'"),
    ("¦INSERT INTO s WITH (QUERY_ID='q') SELECT COUNT(*) FROM user_events", "CREATE STREAM .. AS cannot aggregate"),
    ("SELECT * FROM v WHERE k = 'a' AND (¦WINDOWSTART > 1 OR a = 2)", "WINDOWSTART and WINDOWEND are compared with timestamps"),
    ("SELECT * FROM v WHERE ¦WINDOWSTART <> 5", "WINDOWSTART and WINDOWEND are compared with timestamps"),
    ("SELECT * FROM v LIMIT 5 OFFSET ¦x", "OFFSET needs a whole number"),
    ("SELECT * FROM v OFFSET ¦100001", "OFFSET is at most 100000"),
    ("SELECT * FROM v ORDER BY ¦k, WINDOWSTART", "a pull query is ordered by one column"),
    ("SELECT COUNT(*) FROM v ORDER BY ¦k", "ORDER BY has nothing to order"),
    ("SELECT ¦k, COUNT(*) FROM v", "either columns or aggregates"),
    ("SELECT COUNT(*), ¦SUM(a) + 1 FROM v", "either columns or aggregates"),
    ("SELECT * FROM v ¦EMIT CHANGES", "push queries (SELECT .. EMIT) are not supported"),
    ("SELECT * FROM v WHERE k = 'a' AND WINDOWSTART >= ¦'yesterday'", "expected a timestamp (epoch milliseconds or RFC 3339)"),
    ("SELECT * FROM v LIMIT ¦0", "LIMIT needs a positive whole number"),
];

#[test]
fn bad_sql_corpus_reports_position_and_reason() {
    assert!(CASES.len() >= 25);
    let mut failures = Vec::new();
    for (sql, want) in CASES {
        let (text, line, column) = marked(sql);
        match first_error(&text) {
            None => failures.push(format!("{text}\n  no error; wanted {want:?}")),
            Some(e) => {
                if !e.message.contains(want) || (e.line, e.column) != (line, column) {
                    failures.push(format!(
                        "{text}\n  got  {e}\n  want line {line}, column {column}: ..{want}.."
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

#[test]
fn errors_display_with_their_position() {
    let e = parse("SHOW\n  NOTHING").unwrap_err();
    assert_eq!((e.line, e.column), (2, 3));
    assert_eq!(
        e.to_string(),
        "line 2, column 3: expected STREAMS, TABLES, VIEWS, TOPICS or CLUSTERS after SHOW, found 'NOTHING'"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().contains("line 2"));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        "SELECT * FROM v WHERE k = {}1{}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let e = parse(&deep).unwrap_err();
    assert!(e.message.contains("nested too deeply"), "{e}");
}

#[test]
fn sqlparser_errors_keep_line_and_column() {
    let e = first_error(
        "CREATE STREAM x AS\n  SELECT user_id\n  FROM user_events\n  WHERE amount > > 3",
    )
    .unwrap();
    assert_eq!((e.line, e.column), (4, 18), "{e}");
    assert!(e.message.starts_with("expected an expression"), "{e}");
}

#[test]
fn more_expression_forms_plan() {
    let sql = "CREATE STREAM x AS SELECT SUBSTRING(user_id FROM 2 FOR 3) AS s, \
               amount != 1 AS ne, TIMESTAMP '2024-01-01T00:00:00Z' AS t, \
               /* comment */ ((amount)) AS a -- trailing comment\n FROM user_events";
    assert!(first_error(sql).is_none());
}

mod fuzz {
    use proptest::prelude::*;

    fn fragment() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "CREATE",
            "STREAM",
            "TABLE",
            "AS",
            "SELECT",
            "*",
            "FROM",
            "user_events",
            "users",
            "WHERE",
            "GROUP",
            "BY",
            "HAVING",
            "WINDOW",
            "TUMBLING",
            "HOPPING",
            "SESSION",
            "(",
            ")",
            "SIZE",
            "5",
            "MINUTES",
            "ADVANCE",
            "GRACE",
            "PERIOD",
            "EMIT",
            "CHANGES",
            "FINAL",
            ",",
            ";",
            "=",
            ">",
            "'x'",
            "user_id",
            "amount",
            "COUNT(*)",
            "SUM",
            "JOIN",
            "ON",
            "u.id",
            "WITH",
            "KAFKA_TOPIC",
            "DEDUP_BY",
            "'1 HOUR'",
            "\n",
            "¦",
            "\"q",
            "'",
            "LIMIT",
            "WINDOWSTART",
            "DROP",
            "SHOW",
            "DESCRIBE",
            "-",
            "1e400",
            "9223372036854775808",
            "WITHIN",
            "(1 HOUR, 2 MINUTES)",
            "clicks c",
            "c.user_id",
            "FULL",
            "LEFT",
            "DISTINCT",
            "EXPLAIN",
            "INSERT",
            "INTO",
            "QUERY_ID='q'",
        ])
        .prop_map(str::to_owned)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn parse_and_plan_never_panic(parts in prop::collection::vec(fragment(), 0..40)) {
            let sql = parts.join(" ");
            if let Ok(statements) = super::parse(&sql) {
                let cat = super::catalog();
                for s in statements {
                    let create = match s {
                        super::Statement::CreateAs(c) => Ok(c),
                        super::Statement::Explain(super::Explain::Create(c)) => Ok(*c),
                        super::Statement::InsertInto(i) => super::insert_create(&i, "t"),
                        _ => continue,
                    };
                    if let Ok(p) = create.and_then(|c| super::plan(&c, &cat)) {
                        prop_assert!(p.validate().is_ok());
                        let _ = crate::sql::explain::operators(&p);
                    }
                }
            } else if let Err(e) = super::parse(&sql) {
                prop_assert!(e.line >= 1 && e.column >= 1);
            }
        }
    }
}

#[test]
fn every_prefix_of_valid_statements_fails_cleanly_or_parses() {
    let texts = [
        USER_EVENTS,
        "CREATE TABLE p WITH (DEDUP_BY='user_id') AS SELECT user_id, WINDOWSTART AS ws, COUNT(*) AS n \
         FROM user_events e LEFT JOIN users u ON e.user_id = u.id \
         WINDOW HOPPING (SIZE 10 MINUTES, ADVANCE BY 1 MINUTE, GRACE PERIOD 1 SECOND) \
         WHERE u.tier = 'gold' GROUP BY user_id HAVING n > 1 EMIT FINAL",
        "SELECT * FROM v WHERE k = 'a' AND WINDOWSTART BETWEEN 1 AND '2024-01-01T00:00:00Z' LIMIT 3",
        "EXPLAIN CREATE TABLE t AS SELECT e.user_id, COUNT(*) AS n FROM user_events e \
         FULL JOIN clicks c WITHIN (1 HOUR, 2 MINUTES) GRACE PERIOD 1 SECOND \
         ON e.user_id = c.user_id GROUP BY e.user_id",
        "INSERT INTO s WITH (QUERY_ID='q') SELECT DISTINCT user_id FROM user_events",
    ];
    let cat = catalog();
    for text in texts {
        for (i, _) in text.char_indices() {
            let prefix = &text[..i];
            match parse(prefix) {
                Ok(statements) => {
                    for s in statements {
                        match s {
                            Statement::CreateAs(c) => drop(plan(&c, &cat)),
                            Statement::Explain(Explain::Create(c)) => drop(plan(&c, &cat)),
                            Statement::InsertInto(i) => {
                                drop(insert_create(&i, "t").and_then(|c| plan(&c, &cat)))
                            }
                            _ => {}
                        }
                    }
                }
                Err(e) => assert!(e.line >= 1 && e.column >= 1, "{prefix}: {e}"),
            }
        }
    }
}

#[test]
fn topic_and_kafka_topic_are_one_property() {
    let e = parse("CREATE STREAM s (a INT) WITH (TOPIC='t', KAFKA_TOPIC='u')").unwrap_err();
    assert!(
        e.message
            .contains("KAFKA_TOPIC (or its alias TOPIC) is given twice"),
        "{e}"
    );
    assert_eq!((e.line, e.column), (1, 42));
}
