//! PostgreSQL's catalogs over the PostgreSQL listener (issue 39, part 3),
//! with clients written by others against the real binary: Debian's
//! `psql` 15 (`\dt`, `\d`, `\d name`, `\dv`, `\dn`, `\l`, `\du`), the
//! schema discovery queries of Grafana's PostgreSQL data source, of the
//! pgjdbc driver's `DatabaseMetaData` and of Metabase's PostgreSQL sync,
//! taken verbatim from their sources (each constant names its file and
//! commit), and psycopg 3 reading `information_schema` with a bound
//! parameter (the extended protocol). With tokens, a token sees only the
//! views it may read.
//!
//! No view needs rows here: catalogs describe views, so nothing waits.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::brief::{HIGH_VALUE_ALERTS, PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{json, psql, Server, Value};

/// The `|`-separated fields of each line of psql's output.
fn lines(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect()
}

/// A server with `--pg-listen`, the brief's stream, its `purchase_stats`
/// table and its `high_value_alerts` derived stream.
fn serving_the_brief() -> Server {
    let server = Server::start(&["--pg-listen", "127.0.0.1:0"]);
    server.client().sql_ok(USER_EVENTS);
    server.client().sql_ok(PURCHASE_STATS);
    server.client().sql_ok(HIGH_VALUE_ALERTS);
    server
}

/// `DESCRIBE purchase_stats` as `(column, PostgreSQL type)`, mapped as
/// docs/pg.md says rows are typed.
fn described_types(server: &Server) -> Vec<(String, String)> {
    let out = psql(server, None, "DESCRIBE purchase_stats").unwrap();
    lines(&out)
        .into_iter()
        .map(|f| {
            let t = f[1].as_str();
            let pg = match t {
                "BOOLEAN" => "boolean".to_string(),
                "INT" | "INTEGER" | "BIGINT" => "bigint".to_string(),
                "DOUBLE" => "double precision".to_string(),
                "VARCHAR" | "" => "text".to_string(),
                "TIMESTAMP" => "timestamp with time zone".to_string(),
                d if d.starts_with("DECIMAL(") => {
                    format!(
                        "numeric({})",
                        &d["DECIMAL(".len()..d.len() - 1].replace(' ', "")
                    )
                }
                other => panic!("unexpected type {other}"),
            };
            (f[0].clone(), pg)
        })
        .collect()
}

#[test]
fn psql_lists_and_describes_views() {
    let server = serving_the_brief();

    // \dt and \d list the table a query defines, as a table in public;
    // the streams (declared or derived) are not relations.
    let tables = psql(&server, None, "\\dt").unwrap();
    assert_eq!(
        lines(&tables),
        vec![vec!["public", "purchase_stats", "table", "kappa"]],
        "{tables}"
    );
    let all = psql(&server, None, "\\d").unwrap();
    assert_eq!(lines(&all), lines(&tables), "{all}");
    let views = psql(&server, None, "\\dv").unwrap();
    assert!(lines(&views).is_empty(), "{views}");

    // \d NAME: its columns with the types DESCRIBE gives, mapped.
    let described = psql(&server, None, "\\d purchase_stats").unwrap();
    let columns: Vec<(String, String)> = lines(&described)
        .into_iter()
        .map(|f| (f[0].clone(), f[1].clone()))
        .collect();
    assert_eq!(columns, described_types(&server), "{described}");
    assert!(
        columns
            .iter()
            .any(|(c, t)| c == "purchase_count" && t == "bigint"),
        "{described}"
    );
    let verbose = psql(&server, None, "\\d+ purchase_stats").unwrap();
    assert!(verbose.contains("purchase_count"), "{verbose}");

    // psql's own message for a name that is not there.
    let missing = psql(&server, None, "\\d nosuch").unwrap_err();
    assert!(
        missing.contains("Did not find any relation named \"nosuch\""),
        "{missing}"
    );

    // Schemas, databases, roles.
    assert_eq!(
        lines(&psql(&server, None, "\\dn").unwrap()),
        vec![vec!["public", "kappa"]]
    );
    let databases = psql(&server, None, "\\l").unwrap();
    assert!(databases.starts_with("kappa|kappa|UTF8"), "{databases}");
    let roles = psql(&server, None, "\\du").unwrap();
    assert!(roles.starts_with("kappa|"), "{roles}");

    // Kappa's own statements still run, and a view created after is listed.
    psql(
        &server,
        None,
        "CREATE TABLE events_per_user AS SELECT user_id, COUNT(*) AS events FROM user_events \
         GROUP BY user_id EMIT CHANGES",
    )
    .unwrap();
    let tables = psql(&server, None, "\\dt").unwrap();
    assert_eq!(lines(&tables).len(), 2, "{tables}");
    let e = psql(
        &server,
        None,
        "SELECT * FROM pg_catalog.pg_class JOIN purchase_stats ON true",
    )
    .unwrap_err();
    assert!(e.contains("not supported"), "{e}");
    let e = psql(&server, None, "SELECT no_such_function() FROM pg_class").unwrap_err();
    assert!(e.contains("no_such_function"), "{e}");
}

