//! One statement's tokens into a [`Statement`]: the DDL (`CREATE STREAM |
//! TABLE`, `DROP`, `SHOW`, `DESCRIBE`) is parsed by hand, the `SELECT` of
//! `CREATE .. AS` and of pull queries by `sqlparser`
//! ([`parse_sql_query`]).

use sqlparser::ast::Query;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan};

use super::defaults;
use super::error::{Result, SqlError};
use super::ksql::{extract_query_clauses, Properties, QueryTokens};
use super::lex::{self, lower_first, Cursor, Name, StatementTokens, DIALECT};
use super::query::QueryParts;
use super::types::{
    ColumnDecl, CreateAs, DedupDecl, Explain, InsertInto, ObjectKind, ShowWhat, SourceDecl,
    SqlType, Statement, VersionChange,
};
use super::{limits, pull, subquery, types};

/// Properties of `CREATE STREAM|TABLE name (..) WITH (..)`.
const SOURCE_PROPERTIES: &[&str] = &[
    "KAFKA_TOPIC",
    "TOPIC",
    "VALUE_FORMAT",
    "KEY_FORMAT",
    "TIMESTAMP",
    "WATERMARK_DELAY",
    "IDLE_TIMEOUT",
    "PARTITIONS",
    "REPLICAS",
    "CLUSTER",
];

/// Properties of `CREATE .. AS SELECT`.
const CREATE_AS_PROPERTIES: &[&str] = &[
    "KAFKA_TOPIC",
    "TOPIC",
    "CLUSTER",
    "VALUE_FORMAT",
    "PARTITIONS",
    "COMPRESSION",
    "REPLICAS",
    "LATE_TOPIC",
    "DEDUP_BY",
    "DEDUP_TTL",
    "WATERMARK_DELAY",
    "IDLE_TIMEOUT",
    "MAX_FUTURE",
    "SWAP",
    "JOIN_HISTORY",
    "KEEP_VERSIONS",
    "VERSION_GRACE",
    "PARALLELISM",
];

/// `INSERT INTO name [WITH (QUERY_ID='id')] SELECT ..` (`INSERT` eaten).
fn parse_insert(st: &StatementTokens, c: &mut Cursor<'_>) -> Result<Statement> {
    c.expect_kw("INTO", "INTO after INSERT")?;
    let target = c.name("the name of the stream to insert into")?;
    let mut query_id = None;
    if c.eat_kw("WITH") {
        let mut props = Properties::parse(c)?;
        query_id = props
            .string(&["QUERY_ID"])?
            .map(|(id, _)| id.to_lowercase());
        props.finish("INSERT INTO", &["QUERY_ID"])?;
    }
    if !c.is_kw("SELECT") {
        return Err(c.expected("SELECT after INSERT INTO name"));
    }
    let at = c.here();
    Ok(Statement::InsertInto(InsertInto {
        target: target.normalized(),
        query_id,
        select_sql: text_from(st, at),
        line: at.line,
        column: at.column,
    }))
}

/// The text of statement `st` from `at` (a location in it) to its end.
fn text_from(st: &StatementTokens, at: Location) -> String {
    let mut chars = st.text.chars().peekable();
    let (mut line, mut column) = (st.start.line, st.start.column);
    while (line, column) < (at.line, at.column) {
        match chars.next() {
            Some('\n') => (line, column) = (line + 1, 1),
            Some(_) => column += 1,
            None => break,
        }
    }
    chars.collect()
}

/// The text of `EXPLAIN <statement>` after `EXPLAIN` (and the blanks and
/// comments before the statement).
fn explained_text(text: &str) -> String {
    let mut rest = text.get("EXPLAIN".len()..).unwrap_or_default();
    loop {
        rest = rest.trim_start();
        if let Some(comment) = rest.strip_prefix("--") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(comment) = rest.strip_prefix("/*") {
            rest = comment.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return rest.to_string();
        }
    }
}

/// Parses every statement of `sql`.
pub(crate) fn parse_all(sql: &str) -> Result<Vec<Statement>> {
    let statements = lex::split(sql)?;
    if statements.is_empty() {
        return Err(SqlError::new("expected a statement, found nothing", 1, 1));
    }
    statements.iter().map(parse_statement).collect()
}

