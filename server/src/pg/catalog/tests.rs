//! The evaluator over a small catalog: joins, `NULL` logic, subqueries,
//! regular expressions, limits, errors, and psql 15's `\d` queries.

use super::relations::{Catalog, KappaView, ViewColumn};
use super::*;
use crate::dto::statements::SqlType;

fn catalog() -> Catalog {
    Catalog::new(vec![
        KappaView {
            name: "purchase_stats".into(),
            columns: vec![
                ViewColumn::of("user_id".into(), Some(&SqlType::Varchar)),
                ViewColumn::of("window_start".into(), Some(&SqlType::Timestamp)),
                ViewColumn::of("purchase_count".into(), Some(&SqlType::BigInt)),
                ViewColumn::of(
                    "total_amount".into(),
                    Some(&SqlType::Decimal {
                        precision: 38,
                        scale: 2,
                    }),
                ),
            ],
        },
        KappaView {
            name: "clicks".into(),
            columns: vec![ViewColumn::of("n".into(), None)],
        },
    ])
}

/// The rows `query` answers, as text (`NULL` as `None`).
fn rows(query: &str) -> Vec<Vec<Option<String>>> {
    match answer_over(&catalog(), query) {
        Ok(mut answers) => match answers.pop() {
            Some(Answer::Rows { rows, .. }) => rows,
            other => panic!("{query}: {other:?}"),
        },
        Err(e) => panic!("{query}: {e:?}"),
    }
}

fn strings(query: &str) -> Vec<Vec<String>> {
    rows(query)
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| v.unwrap_or_else(|| "NULL".into()))
                .collect()
        })
        .collect()
}

fn error(query: &str) -> CatalogError {
    match answer_over(&catalog(), query) {
        Ok(a) => panic!("{query} answered {a:?}"),
        Err(e) => e,
    }
}

#[test]
fn views_join_their_schema_and_columns() {
    assert_eq!(
        strings(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_catalog.pg_class c \
             LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = 'public' ORDER BY 2"
        ),
        vec![
            vec!["public", "clicks", "r"],
            vec!["public", "purchase_stats", "r"]
        ]
    );
    assert_eq!(
        strings(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a, pg_class c WHERE a.attrelid = c.oid \
             AND c.relname = 'purchase_stats' AND a.attnum > 0 ORDER BY a.attnum"
        ),
        vec![
            vec!["user_id", "text"],
            vec!["window_start", "timestamp with time zone"],
            vec!["purchase_count", "bigint"],
            vec!["total_amount", "numeric(38,2)"],
        ]
    );
}

#[test]
fn comparisons_with_null_are_unknown() {
    assert_eq!(
        strings("SELECT NULL = NULL, 1 = NULL, NULL IS NULL, 1 IN (2, NULL), 1 IN (1, NULL), NOT (NULL = 1)"),
        vec![vec!["NULL", "NULL", "t", "NULL", "t", "NULL"]]
    );
    assert_eq!(
        strings("SELECT NULL AND false, NULL OR true, NULL AND true"),
        vec![vec!["f", "t", "NULL"]]
    );
    // A LEFT JOIN's missing side is NULL, and WHERE drops unknown rows.
    assert_eq!(
        rows(
            "SELECT c.relname FROM pg_class c LEFT JOIN pg_description d ON d.objoid = c.oid \
             WHERE c.relname = 'clicks' AND d.description = 'x'"
        )
        .len(),
        0
    );
}

#[test]
fn correlated_subqueries_see_the_outer_row() {
    assert_eq!(
        strings(
            "SELECT c.relname, (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid) \
             FROM pg_class c WHERE c.relnamespace = 2200 ORDER BY 1"
        ),
        vec![vec!["clicks", "1"], vec!["purchase_stats", "4"]]
    );
    assert_eq!(
        strings(
            "SELECT relname FROM pg_class c WHERE EXISTS \
             (SELECT 1 FROM pg_attribute WHERE attrelid = c.oid AND attname = 'n')"
        ),
        vec![vec!["clicks"]]
    );
}

#[test]
fn regular_expressions_and_like_match_as_postgresql_does() {
    assert_eq!(
        strings(
            "SELECT c.relname FROM pg_catalog.pg_class c \
             WHERE c.relname OPERATOR(pg_catalog.~) '^(purchase_stats)$' COLLATE pg_catalog.default"
        ),
        vec![vec!["purchase_stats"]]
    );
    assert_eq!(
        strings("SELECT 'pg_toast' ~ '^pg_', 'Abc' ~* '^a', 'abc' !~ 'b', 'a_c' LIKE 'a\\_c', 'ABC' ILIKE 'a%'"),
        vec![vec!["t", "t", "f", "t", "t"]]
    );
    assert_eq!(error("SELECT 'a' ~ '('").code, "2201B");
}

