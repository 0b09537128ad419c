#!/usr/bin/env python3
"""Writes the seed corpus of the sql_statement fuzz target (issue 11 crashers:
long +/AND/OR chains, and statements at and past each limit).
Run from fuzz/corpus/sql_statement/: python3 ../../gen_sql_statement_seeds.py"""
def chain(t, sep, n): return sep.join([t]*n)
S = "CREATE STREAM s (grp VARCHAR, amount INT) WITH (KAFKA_TOPIC = 's');"
def create_or(name, n): return f"CREATE TABLE {name} AS SELECT grp, COUNT(*) AS c FROM s WHERE {chain('amount > 1',' OR ',n)} GROUP BY grp;"
GRP_A = "grp = 'a'"
# The brief's statements from their one copy (processor/src/sql/brief.sql):
# each from its first line after whitespace and -- comments to its ';'.
def brief_statements():
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "../processor/src/sql/brief.sql")).read()
    body = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("--"))
    return [s.strip() + ";" for s in body.split(";") if s.strip()]
BRIEF = dict(zip(["brief_user_events.sql", "brief_purchase_stats.sql", "brief_high_value_alerts.sql"], brief_statements()))
files = {
 **BRIEF,
 "join_enrich.sql": "CREATE STREAM enriched AS SELECT e.user_id, u.name, UPPER(u.tier) AS tier FROM user_events e LEFT JOIN users u ON e.user_id = u.id;",
 "hopping_having.sql": "CREATE TABLE h AS SELECT user_id, COUNT(*) AS n FROM user_events WINDOW HOPPING (SIZE 10 MINUTES, ADVANCE BY 1 MINUTE) GROUP BY user_id HAVING COUNT(*) > 2 EMIT FINAL;",
 "session_case.sql": "CREATE TABLE sess AS SELECT user_id, SUM(CASE WHEN amount > 10 THEN 1 ELSE 0 END) AS big FROM user_events WINDOW SESSION (30 SECONDS) GROUP BY user_id;",
 "dedup.sql": "CREATE STREAM d WITH (DEDUP_BY = 'user_id', DEDUP_TTL = '1 HOUR') AS SELECT * FROM user_events;",
 "pull_query.sql": "SELECT * FROM purchase_stats WHERE user_id = 'u1' AND WINDOWSTART >= '2024-01-01T00:00:00Z' LIMIT 10;",
 "ddl_mix.sql": S + " SHOW TABLES; DESCRIBE s; DROP TABLE IF EXISTS x; DROP STREAM s;",
 "functions.sql": "CREATE STREAM f AS SELECT COALESCE(grp, 'none') AS g, SUBSTRING(grp, 2, 3) AS sub, CAST(amount AS DOUBLE) / 2 AS half, amount BETWEEN 1 AND 5 AS mid, grp LIKE 'a%' AS a, grp IN ('x', 'y') AS xy FROM s;",
 "stream_join.sql": "CREATE TABLE paid AS SELECT e.user_id, COUNT(*) AS n FROM user_events e LEFT JOIN clicks c WITHIN (0 SECONDS, 1 HOUR) GRACE PERIOD 10 MINUTES ON e.user_id = c.user_id WINDOW TUMBLING (SIZE 10 MINUTES) WHERE c.page <> 'home' AND e.amount > c.at GROUP BY e.user_id;",
 "explain_insert_distinct.sql": "EXPLAIN CREATE TABLE k AS SELECT DISTINCT user_id FROM user_events; INSERT INTO t WITH (QUERY_ID = 'q') SELECT user_id AS grp, 1 AS amount FROM user_events; EXPLAIN k;",
 "subquery.sql": "CREATE TABLE hist AS SELECT n, COUNT(*) AS users, AVG(spent) AS mean, MAX(spent) AS top FROM (SELECT user_id, COUNT(*) AS n, SUM(amount) AS spent FROM user_events WINDOW TUMBLING (SIZE 1 HOUR) WHERE event_type = 'purchase' GROUP BY user_id HAVING COUNT(*) > 1 EMIT CHANGES) AS per_user WHERE spent > 10 GROUP BY n HAVING COUNT(*) > 2;",
 "cte.sql": "EXPLAIN CREATE TABLE c AS WITH q AS (SELECT e.user_id, COUNT(*) AS n FROM user_events e JOIN users u ON e.user_id = u.id GROUP BY e.user_id) SELECT COUNT_DISTINCT(n) AS kinds, MIN(n) AS least FROM q;",
 "subquery_nested_deep.sql": "CREATE TABLE d AS SELECT COUNT(*) AS c FROM " + "(SELECT n FROM "*1000 + "s" + ") q"*1000 + ";",
 "top_n.sql": "CREATE TABLE t AS SELECT user_id, n, ws FROM (SELECT user_id, COUNT(*) AS n, WINDOWSTART AS ws FROM user_events WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 2 SECONDS) GROUP BY user_id EMIT FINAL) q WHERE n > 1 QUALIFY RANK() OVER (PARTITION BY ws ORDER BY n DESC) <= 3; EXPLAIN t;",
 "syntax_error.sql": "CREATE TABLE AS SELECT FROM WHERE;",
 "unterminated_string.sql": "SELECT * FROM v WHERE k = 'abc",
 # Issue 11's crashers and the limits around them.
 "crash_sum_3000.sql": f"SELECT {chain('1','+',3000)} FROM x;",
 "crash_pull_and_2300.sql": f"SELECT * FROM v WHERE {chain(GRP_A,' AND ',2300)};",
 "crash_create_or_1700.sql": create_or("x", 1700),
 "catalog_or_61.sql": create_or("x", 61),
 "depth_at_limit_or_249.sql": create_or("x", 249),
 "depth_over_limit_or_250.sql": create_or("x", 250),
 "sum_at_limit_250.sql": f"CREATE STREAM y AS SELECT {chain('amount',' + ',250)} AS total FROM s;",
 "dedup_by_deep.sql": f"CREATE STREAM d WITH (DEDUP_BY = '{chain('amount',' + ',1000)}') AS SELECT * FROM s;",
 "tokens_over_limit.sql": f"SELECT {chain('1','+',10001)} FROM x;",
 "nodes_over_limit.sql": "SELECT " + ", ".join(f"{chain('1','+',240)} AS c{i}" for i in range(22)) + " FROM x;",
 "parens_deep.sql": f"SELECT {'('*200}1{')'*200} FROM x;",
 "not_chain.sql": f"SELECT * FROM v WHERE {'NOT '*3000}TRUE;",
 "minus_chain.sql": f"SELECT {'- '*3000}1 FROM x;",
 "case_nested.sql": "SELECT " + "CASE WHEN 1 = 1 THEN "*100 + "1" + " END"*100 + " FROM x;",
 "function_nested.sql": "CREATE STREAM y AS SELECT " + "ABS("*300 + "amount" + ")"*300 + " AS a FROM s;",
 "mixed_precedence.sql": f"SELECT {chain('1 * 2',' + ',1500)} FROM x;",
}
for name, text in files.items():
    b = text.encode()
    assert len(b) < 64*1024, (name, len(b))
    open(name, "wb").write(b)
print(len(files))