// Grafana's PostgreSQL data source: grafana/grafana
// public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts
// at commit eb607c510fe9fe93ca209a4ca48935321fcd363f: getVersion(),
// getTimescaleDBVersion(), showTables() and getSchema(table), built as its
// template strings build them.

/// `getVersion()`.
const GRAFANA_VERSION: &str = "SELECT current_setting('server_version_num')::int/100 as version";

/// `getTimescaleDBVersion()`.
const GRAFANA_TIMESCALEDB: &str =
    "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'";

/// `buildSchemaConstraint()`.
const GRAFANA_SCHEMA_CONSTRAINT: &str = r#"
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )"#;

/// `showTables()`.
fn grafana_show_tables() -> String {
    let c = GRAFANA_SCHEMA_CONSTRAINT;
    format!(
        r#"SELECT
    CASE WHEN {c}
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN {c} THEN 0 ELSE 1 END, 1"#
    )
}

/// `getSchema(table)`.
fn grafana_get_schema(table: &str) -> String {
    let t = format!("'{}'", table.replace('\'', "''"));
    let c = GRAFANA_SCHEMA_CONSTRAINT;
    format!(
        r#"SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident({t}),1) = 2
        THEN quote_ident(table_schema) = (parse_ident({t}))[1]
          AND quote_ident(table_name) = (parse_ident({t}))[2]
        ELSE quote_ident(table_name) = {t}
          AND {c}
      END"#
    )
}

#[test]
fn grafanas_discovery_queries_name_views_and_columns() {
    let server = serving_the_brief();
    assert_eq!(psql(&server, None, GRAFANA_VERSION).unwrap().trim(), "1500");
    assert_eq!(psql(&server, None, GRAFANA_TIMESCALEDB).unwrap().trim(), "");
    let tables = psql(&server, None, &grafana_show_tables()).unwrap();
    assert_eq!(tables.trim(), "purchase_stats", "{tables}");
    for name in ["purchase_stats", "public.purchase_stats"] {
        let columns = psql(&server, None, &grafana_get_schema(name)).unwrap();
        let want: Vec<Vec<String>> = described_types(&server)
            .into_iter()
            .map(|(c, t)| vec![c, t.split('(').next().unwrap().to_string()])
            .collect();
        assert_eq!(lines(&columns), want, "{columns}");
    }
}

// pgjdbc's DatabaseMetaData (what Metabase, DBeaver and other JDBC tools
// call): pgjdbc/pgjdbc pgjdbc/src/main/java/org/postgresql/jdbc/
// PgDatabaseMetaData.java at commit 3a699d57d957ca0c2b86e619d001a8763a130027
// (42.7.13+): the texts getSchemas(), getTables(null, "public", "%",
// {"TABLE", "VIEW"}) and getColumns(null, "public", "purchase_stats", "%")
// build for a PostgreSQL 15 server, their `?` parameters as psycopg's `%s`.

/// `getSchemas(null, null)`.
const PGJDBC_SCHEMAS: &str = "SELECT nspname AS \"TABLE_SCHEM\", current_database() AS \"TABLE_CATALOG\" FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_'))  ORDER BY \"TABLE_SCHEM\"";