fn parse_statement(st: &StatementTokens) -> Result<Statement> {
    let mut c = Cursor::new(&st.tokens, st.end);
    if c.is_kw("CREATE") {
        parse_create(st)
    } else if c.eat_kw("DROP") {
        parse_drop(&mut c)
    } else if c.eat_kw("SHOW") || c.eat_kw("LIST") {
        parse_show(&mut c)
    } else if c.eat_kw("DESCRIBE") || c.eat_kw("DESC") {
        let name = c.name("the name of a stream, table or view after DESCRIBE")?;
        c.expect_end("end of statement after DESCRIBE name")?;
        Ok(Statement::Describe(name.normalized()))
    } else if c.is_kw("SELECT") {
        pull::parse(st).map(Statement::Select)
    } else if c.eat_kw("INSERT") {
        parse_insert(st, &mut c)
    } else if c.eat_kw("REPLAY") {
        parse_replay(&mut c)
    } else if c.eat_kw("PROMOTE") {
        let name = version_target(&mut c, "PROMOTE")?;
        Ok(Statement::ChangeVersion(VersionChange::Promote { name }))
    } else if c.eat_kw("ROLLBACK") {
        let name = version_target(&mut c, "ROLLBACK")?;
        Ok(Statement::ChangeVersion(VersionChange::Rollback { name }))
    } else if c.eat_kw("EXPLAIN") {
        if c.is_kw("CREATE") {
            let inner = StatementTokens {
                tokens: st.tokens[1..].to_vec(),
                text: explained_text(&st.text),
                start: st.tokens[1].span.start,
                end: st.end,
            };
            let (create, _) = parse_create_as(&inner)?;
            return Ok(Statement::Explain(Explain::Create(Box::new(create))));
        }
        if c.is_kw("SELECT") {
            let inner = StatementTokens {
                tokens: st.tokens[1..].to_vec(),
                text: explained_text(&st.text),
                start: st.tokens[1].span.start,
                end: st.end,
            };
            return pull::parse(&inner).map(|q| Statement::Explain(Explain::Select(Box::new(q))));
        }
        let name =
            c.name("CREATE .. AS SELECT .., a pull query or the name of a view after EXPLAIN")?;
        c.expect_end("end of statement after EXPLAIN name")?;
        Ok(Statement::Explain(Explain::View(name.normalized())))
    } else {
        Err(c.expected(
            "CREATE, DROP, SHOW, DESCRIBE, SELECT, EXPLAIN, INSERT, REPLAY, PROMOTE or ROLLBACK",
        ))
    }
}

/// Properties of `REPLAY name .. WITH (..)`.
const REPLAY_PROPERTIES: &[&str] = &["SWAP", "ALLOW_TRUNCATED"];

/// `[TABLE | STREAM | VIEW] name` after `PROMOTE` or `ROLLBACK` (`keyword`),
/// ending the statement: the normalized name.
fn version_target(c: &mut Cursor<'_>, keyword: &str) -> Result<String> {
    let name = view_name(c, keyword)?;
    c.expect_end(&format!("end of statement after {keyword} name"))?;
    Ok(name)
}

/// `[TABLE | STREAM | VIEW] name` after `keyword`: the kind word is
/// optional (a view named `table` is still a name when nothing follows).
fn view_name(c: &mut Cursor<'_>, keyword: &str) -> Result<String> {
    let has_kind = ["TABLE", "STREAM", "VIEW"].iter().any(|kw| c.is_kw(kw));
    if has_kind && c.rest().len() > 1 {
        c.next_token();
    }
    Ok(c.name(&format!("the name of a view after {keyword}"))?
        .normalized())
}

