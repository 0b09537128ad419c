//! Which queries are catalog queries: a `SELECT` (or `WITH`) that names a
//! relation of `pg_catalog` or `information_schema` (qualified, or a
//! `pg_*` system relation unqualified), or a `SELECT` without `FROM`
//! (`SELECT current_setting(..)`, `SELECT 1`: Kappa's own SQL reads only
//! from views). Kappa's statements — pull queries, `SHOW`, `DESCRIBE`,
//! `EXPLAIN`, `CREATE`, .. — are not.
//!
//! A scan of the query's tokens decides, without parsing it: cheap, and
//! a query that does not tokenize is left to Kappa's SQL to reject.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::schema::SYSTEM;

/// Longest query text scanned: a longer one is not a catalog query.
const MAX_SCANNED_BYTES: usize = 1 << 20;

/// Whether `query` reads PostgreSQL's catalogs and is answered here
/// rather than by Kappa's SQL.
pub fn reads_catalog(query: &str) -> bool {
    if query.len() > MAX_SCANNED_BYTES {
        return false;
    }
    // The common key lookup, without tokenizing: its plain names are its
    // only words, and none is qualified.
    if let Some(lookup) = kappa_processor::sql::key_lookup_names(query) {
        return lookup.names().any(|n| is_system(&n.to_lowercase()));
    }
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, query).tokenize() else {
        return false;
    };
    let words: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let starts_query = match words.first() {
        Some(Token::Word(w)) => matches!(w.keyword, Keyword::SELECT | Keyword::WITH),
        Some(Token::LParen) => true,
        _ => false,
    };
    if !starts_query {
        return false;
    }
    let mut has_from = false;
    for (i, t) in words.iter().enumerate() {
        let Token::Word(w) = t else { continue };
        if w.quote_style.is_none() && w.keyword == Keyword::FROM {
            has_from = true;
        }
        let name = match w.quote_style {
            Some(_) => w.value.clone(),
            None => w.value.to_lowercase(),
        };
        let qualifies = matches!(words.get(i + 1), Some(Token::Period));
        if qualifies && (name == "pg_catalog" || name == "information_schema") {
            return true;
        }
        let after_period = i > 0 && matches!(words.get(i - 1), Some(Token::Period));
        if !qualifies && !after_period && is_system(&name) {
            return true;
        }
    }
    !has_from
}

/// Whether `name` (lower-cased) is a relation of `pg_catalog`.
fn is_system(name: &str) -> bool {
    SYSTEM
        .iter()
        .any(|r| r.schema == "pg_catalog" && r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_queries_are_taken() {
        assert!(reads_catalog("SELECT * FROM pg_catalog.pg_class"));
        assert!(reads_catalog("select relname from PG_CLASS"));
        assert!(reads_catalog(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ));
        assert!(reads_catalog(
            "SELECT c.oid FROM pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(x)$'"
        ));
        assert!(reads_catalog(
            "SELECT current_setting('server_version_num')::int/100 as version"
        ));
        assert!(reads_catalog("SELECT 1"));
        assert!(reads_catalog("SELECT * FROM PG_Class WHERE relname = 'x'"));
        assert!(reads_catalog(
            "SELECT relname FROM pg_class WHERE oid = '1'"
        ));
        assert!(reads_catalog(
            "WITH t AS (SELECT 1) SELECT * FROM t JOIN pg_namespace n ON true"
        ));
    }

    #[test]
    fn kappas_own_statements_are_not() {
        for q in [
            "SELECT * FROM purchase_stats WHERE user_id = 'u1'",
            "SELECT user_id, purchase_count FROM purchase_stats LIMIT 3",
            "SHOW TABLES",
            "DESCRIBE purchase_stats",
            "EXPLAIN purchase_stats",
            "CREATE TABLE pg_like AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id",
            "DROP TABLE purchase_stats",
            "INSERT INTO user_events (user_id) VALUES ('pg_class')",
            "SELECT * FROM my_schema.pg_class_copy",
            "SELECT 'unterminated",
        ] {
            assert!(!reads_catalog(q), "{q}");
        }
    }
}