/// `getTables(null, %s, %s, {"TABLE", "VIEW"})`.
const PGJDBC_TABLES: &str = "SELECT current_database() AS \"TABLE_CAT\", n.nspname AS \"TABLE_SCHEM\", c.relname AS \"TABLE_NAME\",  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS \"TABLE_TYPE\", d.description AS \"REMARKS\",  '' as \"TYPE_CAT\", '' as \"TYPE_SCHEM\", '' as \"TYPE_NAME\", '' AS \"SELF_REFERENCING_COL_NAME\", '' AS \"REF_GENERATION\"  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND n.nspname LIKE %s AND c.relname LIKE %s AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'v' AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema' ) )  ORDER BY \"TABLE_TYPE\",\"TABLE_SCHEM\",\"TABLE_NAME\" ";

/// `getColumns(null, %s, %s, %s)`.
const PGJDBC_COLUMNS: &str = "SELECT * FROM (SELECT current_database() AS current_database, n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull  OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE %s AND c.relname LIKE %s) c WHERE true  AND attname LIKE %s ORDER BY nspname,c.relname,attnum ";

// Metabase's PostgreSQL sync: metabase/metabase
// src/metabase/driver/postgres.clj at commit
// 008fd6675457cdd62da2265628bed3b725a607ea. `get-tables-sql` and
// `describe-fields-sql` are HoneySQL forms: the texts below are what they
// format to (`:ansi` quoting; for schema "public" and table
// "purchase_stats", their parameters written as literals);
// `current-user-table-privileges` is SQL text, verbatim.

/// `get-tables-sql`, schemas `["public"]`.
const METABASE_TABLES: &str = r#"SELECT "n"."nspname" AS "schema", "c"."relname" AS "name", CASE "c"."relkind" WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS "type", "d"."description" AS "description", "stat"."n_live_tup" AS "estimated_row_count" FROM "pg_catalog"."pg_class" AS "c" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "c"."relnamespace" = "n"."oid" LEFT JOIN "pg_catalog"."pg_description" AS "d" ON ("c"."oid" = "d"."objoid") AND ("d"."objsubid" = 0) AND ("d"."classoid" = 'pg_class'::regclass) LEFT JOIN "pg_stat_user_tables" AS "stat" ON ("n"."nspname" = "stat"."schemaname") AND ("c"."relname" = "stat"."relname") WHERE ("c"."relnamespace" = "n"."oid") AND ("n"."nspname" !~ '^pg_') AND ("n"."nspname" <> 'information_schema') AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND ("n"."nspname" IN ('public')) ORDER BY "type" ASC, "schema" ASC, "name" ASC"#;

/// `describe-fields-sql`, schemas `["public"]`, tables `["purchase_stats"]`.
const METABASE_FIELDS: &str = r#"SELECT "c"."column_name" AS "name", CASE WHEN "c"."udt_schema" IN ('public', 'pg_catalog') THEN FORMAT('%s', "c"."udt_name") ELSE FORMAT('"%s"."%s"', "c"."udt_schema", "c"."udt_name") END AS "database-type", "c"."ordinal_position" - 1 AS "database-position", "c"."table_schema" AS "table-schema", "c"."table_name" AS "table-name", "pk"."column_name" IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST("c"."table_schema" AS TEXT), CAST("c"."table_name" AS TEXT)) AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment", (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO') AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" != 'NO')) AS "database-required", (("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" != 'NO') AS "database-is-auto-increment" FROM "information_schema"."columns" AS "c" LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name" FROM "information_schema"."table_constraints" AS "tc" INNER JOIN "information_schema"."key_column_usage" AS "kc" ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND ("tc"."table_name" = "kc"."table_name") WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk" ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name") AND ("c"."column_name" = "pk"."column_name") WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND ("c"."table_schema" IN ('public')) AND ("c"."table_name" IN ('purchase_stats')) UNION ALL SELECT "pa"."attname" AS "name", CASE WHEN "ptn"."nspname" IN ('public', 'pg_catalog') THEN FORMAT('%s', "pt"."typname") ELSE FORMAT('"%s"."%s"', "ptn"."nspname", "pt"."typname") END AS "database-type", "pa"."attnum" - 1 AS "database-position", "pn"."nspname" AS "table-schema", "pc"."relname" AS "table-name", FALSE AS "pk?", NULL AS "field-comment", FALSE AS "database-required", FALSE AS "database-is-auto-increment" FROM "pg_catalog"."pg_class" AS "pc" INNER JOIN "pg_catalog"."pg_namespace" AS "pn" ON "pn"."oid" = "pc"."relnamespace" INNER JOIN "pg_catalog"."pg_attribute" AS "pa" ON "pa"."attrelid" = "pc"."oid" INNER JOIN "pg_catalog"."pg_type" AS "pt" ON "pt"."oid" = "pa"."atttypid" INNER JOIN "pg_catalog"."pg_namespace" AS "ptn" ON "ptn"."oid" = "pt"."typnamespace" WHERE ("pc"."relkind" = 'm') AND ("pa"."attnum" >= 1) AND ("pn"."nspname" IN ('public')) AND ("pc"."relname" IN ('purchase_stats')) ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC"#;