#[test]
fn grafanas_search_path_arrays_evaluate() {
    assert_eq!(
        strings(
            "SELECT CASE WHEN trim(s[i]) = '\"$user\"' THEN user ELSE trim(s[i]) END \
             FROM generate_series(array_lower(string_to_array(current_setting('search_path'),','),1), \
             array_upper(string_to_array(current_setting('search_path'),','),1)) as i, \
             string_to_array(current_setting('search_path'),',') s"
        ),
        vec![vec!["public"]]
    );
    assert_eq!(
        strings(
            "SELECT (parse_ident('public.purchase_stats'))[2], array_length(parse_ident('x'),1)"
        ),
        vec![vec!["purchase_stats", "1"]]
    );
}

#[test]
fn casts_to_reg_types_show_names() {
    assert_eq!(
        strings(
            "SELECT 16384::regclass, 'pg_class'::regclass::oid, 20::regtype, \
             c.oid::pg_catalog.regclass::pg_catalog.text FROM pg_class c WHERE c.oid = '16385'"
        ),
        vec![vec!["clicks", "1259", "bigint", "purchase_stats"]]
    );
    assert_eq!(error("SELECT 'nowhere'::regclass").code, "42P01");
}

#[test]
fn grouping_ordering_limits_and_unions() {
    assert_eq!(
        strings(
            "SELECT relkind, count(*) FROM pg_class WHERE relnamespace = 2200 GROUP BY relkind"
        ),
        vec![vec!["r", "2"]]
    );
    assert_eq!(
        strings("SELECT nspname FROM pg_namespace ORDER BY nspname DESC LIMIT 2 OFFSET 1"),
        vec![vec!["pg_catalog"], vec!["information_schema"]]
    );
    assert_eq!(
        strings("SELECT 'b' AS x UNION SELECT 'a' UNION SELECT 'b' ORDER BY 1"),
        vec![vec!["a"], vec!["b"]]
    );
    assert_eq!(
        strings(
            "SELECT attname, row_number() OVER (PARTITION BY attrelid ORDER BY attnum DESC) \
             FROM pg_attribute WHERE attrelid = 16385 ORDER BY 2"
        ),
        vec![
            vec!["total_amount", "1"],
            vec!["purchase_count", "2"],
            vec!["window_start", "3"],
            vec!["user_id", "4"],
        ]
    );
    assert_eq!(strings("SELECT count(*) FROM pg_inherits"), vec![vec!["0"]]);
}

#[test]
fn what_is_not_supported_is_an_error_naming_it() {
    assert_eq!(error("SELECT no_such_function(1)").code, "42883");
    assert_eq!(error("SELECT * FROM pg_catalog.pg_nothing").code, "42P01");
    assert_eq!(
        error("SELECT * FROM purchase_stats JOIN pg_class ON true").code,
        "0A000"
    );
    assert_eq!(error("SELECT nope FROM pg_class").code, "42703");
    assert_eq!(error("DELETE FROM pg_class").code, "0A000");
    assert_eq!(error("SELEC 1").code, "42601");
    assert_eq!(
        error("SELECT * FROM pg_class c, LATERAL (SELECT c.oid) x").code,
        "0A000"
    );
}

#[test]
fn nesting_and_row_counts_are_bounded() {
    let deep = format!("SELECT {}1{}", "(".repeat(200), ")".repeat(200));
    let e = error(&deep);
    assert!(e.code == "54001" || e.code == "42601", "{e:?}");
    let mut nested = "SELECT 1".to_string();
    for _ in 0..40 {
        nested = format!("SELECT ({nested})");
    }
    let e = error(&nested);
    assert!(e.code == "54001" || e.code == "42601", "{e:?}");
    assert_eq!(
        error("SELECT count(*) FROM pg_attribute a, pg_attribute b, pg_attribute c").code,
        "54000"
    );
    assert_eq!(
        error("SELECT * FROM generate_series(1, 100000000)").code,
        "54000"
    );
}

