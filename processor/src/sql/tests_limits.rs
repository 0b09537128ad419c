//! Hostile statements (issue 11, item 1): long chains of binary operators,
//! which `sqlparser` builds without recursing but everything after it
//! recurses over, are refused with an error naming the limit; statements
//! at the limit parse, plan and evaluate. These tests run on the test
//! harness's threads (2 MiB stacks), like a processor thread.

use serde_json::json;

use super::brief::USER_EVENTS;
use super::*;
use crate::expr::Row;
use crate::limits::{complexity, MAX_EXPR_DEPTH, MAX_EXPR_NODES};
use crate::plan::Operation;

const S: &str = "CREATE STREAM s (grp VARCHAR, amount INT) WITH (KAFKA_TOPIC = 's');";

fn catalog() -> Vec<SourceDecl> {
    [USER_EVENTS, S]
        .iter()
        .map(|sql| match parse(sql).unwrap().remove(0) {
            Statement::CreateSource(d) => d,
            other => panic!("not a source: {other:?}"),
        })
        .collect()
}

/// `term sep term sep ..` with `n` terms.
fn chain(term: &str, sep: &str, n: usize) -> String {
    vec![term; n].join(sep)
}

/// The issue's item-2 statement with `terms` OR-ed comparisons.
fn create_or(name: &str, terms: usize) -> String {
    format!(
        "CREATE TABLE {name} AS SELECT grp, COUNT(*) AS c FROM s WHERE {} GROUP BY grp;",
        chain("amount > 1", " OR ", terms)
    )
}

fn plan_of(sql: &str) -> Result<crate::plan::Plan, SqlError> {
    match parse(sql)?.remove(0) {
        Statement::CreateAs(c) => plan(&c, &catalog()),
        other => panic!("not CREATE AS: {other:?}"),
    }
}

fn assert_limit(err: &SqlError, limit: &str) {
    assert!(
        err.message.contains(limit),
        "expected an error naming {limit}, got: {err}"
    );
}

#[test]
fn a_long_sum_in_a_select_is_refused_naming_the_depth_limit() {
    // Issue 11: 3,000 terms (6 KB) overflowed a tokio worker's stack.
    let sql = format!("SELECT {} FROM x;", chain("1", "+", 3000));
    let err = parse(&sql).unwrap_err();
    assert_limit(&err, "max_expression_depth");
    assert_eq!((err.line, err.column), (1, 1));
}

#[test]
fn long_and_or_chains_are_refused_in_pull_queries_and_create_as() {
    let pull = format!(
        "SELECT * FROM v WHERE {};",
        chain("grp = 'a'", " AND ", 2300)
    );
    assert_limit(&parse(&pull).unwrap_err(), "max_expression_depth");
    let create = create_or("x", 1700);
    assert_limit(&parse(&create).unwrap_err(), "max_expression_depth");
    let dedup = format!(
        "CREATE STREAM d WITH (DEDUP_BY = '{}') AS SELECT * FROM s;",
        chain("amount", " + ", 1000)
    );
    assert_limit(&plan_of(&dedup).unwrap_err(), "max_expression_depth");
}

#[test]
fn a_statement_of_a_megabyte_of_operators_is_refused_by_its_token_count() {
    let sql = format!("SELECT {} FROM x;", chain("1", "+", 400_000));
    assert!(sql.len() < 1 << 20);
    assert_limit(&parse(&sql).unwrap_err(), "max_statement_tokens");
}

#[test]
fn too_many_nodes_in_all_is_refused_naming_the_node_limit() {
    // 2n - 1 nodes per n-term sum; well under the token limit.
    let terms = MAX_EXPR_DEPTH - 10;
    let columns: Vec<String> = (0..MAX_EXPR_NODES / (2 * terms - 1) + 1)
        .map(|i| format!("{} AS c{i}", chain("1", "+", terms)))
        .collect();
    let sql = format!("SELECT {} FROM v;", columns.join(", "));
    assert_limit(&parse(&sql).unwrap_err(), "max_expression_nodes");
}

#[test]
fn the_issues_61_term_statement_plans() {
    let plan = plan_of(&create_or("x", 61)).unwrap();
    plan.validate().unwrap();
}