/// `current-user-table-privileges`.
const METABASE_PRIVILEGES: &str = "with table_privileges as (\n select\n   NULL as role,\n   t.schemaname as schema,\n   t.objectname as table,\n   pg_catalog.has_any_column_privilege(current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'update') as update,\n   pg_catalog.has_any_column_privilege(current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'select') as select,\n   pg_catalog.has_any_column_privilege(current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'insert') as insert,\n   pg_catalog.has_table_privilege(     current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'delete') as delete\n from (\n   select schemaname, tablename as objectname from pg_catalog.pg_tables\n   union\n   select schemaname, viewname as objectname from pg_catalog.pg_views\n   union\n   select schemaname, matviewname as objectname from pg_catalog.pg_matviews\n ) t\n where t.schemaname !~ '^pg_'\n   and t.schemaname <> 'information_schema'\n   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')\n)\nselect t.*\nfrom table_privileges t";

#[test]
fn pgjdbc_and_metabase_discovery_queries_name_views_and_columns() {
    let server = serving_the_brief();
    let want = described_types(&server);

    // Metabase's own queries, through psql (the simple protocol).
    let tables = psql(&server, None, METABASE_TABLES).unwrap();
    assert_eq!(
        lines(&tables),
        vec![vec!["public", "purchase_stats", "TABLE", "", ""]],
        "{tables}"
    );
    let fields = lines(&psql(&server, None, METABASE_FIELDS).unwrap());
    let names: Vec<&str> = fields.iter().map(|f| f[0].as_str()).collect();
    let expected: Vec<&str> = want.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(names, expected, "{fields:?}");
    assert!(
        fields
            .iter()
            .any(|f| f[0] == "purchase_count" && f[1] == "int8"),
        "{fields:?}"
    );
    let privileges = psql(&server, None, METABASE_PRIVILEGES).unwrap();
    assert_eq!(
        lines(&privileges),
        vec![vec!["", "public", "purchase_stats", "t", "t", "t", "t"]]
    );

    // pgjdbc's, with its parameters bound (the extended protocol).
    let port = server.pg_addr().port();
    let script = format!(
        r#"
import json, psycopg
conn = psycopg.connect(host="127.0.0.1", port={port}, user="kappa", dbname="kappa",
                       sslmode="disable", autocommit=True)
schemas = [r[0] for r in conn.execute({schemas:?}).fetchall()]
tables = [[r[1], r[2], r[3]] for r in conn.execute({tables:?}, ("public", "%")).fetchall()]
columns = [[r[3], r[4], r[9]] for r in
           conn.execute({columns:?}, ("public", "purchase_stats", "%")).fetchall()]
print(json.dumps({{"schemas": schemas, "tables": tables, "columns": columns}}))
"#,
        schemas = PGJDBC_SCHEMAS,
        tables = PGJDBC_TABLES,
        columns = PGJDBC_COLUMNS,
    );
    let out = kappa_tests::run_python(&script, "pgjdbc's metadata queries through psycopg");
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        got["schemas"],
        json!(["information_schema", "pg_catalog", "public"]),
        "{got}"
    );
    assert_eq!(
        got["tables"],
        json!([["public", "purchase_stats", "TABLE"]]),
        "{got}"
    );
    let columns = got["columns"].as_array().unwrap();
    assert_eq!(columns.len(), want.len(), "{got}");
    for (i, (c, (name, _))) in columns.iter().zip(&want).enumerate() {
        assert_eq!(c[0], json!(name), "{got}");
        assert_eq!(c[2], json!(i + 1), "{got}");
    }
    // purchase_count is an int8 (oid 20), as its rows are sent.
    assert!(
        columns
            .iter()
            .any(|c| c[0] == "purchase_count" && c[1] == 20),
        "{got}"
    );
}