/// `REPLAY [TABLE|STREAM] name [FROM EARLIEST | LATEST | TIMESTAMP t |
/// OFFSETS (n, ..)] [WITH (SWAP = 'AUTO'|'MANUAL', ALLOW_TRUNCATED = TRUE)]`
/// (`REPLAY` eaten). `t` is milliseconds since the epoch or an RFC 3339
/// string.
fn parse_replay(c: &mut Cursor<'_>) -> Result<Statement> {
    use crate::runner::StartFrom;
    let name = view_name(c, "REPLAY")?;
    let mut from = StartFrom::Earliest;
    if c.eat_kw("FROM") {
        from = if c.eat_kw("EARLIEST") {
            StartFrom::Earliest
        } else if c.eat_kw("LATEST") {
            StartFrom::Latest
        } else if c.eat_kw("TIMESTAMP") {
            let at = c.here();
            let ms = match c.next_token().map(|t| &t.token) {
                Some(Token::Number(n, _)) => n.parse::<i64>().ok().filter(|ms| *ms >= 0),
                Some(Token::SingleQuotedString(text)) => crate::time::parse_timestamp_text(text),
                _ => None,
            };
            StartFrom::Timestamp(ms.ok_or_else(|| {
                SqlError::at(
                    at,
                    "expected milliseconds since the epoch or an RFC 3339 time such as \
                     '2026-01-01T00:00:00Z' after FROM TIMESTAMP",
                )
            })?)
        } else if c.eat_kw("OFFSETS") {
            StartFrom::Offsets(replay_offsets(c)?)
        } else {
            return Err(c.expected("EARLIEST, LATEST, TIMESTAMP or OFFSETS after FROM"));
        };
    }
    let (mut swap_manual, mut allow_truncated) = (false, false);
    if c.eat_kw("WITH") {
        let mut props = Properties::parse(c)?;
        if let Some((mode, span)) = props.string(&["SWAP"])? {
            swap_manual = match mode.to_ascii_uppercase().as_str() {
                "AUTO" => false,
                "MANUAL" => true,
                _ => {
                    return Err(SqlError::span(
                        span,
                        format!("SWAP must be 'AUTO' or 'MANUAL', got {mode:?}"),
                    ))
                }
            };
        }
        allow_truncated = props.bool(&["ALLOW_TRUNCATED"])?.unwrap_or(false);
        props.finish("REPLAY", REPLAY_PROPERTIES)?;
    }
    c.expect_end("FROM .., WITH (..) or the end of statement after REPLAY name")?;
    Ok(Statement::ChangeVersion(VersionChange::Replay {
        name,
        from,
        swap_manual,
        allow_truncated,
    }))
}

/// `(n, ..)`: one start offset per partition, at most
/// [`limits::MAX_REPLAY_OFFSETS`].
fn replay_offsets(c: &mut Cursor<'_>) -> Result<Vec<u64>> {
    c.expect(&Token::LParen, "( after OFFSETS")?;
    let mut offsets = Vec::new();
    loop {
        let at = c.here();
        match c.next_token().map(|t| &t.token) {
            Some(Token::Number(n, _)) => match n.parse::<u64>() {
                Ok(offset) if offsets.len() < limits::MAX_REPLAY_OFFSETS => offsets.push(offset),
                Ok(_) => {
                    return Err(SqlError::at(
                        at,
                        format!(
                            "more than {} offsets after OFFSETS",
                            limits::MAX_REPLAY_OFFSETS
                        ),
                    ))
                }
                Err(_) => {
                    return Err(SqlError::at(
                        at,
                        format!("an offset is a whole number from 0, got {n}"),
                    ))
                }
            },
            _ => return Err(SqlError::at(at, "expected an offset (a whole number)")),
        }
        if c.eat(&Token::Comma) {
            continue;
        }
        c.expect(&Token::RParen, "',' or ')' after an offset")?;
        return Ok(offsets);
    }
}

fn parse_drop(c: &mut Cursor<'_>) -> Result<Statement> {
    let kind = object_kind(c, "STREAM or TABLE after DROP")?;
    let if_exists = if c.eat_kw("IF") {
        c.expect_kw("EXISTS", "EXISTS after IF")?;
        true
    } else {
        false
    };
    let name = c.name(&format!("the name of the {kind} to drop"))?;
    if c.is_kw("DELETE") {
        return Err(SqlError::at(
            c.here(),
            "DELETE TOPIC is not supported: delete the topic with DELETE /v1/topics/{topic}",
        ));
    }
    c.expect_end("end of statement after DROP name")?;
    Ok(Statement::Drop {
        kind,
        name: name.normalized(),
        if_exists,
    })
}

fn parse_show(c: &mut Cursor<'_>) -> Result<Statement> {
    let what = if c.eat_kw("STREAMS") {
        ShowWhat::Streams
    } else if c.eat_kw("TABLES") {
        ShowWhat::Tables
    } else if c.eat_kw("VIEWS") {
        ShowWhat::Views
    } else if c.eat_kw("TOPICS") {
        ShowWhat::Topics
    } else if c.eat_kw("CLUSTERS") {
        ShowWhat::Clusters
    } else {
        return Err(c.expected("STREAMS, TABLES, VIEWS, TOPICS or CLUSTERS after SHOW"));
    };
    c.expect_end("end of statement after SHOW")?;
    Ok(Statement::Show(what))
}