#[test]
fn a_chain_at_the_depth_limit_plans_evaluates_and_round_trips_and_one_more_is_refused() {
    // n OR-ed comparisons are n + 1 deep: n - 1 ORs, then `amount > 1`,
    // then its operands.
    let plan = plan_of(&create_or("x", MAX_EXPR_DEPTH - 1)).unwrap();
    plan.validate().unwrap();
    let filter = plan.filter.as_ref().unwrap();
    assert_eq!(complexity(filter).depth, MAX_EXPR_DEPTH);
    let err = plan_of(&create_or("x", MAX_EXPR_DEPTH)).unwrap_err();
    assert_limit(&err, "max_expression_depth");

    // The evaluator recurses as deep as the expression, on this 2 MiB
    // test thread.
    struct Amount(serde_json::Value);
    impl Row for Amount {
        fn field(&self, path: &[String]) -> Option<&serde_json::Value> {
            crate::expr::get_path(&self.0, path)
        }
        fn key(&self) -> Option<&str> {
            None
        }
        fn record_timestamp(&self) -> i64 {
            0
        }
    }
    assert!(filter.is_true(&Amount(json!({"amount": 2}))));
    assert!(!filter.is_true(&Amount(json!({"amount": 1}))));

    // A sum at the limit, the non-short-circuiting case.
    let sum = format!(
        "CREATE STREAM y AS SELECT {} AS total FROM s;",
        chain("amount", " + ", MAX_EXPR_DEPTH)
    );
    let plan = plan_of(&sum).unwrap();
    let Operation::Project { columns } = &plan.operation else {
        panic!("a projection");
    };
    let total = columns[0].1.eval(&Amount(json!({"amount": 2})));
    assert_eq!(total, json!(2 * MAX_EXPR_DEPTH));

    // serde recursion over the plan (the catalog's decoder lifts serde_json's
    // default depth of 128; here only encoding and the expression itself).
    let text = serde_json::to_string(&plan).unwrap();
    assert!(text.len() > MAX_EXPR_DEPTH);
}

#[test]
fn hundreds_of_terms_spread_over_columns_are_fine() {
    let columns: Vec<String> = (0..10)
        .map(|i| format!("{} AS c{i}", chain("amount", " * 2 + ", 100)))
        .collect();
    let sql = format!(
        "CREATE STREAM z AS SELECT {} FROM s WHERE {};",
        columns.join(", "),
        chain("amount > 1", " AND ", MAX_EXPR_DEPTH - 1)
    );
    plan_of(&sql).unwrap().validate().unwrap();
}

/// `CREATE TABLE .. WHERE NOT NOT .. amount > 1` with `nots` NOTs.
fn create_not(nots: usize) -> String {
    format!(
        "CREATE TABLE n AS SELECT grp, COUNT(*) AS c FROM s WHERE {}amount > 1 GROUP BY grp;",
        "NOT ".repeat(nots)
    )
}

#[test]
fn a_chain_of_nots_past_the_nesting_limit_is_refused_naming_the_limit() {
    // Outside probe, finding 8b: past about 60 NOTs sqlparser's recursion
    // limit was reached inside a NOT, which sqlparser then read as a column
    // named NOT: "expected end of statement, found NOT".
    for nots in [MAX_NESTING_DEPTH + 1, 200] {
        let err = plan_of(&create_not(nots)).unwrap_err();
        assert_limit(&err, "max_nesting_depth");
        assert!(err.message.contains("nested too deeply"), "{err}");
        // At the NOT one past the limit: `CREATE TABLE n AS SELECT grp,
        // COUNT(*) AS c FROM s WHERE ` is 57 characters.
        assert_eq!(
            (err.line, err.column),
            (1, 58 + 4 * MAX_NESTING_DEPTH as u64)
        );
        let pull = format!("SELECT * FROM v WHERE {}grp = 'a';", "NOT ".repeat(nots));
        assert_limit(&parse(&pull).unwrap_err(), "max_nesting_depth");
        let dedup = format!(
            "CREATE STREAM d WITH (DEDUP_BY = '{}amount') AS SELECT * FROM s;",
            "NOT ".repeat(nots)
        );
        assert_limit(&plan_of(&dedup).unwrap_err(), "max_nesting_depth");
    }
    // 100,000 NOTs are refused by their token count first.
    assert_limit(
        &parse(&create_not(100_000)).unwrap_err(),
        "max_statement_tokens",
    );
}

#[test]
fn a_chain_of_nots_within_the_nesting_limit_plans_and_evaluates() {
    struct Amount(serde_json::Value);
    impl Row for Amount {
        fn field(&self, path: &[String]) -> Option<&serde_json::Value> {
            crate::expr::get_path(&self.0, path)
        }
        fn key(&self) -> Option<&str> {
            None
        }
        fn record_timestamp(&self) -> i64 {
            0
        }
    }
    for nots in [30, 31, MAX_NESTING_DEPTH] {
        let plan = plan_of(&create_not(nots)).unwrap();
        plan.validate().unwrap();
        let filter = plan.filter.as_ref().unwrap();
        // An even number of NOTs keeps `amount > 1`, an odd one negates it.
        let two = filter.is_true(&Amount(json!({"amount": 2})));
        assert_eq!(two, nots % 2 == 0, "{nots} NOTs");
    }
}