/// psycopg 3 reads `information_schema` with a bound parameter, through
/// the extended protocol (parse, bind, describe, execute), and gets typed
/// values.
#[test]
fn psycopg_reads_information_schema_with_a_parameter() {
    let server = serving_the_brief();
    let port = server.pg_addr().port();
    let script = format!(
        r#"
import json, psycopg
conn = psycopg.connect(host="127.0.0.1", port={port}, user="kappa", dbname="kappa",
                       sslmode="disable", autocommit=True)
columns = conn.execute(
    "SELECT column_name, data_type, ordinal_position FROM information_schema.columns "
    "WHERE table_schema = 'public' AND table_name = %s ORDER BY ordinal_position",
    ("purchase_stats",)).fetchall()
tables = conn.execute(
    "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = %s",
    ("public",)).fetchall()
schemata = [r[0] for r in conn.execute(
    "SELECT schema_name FROM information_schema.schemata ORDER BY 1").fetchall()]
views = conn.execute(
    "SELECT count(*) FROM information_schema.views WHERE table_schema = 'public'").fetchone()[0]
print(json.dumps({{"columns": [list(c) for c in columns], "tables": [list(t) for t in tables],
                  "schemata": schemata, "views": views}}))
"#
    );
    let out = kappa_tests::run_python(&script, "psycopg reading information_schema");
    let got: Value = serde_json::from_slice(&out).unwrap();
    let want: Vec<Value> = described_types(&server)
        .into_iter()
        .enumerate()
        .map(|(i, (c, t))| json!([c, t.split('(').next().unwrap(), i + 1]))
        .collect();
    assert_eq!(got["columns"], json!(want), "{got}");
    assert_eq!(
        got["tables"],
        json!([["purchase_stats", "BASE TABLE"]]),
        "{got}"
    );
    assert_eq!(
        got["schemata"],
        json!(["information_schema", "pg_catalog", "public"]),
        "{got}"
    );
    assert_eq!(got["views"], json!(0), "{got}");
}

#[test]
fn a_token_sees_only_the_views_it_may_read() {
    const BOOTSTRAP: &str = "bootstrap-secret-for-the-pg-catalog-tests";
    let server = Server::start_env(
        &["--auth", "tokens", "--pg-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = server.client().with_token(BOOTSTRAP);
    admin.sql_ok(USER_EVENTS);
    admin.sql_ok(PURCHASE_STATS);
    admin.sql_ok(
        "CREATE TABLE events_per_user AS SELECT user_id, COUNT(*) AS events FROM user_events \
         GROUP BY user_id EMIT CHANGES;",
    );
    let (status, body) = admin.post_json(
        "/v1/tokens",
        &json!({"name": "reader", "grants": ["read-view:purchase_stats"]}),
    );
    assert_eq!(status, 201, "{body}");
    let reader = body["token"].as_str().unwrap().to_string();

    let everything = psql(&server, Some(BOOTSTRAP), "\\dt").unwrap();
    let names: Vec<String> = lines(&everything)
        .into_iter()
        .map(|f| f[1].clone())
        .collect();
    assert_eq!(
        names,
        vec!["events_per_user", "purchase_stats"],
        "{everything}"
    );

    let seen = psql(&server, Some(&reader), "\\dt").unwrap();
    let names: Vec<String> = lines(&seen).into_iter().map(|f| f[1].clone()).collect();
    assert_eq!(names, vec!["purchase_stats"], "{seen}");
    let hidden = psql(&server, Some(&reader), "\\d events_per_user").unwrap_err();
    assert!(
        hidden.contains("Did not find any relation named"),
        "{hidden}"
    );
    let columns = psql(
        &server,
        Some(&reader),
        "SELECT DISTINCT table_name FROM information_schema.columns WHERE table_schema = 'public'",
    )
    .unwrap();
    assert_eq!(columns.trim(), "purchase_stats", "{columns}");
}