fn object_kind(c: &mut Cursor<'_>, what: &str) -> Result<ObjectKind> {
    if c.eat_kw("STREAM") {
        Ok(ObjectKind::Stream)
    } else if c.eat_kw("TABLE") {
        Ok(ObjectKind::Table)
    } else {
        Err(c.expected(what))
    }
}

/// The head of a CREATE statement, up to the name.
struct CreateHead {
    or_replace: bool,
    kind: ObjectKind,
    name: Name,
}

fn create_head(c: &mut Cursor<'_>) -> Result<CreateHead> {
    c.expect_kw("CREATE", "CREATE")?;
    let or_replace = if c.eat_kw("OR") {
        c.expect_kw("REPLACE", "REPLACE after OR")?;
        true
    } else {
        false
    };
    let kind = object_kind(c, "STREAM or TABLE after CREATE")?;
    let name = c.name(&format!("the name of the new {kind}"))?;
    Ok(CreateHead {
        or_replace,
        kind,
        name,
    })
}

fn parse_create(st: &StatementTokens) -> Result<Statement> {
    let mut c = Cursor::new(&st.tokens, st.end);
    let head = create_head(&mut c)?;
    if c.peek().is_some_and(|t| t.token == Token::LParen) {
        let columns = parse_columns(&mut c, head.kind)?;
        c.expect_kw("WITH", "WITH (KAFKA_TOPIC = '..') after the columns")?;
        let props = Properties::parse(&mut c)?;
        c.expect_end("end of statement after the WITH list")?;
        return source_decl(st, head, columns, props).map(Statement::CreateSource);
    }
    let mut props = Properties::default();
    if c.eat_kw("WITH") {
        props = Properties::parse(&mut c)?;
    }
    if c.at_end() {
        return source_decl(st, head, Vec::new(), props).map(Statement::CreateSource);
    }
    parse_create_as(st).map(|(stmt, _)| Statement::CreateAs(stmt))
}

/// Parses `( name type [KEY | PRIMARY KEY], .. )`.
fn parse_columns(c: &mut Cursor<'_>, kind: ObjectKind) -> Result<Vec<ColumnDecl>> {
    c.expect(&Token::LParen, "'('")?;
    let mut columns: Vec<ColumnDecl> = Vec::new();
    loop {
        let name = c.name("a column name")?;
        if columns
            .iter()
            .any(|col| col.name.to_lowercase() == name.value.to_lowercase())
        {
            return Err(SqlError::span(
                name.span,
                format!("column '{}' is declared twice", name.value),
            ));
        }
        let sql_type = parse_type(c)?;
        let key_at = c.here();
        let key = if c.eat_kw("PRIMARY") {
            c.expect_kw("KEY", "KEY after PRIMARY")?;
            if kind == ObjectKind::Stream {
                return Err(SqlError::at(
                    key_at,
                    "a stream's key column is declared with KEY; PRIMARY KEY is for tables",
                ));
            }
            true
        } else if c.eat_kw("KEY") {
            if kind == ObjectKind::Table {
                return Err(SqlError::at(
                    key_at,
                    "a table's key column is declared with PRIMARY KEY",
                ));
            }
            true
        } else {
            false
        };
        if key && columns.iter().any(|col| col.key) {
            return Err(SqlError::at(key_at, "only one key column is supported"));
        }
        columns.push(ColumnDecl {
            name: name.value,
            sql_type,
            key,
        });
        if c.eat(&Token::Comma) {
            continue;
        }
        c.expect(&Token::RParen, "',' or ')' after a column definition")?;
        return Ok(columns);
    }
}

/// Parses a column type.
fn parse_type(c: &mut Cursor<'_>) -> Result<SqlType> {
    const WHAT: &str =
        "a type (BOOLEAN, INT, BIGINT, DOUBLE, DECIMAL(p, s), VARCHAR, TIMESTAMP, BYTES, ARRAY<..>, MAP<..>, STRUCT<..>)";
    let Some(t) = c.peek() else {
        return Err(c.expected(WHAT));
    };
    let word = match &t.token {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
        _ => return Err(c.expected(WHAT)),
    };
    let ty = match word.as_str() {
        "BOOLEAN" | "BOOL" => SqlType::Boolean,
        "INT" | "INTEGER" => SqlType::Integer,
        "BIGINT" => SqlType::BigInt,
        "DOUBLE" => SqlType::Double,
        "VARCHAR" | "STRING" => SqlType::Varchar,
        "TIMESTAMP" => SqlType::Timestamp,
        "BYTES" => SqlType::Json,
        "DECIMAL" => {
            c.next_token();
            return parse_decimal(c, t.span.start);
        }
        "ARRAY" | "MAP" | "STRUCT" => {
            c.next_token();
            skip_angle_brackets(c, &word)?;
            return Ok(SqlType::Json);
        }
        _ => return Err(c.expected(WHAT)),
    };
    c.next_token();
    if ty == SqlType::Varchar && c.eat(&Token::LParen) {
        if !matches!(c.next_token().map(|t| &t.token), Some(Token::Number(..))) {
            return Err(SqlError::at(c.here(), "expected a length in VARCHAR(n)"));
        }
        c.expect(&Token::RParen, "')' after the VARCHAR length")?;
    }
    Ok(ty)
}