/// `sql`'s query through `sqlparser` alone (without the checks of its
/// shape that pull queries add).
fn parse_query(sql: &str) -> Result<(), SqlError> {
    let st = super::lex::split(sql)?.remove(0);
    super::statement::parse_sql_query(st.tokens, st.end).map(|_| ())
}

#[test]
fn other_nesting_past_the_limit_gets_the_same_error() {
    let n = MAX_NESTING_DEPTH + 1;
    let shapes = [
        // Parentheses, NOT with parentheses, CASE, signs, NOTs between
        // comparisons (each nests the rest: NOT (a = NOT (a = ..))).
        format!(
            "SELECT * FROM v WHERE grp = {}'a'{};",
            "(".repeat(n),
            ")".repeat(n)
        ),
        format!(
            "SELECT * FROM v WHERE {}grp = 'a'{};",
            "NOT (".repeat(n),
            ")".repeat(n)
        ),
        format!(
            "SELECT * FROM v WHERE grp = {}'a'{};",
            "CASE WHEN true THEN ".repeat(n),
            " END".repeat(n)
        ),
        format!("SELECT * FROM v WHERE amount = {}1;", "- ".repeat(n)),
        format!("SELECT * FROM v WHERE {}1;", "NOT amount = ".repeat(n)),
        format!(
            "SELECT * FROM v WHERE amount = {}1;",
            "NOT - ".repeat(n / 2 + 1)
        ),
        format!(
            "SELECT * FROM v WHERE {}1 = 1;",
            "NOT amount XOR ".repeat(n)
        ),
    ];
    for sql in shapes {
        let err = parse_query(&sql).unwrap_err();
        assert_limit(&err, "max_nesting_depth");
    }
}

#[test]
fn flat_chains_of_not_and_signs_are_not_nesting() {
    // Each NOT ends at AND, OR or a comma, a sign also at the next binary
    // operator; NOT IN and IS NOT are infix.
    let sqls = [
        format!(
            "SELECT * FROM v WHERE {};",
            chain("NOT grp = 'a'", " AND ", 200)
        ),
        format!(
            "SELECT * FROM v WHERE {};",
            chain("NOT NOT grp IS NOT NULL", " OR ", 100)
        ),
        format!(
            "SELECT {} FROM v;",
            (0..100)
                .map(|i| format!("NOT amount > {i} AS c{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!("SELECT {} AS total FROM v;", chain("-amount", " - ", 200)),
        format!(
            "SELECT {} AS total FROM v;",
            chain("amount * -1", " + ", 200)
        ),
        format!(
            "SELECT * FROM v WHERE grp = CASE {} ELSE 'c' END;",
            chain("WHEN NOT NOT amount > 1 THEN 'a'", " ", 100)
        ),
        format!(
            "SELECT * FROM v WHERE {};",
            chain("amount NOT BETWEEN 1 AND 2", " AND ", 100)
        ),
        format!(
            "SELECT * FROM v WHERE {};",
            chain("amount NOT IN (1, 2)", " OR ", 100)
        ),
    ];
    for sql in sqls {
        parse_query(&sql).unwrap();
    }
    // And they plan.
    let sum = format!(
        "CREATE STREAM y AS SELECT {} AS total FROM s WHERE {};",
        chain("-amount", " - ", 200),
        chain("NOT amount > 1", " OR ", 200)
    );
    plan_of(&sum).unwrap();
}

#[test]
fn statements_within_the_nesting_limit_that_sqlparser_recurses_deeper_over_parse() {
    // NOT between comparisons costs sqlparser two levels per NOT, a
    // parenthesized subquery three: within its own recursion limit.
    let within = MAX_NESTING_DEPTH;
    let pairs = format!("SELECT * FROM v WHERE {}1;", "NOT amount = ".repeat(within));
    parse_query(&pairs).unwrap();
    let subqueries = format!(
        "SELECT * FROM v WHERE grp = {}'a'{};",
        "(SELECT ".repeat(within),
        ")".repeat(within)
    );
    parse_query(&subqueries).unwrap();
    let mixed = format!(
        "SELECT * FROM v WHERE grp = {}'a'{};",
        "(SELECT - NOT amount = ".repeat(within / 3),
        ")".repeat(within / 3)
    );
    parse_query(&mixed).unwrap();
    // What the token check does not count (INTERVAL) still ends at
    // sqlparser's limit, with the same error.
    let intervals = format!("SELECT {}1 FROM v;", "INTERVAL ".repeat(1000));
    let err = parse_query(&intervals).unwrap_err();
    assert_limit(&err, "max_nesting_depth");
}