/// psql 15's queries for `\d purchase_stats`, `\dt`, `\dn`, `\l`, as
/// logged by PostgreSQL 15 (`log_statement = all`).
#[test]
fn psqls_describe_queries_answer() {
    let found = strings(
        "SELECT c.oid,\n  n.nspname,\n  c.relname\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\nWHERE c.relname OPERATOR(pg_catalog.~) '^(purchase_stats)$' COLLATE pg_catalog.default\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 2, 3;",
    );
    assert_eq!(found, vec![vec!["16385", "public", "purchase_stats"]]);
    let info = strings("SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname\nFROM pg_catalog.pg_class c\n LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)\nLEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)\nWHERE c.oid = '16385';");
    assert_eq!(info[0][1], "r");
    assert_eq!(info[0][14], "heap");
    let columns = strings("SELECT a.attname,\n  pg_catalog.format_type(a.atttypid, a.atttypmod),\n  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)\n   FROM pg_catalog.pg_attrdef d\n   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),\n  a.attnotnull,\n  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t\n   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,\n  a.attidentity,\n  a.attgenerated\nFROM pg_catalog.pg_attribute a\nWHERE a.attrelid = '16385' AND a.attnum > 0 AND NOT a.attisdropped\nORDER BY a.attnum;");
    assert_eq!(columns.len(), 4);
    assert_eq!(
        columns[0],
        vec!["user_id", "text", "NULL", "f", "NULL", "", ""]
    );
    for q in [
        "SELECT pol.polname, pol.polpermissive,\n  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,\n  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),\n  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),\n  CASE pol.polcmd\n    WHEN 'r' THEN 'SELECT'\n    WHEN 'a' THEN 'INSERT'\n    WHEN 'w' THEN 'UPDATE'\n    WHEN 'd' THEN 'DELETE'\n    END AS cmd\nFROM pg_catalog.pg_policy pol\nWHERE pol.polrelid = '16385' ORDER BY 1;",
        "SELECT oid, stxrelid::pg_catalog.regclass, stxnamespace::pg_catalog.regnamespace::pg_catalog.text AS nsp, stxname,\npg_catalog.pg_get_statisticsobjdef_columns(oid) AS columns,\n  'd' = any(stxkind) AS ndist_enabled,\n  'f' = any(stxkind) AS deps_enabled,\n  'm' = any(stxkind) AS mcv_enabled,\nstxstattarget\nFROM pg_catalog.pg_statistic_ext\nWHERE stxrelid = '16385'\nORDER BY nsp, stxname;",
        "SELECT pubname\n     , NULL\n     , NULL\nFROM pg_catalog.pg_publication p\n     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid\n     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid\nWHERE pc.oid ='16385' and pg_catalog.pg_relation_is_publishable('16385')\nUNION\nSELECT pubname\n     , pg_get_expr(pr.prqual, c.oid)\n     , (CASE WHEN pr.prattrs IS NOT NULL THEN\n         (SELECT string_agg(attname, ', ')\n           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,\n                pg_catalog.pg_attribute\n          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])\n        ELSE NULL END) FROM pg_catalog.pg_publication p\n     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid\n     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid\nWHERE pr.prrelid = '16385'\nUNION\nSELECT pubname\n     , NULL\n     , NULL\nFROM pg_catalog.pg_publication p\nWHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16385')\nORDER BY 1;",
        "SELECT c.oid::pg_catalog.regclass\nFROM pg_catalog.pg_class c, pg_catalog.pg_inherits i\nWHERE c.oid = i.inhparent AND i.inhrelid = '16385'\n  AND c.relkind != 'p' AND c.relkind != 'I'\nORDER BY inhseqno;",
        "SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)\nFROM pg_catalog.pg_class c, pg_catalog.pg_inherits i\nWHERE c.oid = i.inhrelid AND i.inhparent = '16385'\nORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;",
    ] {
        assert_eq!(rows(q).len(), 0, "{q}");
    }
    let listed = strings("SELECT n.nspname as \"Schema\",\n  c.relname as \"Name\",\n  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as \"Type\",\n  pg_catalog.pg_get_userbyid(c.relowner) as \"Owner\"\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\n     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam\nWHERE c.relkind IN ('r','p','')\n      AND n.nspname <> 'pg_catalog'\n      AND n.nspname !~ '^pg_toast'\n      AND n.nspname <> 'information_schema'\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 1,2;");
    assert_eq!(
        listed,
        vec![
            vec!["public", "clicks", "table", "kappa"],
            vec!["public", "purchase_stats", "table", "kappa"]
        ]
    );
    let schemas = strings("SELECT n.nspname AS \"Name\",\n  pg_catalog.pg_get_userbyid(n.nspowner) AS \"Owner\"\nFROM pg_catalog.pg_namespace n\nWHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'\nORDER BY 1;");
    assert_eq!(schemas, vec![vec!["public", "kappa"]]);
    let databases = strings("SELECT d.datname as \"Name\",\n       pg_catalog.pg_get_userbyid(d.datdba) as \"Owner\",\n       pg_catalog.pg_encoding_to_char(d.encoding) as \"Encoding\",\n       d.datcollate as \"Collate\",\n       d.datctype as \"Ctype\",\n       d.daticulocale as \"ICU Locale\",\n       CASE d.datlocprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS \"Locale Provider\",\n       pg_catalog.array_to_string(d.datacl, E'\\n') AS \"Access privileges\"\nFROM pg_catalog.pg_database d\nORDER BY 1;");
    assert_eq!(databases[0][0], "kappa");
}

#[test]
fn answers_type_their_columns() {
    let answers = answer_over(
        &catalog(),
        "SELECT oid, relname, relkind, relhasindex, relnatts FROM pg_class LIMIT 1",
    )
    .unwrap();
    let Some(Answer::Rows { columns, .. }) = answers.first() else {
        panic!("{answers:?}")
    };
    let types: Vec<_> = columns.iter().map(|(_, t)| t.clone()).collect();
    use pgwire::api::Type;
    assert_eq!(
        types,
        vec![Type::OID, Type::NAME, Type::CHAR, Type::BOOL, Type::INT2]
    );
}