fn parse_decimal(c: &mut Cursor<'_>, at: Location) -> Result<SqlType> {
    c.expect(
        &Token::LParen,
        "'(' after DECIMAL: DECIMAL(precision, scale)",
    )?;
    let number = |c: &mut Cursor<'_>, what: &str| -> Result<u32> {
        match c.peek().map(|t| &t.token) {
            Some(Token::Number(n, _)) => {
                let v = n.parse::<u32>().map_err(|_| c.expected(what))?;
                c.next_token();
                Ok(v)
            }
            _ => Err(c.expected(what)),
        }
    };
    let precision = number(c, "the DECIMAL precision")?;
    c.expect(
        &Token::Comma,
        "',' and the scale in DECIMAL(precision, scale)",
    )?;
    let scale = number(c, "the DECIMAL scale")?;
    c.expect(&Token::RParen, "')' after DECIMAL(precision, scale")?;
    if precision == 0 || scale > precision {
        return Err(SqlError::at(
            at,
            format!("DECIMAL({precision}, {scale}) needs a precision of at least 1 and a scale not above it"),
        ));
    }
    Ok(SqlType::Decimal { precision, scale })
}

/// Skips `< .. >` after ARRAY, MAP or STRUCT (nested ones too).
fn skip_angle_brackets(c: &mut Cursor<'_>, word: &str) -> Result<()> {
    c.expect(&Token::Lt, &format!("'<' after {word}"))?;
    let mut depth = 1usize;
    while depth > 0 {
        match c.next_token().map(|t| &t.token) {
            None => return Err(c.expected(&format!("'>' to close {word}<..>"))),
            Some(Token::Lt) => depth += 1,
            Some(Token::Gt) => depth -= 1,
            Some(Token::ShiftRight) => depth = depth.saturating_sub(2),
            Some(Token::ShiftLeft) => depth += 2,
            _ => {}
        }
    }
    Ok(())
}

fn source_decl(
    st: &StatementTokens,
    head: CreateHead,
    columns: Vec<ColumnDecl>,
    mut props: Properties,
) -> Result<SourceDecl> {
    if head.or_replace {
        return Err(SqlError::span(
            head.name.span,
            "OR REPLACE applies to CREATE .. AS SELECT; drop and re-create a declared stream or table",
        ));
    }
    let Some((topic, _)) = props.string(&["KAFKA_TOPIC", "TOPIC"])? else {
        return Err(SqlError::at(
            st.end,
            format!(
                "CREATE {} needs WITH (KAFKA_TOPIC = 'topic') (or AS SELECT)",
                head.kind.to_string().to_uppercase()
            ),
        ));
    };
    let cluster = props.string(&["CLUSTER"])?.map(|(cluster, _)| cluster);
    value_format(&mut props)?;
    if let Some((f, span)) = props.string(&["KEY_FORMAT"])? {
        if !f.eq_ignore_ascii_case("KAFKA") {
            return Err(SqlError::span(
                span,
                "KEY_FORMAT must be 'KAFKA': keys are read as UTF-8 strings",
            ));
        }
    }
    if head.kind == ObjectKind::Table && !columns.is_empty() && !columns.iter().any(|c| c.key) {
        return Err(SqlError::span(
            head.name.span,
            format!(
                "table '{}' needs a PRIMARY KEY column (the record key)",
                head.name.value
            ),
        ));
    }
    let timestamp = match props.string(&["TIMESTAMP"])? {
        None => None,
        Some((ts, span)) if columns.is_empty() => {
            let _ = span;
            Some(ts)
        }
        Some((ts, span)) => {
            let col = columns
                .iter()
                .find(|c| c.name == ts)
                .or_else(|| columns.iter().find(|c| c.name.eq_ignore_ascii_case(&ts)));
            match col {
                Some(c) if c.key => {
                    return Err(SqlError::span(
                        span,
                        format!(
                            "TIMESTAMP column '{ts}' is the key column; it must be a value column"
                        ),
                    ))
                }
                Some(c) => Some(c.name.clone()),
                None => {
                    return Err(SqlError::span(
                        span,
                        format!("TIMESTAMP names unknown column '{ts}'"),
                    ))
                }
            }
        }
    };
    let decl = SourceDecl {
        name: head.name.normalized(),
        kind: head.kind,
        columns,
        topic,
        cluster,
        value_format: defaults::VALUE_FORMAT.to_string(),
        timestamp,
        watermark_delay_ms: props
            .duration(&["WATERMARK_DELAY"])?
            .unwrap_or(defaults::WATERMARK_DELAY_MS),
        idle_timeout_ms: positive_ms(&mut props, "IDLE_TIMEOUT")?
            .unwrap_or(defaults::IDLE_TIMEOUT_MS),
        partitions: props.positive_u32(&["PARTITIONS"])?,
        sql: st.text.clone(),
    };
    props.positive_u32(&["REPLICAS"])?;
    props.finish(
        &format!("CREATE {}", head.kind.to_string().to_uppercase()),
        SOURCE_PROPERTIES,
    )?;
    Ok(decl)
}

fn value_format(props: &mut Properties) -> Result<()> {
    match props.string(&["VALUE_FORMAT"])? {
        Some((f, span)) if !f.eq_ignore_ascii_case(defaults::VALUE_FORMAT) => Err(SqlError::span(
            span,
            format!("VALUE_FORMAT '{f}' is not supported; only 'JSON'"),
        )),
        _ => Ok(()),
    }
}

fn positive_ms(props: &mut Properties, name: &str) -> Result<Option<i64>> {
    let span = props.peek_span(name);
    match props.duration(&[name])? {
        Some(0) => Err(SqlError::span(
            span.unwrap_or_else(sqlparser::tokenizer::Span::empty),
            format!("{name} must be positive"),
        )),
        other => Ok(other),
    }
}

/// A parsed `CREATE .. AS SELECT`: the typed statement and its query.
pub(crate) struct ParsedCreateAs {
    /// The query (window and emit clauses taken out); with a subquery or
    /// CTE, the outer query reading it by name.
    pub query: Box<Query>,
    /// The ksqlDB clauses.
    pub clauses: QueryTokens,
    /// `DEDUP_BY` and where its value is.
    pub dedup_span: Option<sqlparser::tokenizer::Span>,
    /// The subquery in `FROM` or the CTE, if any.
    pub inner: Option<InnerQuery>,
}

/// The inner query of a query over another query's rows.
#[derive(Debug)]
pub(crate) struct InnerQuery {
    /// The name the outer query reads it by.
    pub name: Name,
    /// The query (its window and emit clauses taken out).
    pub query: Box<Query>,
    /// Its ksqlDB clauses.
    pub clauses: QueryTokens,
    /// Where it is.
    pub span: sqlparser::tokenizer::Span,
}

/// Parses `CREATE [OR REPLACE] STREAM|TABLE name [WITH (..)] AS SELECT ..`.
pub(crate) fn parse_create_as(st: &StatementTokens) -> Result<(CreateAs, ParsedCreateAs)> {
    let mut c = Cursor::new(&st.tokens, st.end);
    let head = create_head(&mut c)?;
    let mut props = Properties::default();
    let mut expected = "'(' and columns, WITH or AS";
    if c.eat_kw("WITH") {
        props = Properties::parse(&mut c)?;
        expected = "AS SELECT or end of statement after the WITH list";
    }
    c.expect_kw("AS", expected)?;
    if !c.is_kw("SELECT") && !c.is_kw("WITH") {
        return Err(c.expected("SELECT after AS"));
    }
    let (outer, inner) = subquery::cut(c.rest(), st.end)?;
    let clauses = extract_query_clauses(&outer, st.end)?;
    let query = parse_sql_query(clauses.tokens.clone(), st.end)?;
    let parts = QueryParts::of(&query, st.end)?;
    if let Some(limit) = parts.limit {
        return Err(SqlError::span(
            limit,
            "LIMIT is only allowed in pull queries",
        ));
    }
    let inner = match inner {
        Some(sub) => {
            let clauses = extract_query_clauses(&sub.tokens, st.end)?;
            let query = parse_sql_query(clauses.tokens.clone(), st.end)?;
            Some(InnerQuery {
                name: sub.name,
                query,
                clauses,
                span: sub.span,
            })
        }
        None => None,
    };
    // The sources read: the inner query's, with a subquery.
    let read = match &inner {
        Some(i) => QueryParts::of(&i.query, st.end)?,
        None => parts,
    };
    if let Some(limit) = read.limit {
        return Err(SqlError::span(
            limit,
            "LIMIT is only allowed in pull queries",
        ));
    }
    let mut sources = vec![read.from.name.normalized()];
    sources.extend(read.joins.iter().map(|j| j.table.name.normalized()));
    let (stmt, dedup_span) = create_as_decl(st, head, props, sources)?;
    Ok((
        stmt,
        ParsedCreateAs {
            query,
            clauses,
            dedup_span,
            inner,
        },
    ))
}

fn create_as_decl(
    st: &StatementTokens,
    head: CreateHead,
    mut props: Properties,
    sources: Vec<String>,
) -> Result<(CreateAs, Option<sqlparser::tokenizer::Span>)> {
    let topic = props.string(&["KAFKA_TOPIC", "TOPIC"])?;
    let partitions = props.positive_u32(&["PARTITIONS"])?;
    if head.kind == ObjectKind::Table {
        if let Some((_, span)) = &topic {
            return Err(SqlError::span(
                *span,
                "CREATE TABLE .. AS feeds a view, not a topic; KAFKA_TOPIC applies to CREATE STREAM .. AS",
            ));
        }
    }
    value_format(&mut props)?;
    props.positive_u32(&["REPLICAS"])?;
    let late_topic = props.string(&["LATE_TOPIC"])?.map(|(t, _)| t);
    let dedup_by = props.string(&["DEDUP_BY"])?;
    let ttl_span = props.peek_span("DEDUP_TTL");
    let dedup_ttl = positive_ms(&mut props, "DEDUP_TTL")?;
    let dedup = match (dedup_by, dedup_ttl) {
        (Some((by, span)), ttl) => Some((
            DedupDecl {
                by,
                ttl_ms: ttl.unwrap_or(defaults::DEDUP_TTL_MS),
            },
            span,
        )),
        (None, Some(_)) => {
            return Err(SqlError::span(
                ttl_span.unwrap_or_else(sqlparser::tokenizer::Span::empty),
                "DEDUP_TTL needs DEDUP_BY = 'id column'",
            ))
        }
        (None, None) => None,
    };
    let watermark_delay_ms = props.duration(&["WATERMARK_DELAY"])?;
    let idle_timeout_ms = positive_ms(&mut props, "IDLE_TIMEOUT")?;
    let max_future_ms = props.duration(&["MAX_FUTURE"])?;
    let cluster = match props.string(&["CLUSTER"])? {
        Some((_, span)) if head.kind == ObjectKind::Table => {
            return Err(SqlError::span(
                span,
                "CLUSTER applies to CREATE STREAM .. AS (where its output topic lives); a table's rows live in Kappa",
            ))
        }
        c => c.map(|(c, _)| c),
    };
    let compression = match props.string(&["COMPRESSION"])? {
        None => None,
        Some((_, span)) if head.kind == ObjectKind::Table => {
            return Err(SqlError::span(
                span,
                "COMPRESSION applies to CREATE STREAM .. AS (how its output topic is stored); a table's rows live in Kappa",
            ))
        }
        Some((_, span)) if cluster.is_some() => {
            return Err(SqlError::span(
                span,
                "COMPRESSION applies to an output topic on the built-in log; a CLUSTER's topic is stored as its cluster stores it",
            ))
        }
        Some((codec, span)) => Some(
            codec
                .parse::<kappa_log::Compression>()
                .map_err(|e| SqlError::span(span, format!("COMPRESSION: {e}")))?,
        ),
    };
    let join_history_ms = props.duration(&["JOIN_HISTORY"])?;
    let keep_versions = props.whole_in(&["KEEP_VERSIONS"], 0, limits::MAX_KEEP_VERSIONS)?;
    let version_grace_ms = props.duration(&["VERSION_GRACE"])?;
    let parallelism = props.whole_in(&["PARALLELISM"], 1, limits::MAX_PARALLELISM)?;
    let swap_manual = match props.string(&["SWAP"])? {
        None => false,
        Some((mode, span)) => match mode.to_ascii_uppercase().as_str() {
            "AUTO" => false,
            "MANUAL" if head.kind == ObjectKind::Table => true,
            "MANUAL" => {
                return Err(SqlError::span(
                    span,
                    "SWAP='MANUAL' applies to CREATE OR REPLACE TABLE: a stream's new version takes over at once",
                ))
            }
            _ => {
                return Err(SqlError::span(
                    span,
                    format!("SWAP must be 'AUTO' or 'MANUAL', got {mode:?}"),
                ))
            }
        },
    };
    props.finish(
        &format!("CREATE {} .. AS", head.kind.to_string().to_uppercase()),
        CREATE_AS_PROPERTIES,
    )?;
    let dedup_span = dedup.as_ref().map(|(_, s)| *s);
    Ok((
        types::CreateAs {
            name: head.name.normalized(),
            kind: head.kind,
            or_replace: head.or_replace,
            sources,
            topic: topic.map(|(t, _)| t),
            cluster,
            partitions,
            compression,
            late_topic,
            dedup: dedup.map(|(d, _)| d),
            watermark_delay_ms,
            idle_timeout_ms,
            max_future_ms,
            swap_manual,
            join_history_ms,
            keep_versions,
            version_grace_ms,
            parallelism,
            sql: st.text.clone(),
            line: st.start.line,
            column: st.start.column,
        },
        dedup_span,
    ))
}

/// Parses a query with `sqlparser` from tokens; the tokens must all be
/// consumed.
pub(crate) fn parse_sql_query(tokens: Vec<TokenWithSpan>, end: Location) -> Result<Box<Query>> {
    limits::check_nesting(&tokens)?;
    let mut p = Parser::new(&DIALECT)
        .with_recursion_limit(limits::PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens);
    let query = p.parse_query().map_err(|e| parser_error(e, &p, end))?;
    let next = p.peek_token();
    if next.token != Token::EOF {
        let hint = if lex::is_kw(Some(&next), "PARTITION") {
            "PARTITION BY is not supported".to_string()
        } else {
            format!(
                "expected end of statement, found {}",
                lex::describe(Some(&next))
            )
        };
        return Err(SqlError::span(next.span, hint));
    }
    Ok(query)
}

/// Parses one expression from text (e.g. a `DEDUP_BY` value).
pub(crate) fn parse_sql_expr(text: &str) -> Result<sqlparser::ast::Expr> {
    let st = lex::split(text)?;
    let [st] = st.as_slice() else {
        return Err(SqlError::new("expected one expression", 1, 1));
    };
    limits::check_nesting(&st.tokens)?;
    let mut p = Parser::new(&DIALECT)
        .with_recursion_limit(limits::PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(st.tokens.clone());
    let expr = p.parse_expr().map_err(|e| parser_error(e, &p, st.end))?;
    limits::check_exprs([&expr], st.start)?;
    let next = p.peek_token();
    if next.token != Token::EOF {
        return Err(SqlError::span(
            next.span,
            format!(
                "expected end of expression, found {}",
                lex::describe(Some(&next))
            ),
        ));
    }
    Ok(expr)
}

/// A `sqlparser` error as a [`SqlError`]: its "at Line: L, Column: C" suffix
/// becomes the position (else the parser's current token).
fn parser_error(e: ParserError, p: &Parser<'_>, end: Location) -> SqlError {
    let here = {
        let t = p.peek_token();
        if t.span.start.line == 0 {
            end
        } else {
            t.span.start
        }
    };
    let text = match e {
        ParserError::RecursionLimitExceeded => return limits::nested_too_deeply(here),
        ParserError::TokenizerError(s) | ParserError::ParserError(s) => s,
    };
    let (message, at) = match text.rsplit_once(" at Line: ") {
        Some((msg, pos)) => {
            let mut it = pos.split(", Column: ");
            let line = it.next().and_then(|l| l.trim().parse::<u64>().ok());
            let column = it.next().and_then(|c| c.trim().parse::<u64>().ok());
            match (line, column) {
                (Some(line), Some(column)) if line > 0 => {
                    (msg.to_string(), Location::new(line, column))
                }
                _ => (msg.to_string(), here),
            }
        }
        None => (text, here),
    };
    let at = if at.line == 0 { end } else { at };
    let message = lower_first(&message)
        .replacen("expected: ", "expected ", 1)
        .replace(", found: EOF", ", found end of statement")
        .replace(", found: ", ", found ");
    SqlError::at(at, message)
}
