//! The catalog relations of one query, built from Kappa's catalog as the
//! principal sees it: each view a query defines (a table `SHOW TABLES`
//! lists and a pull query reads) is an ordinary table (`relkind` `r`) in
//! schema `public`, with its output columns and their PostgreSQL types;
//! the system relations of [`super::schema`] describe themselves.
//!
//! Oids: a view's is [`FIRST_VIEW_OID`] plus its index among the visible
//! views in name order, so the several queries of one `\d name` agree
//! while nothing is created or dropped between them.

use super::schema::{
    self, builtin_type, type_oid, BuiltinType, SystemRelation, C_COLLATION, DATABASE,
    DEFAULT_COLLATION, FIRST_VIEW_OID, HEAP_AM_OID, INFORMATION_SCHEMA_OID, OWNER, OWNER_OID,
    PG_CATALOG_OID, PUBLIC_OID, SYSTEM, TYPES,
};
use super::value::{Ty, Value};
use crate::auth::Principal;
use crate::dto::statements::SqlType;
use crate::AppState;

/// A column of one of Kappa's views: its name and PostgreSQL type.
#[derive(Debug, Clone)]
pub struct ViewColumn {
    /// Its name.
    pub name: String,
    /// Its type's oid.
    pub type_oid: i64,
    /// Its type modifier (`numeric(p,s)`), -1 when none.
    pub typmod: i64,
}

impl ViewColumn {
    /// A column of SQL type `t` (`None`: untyped, `text`), mapped as rows
    /// are (`super::super::answer`): `BOOLEAN` → `bool`, `INT`/`BIGINT`
    /// → `int8`, `DOUBLE` → `float8`, `DECIMAL(p,s)` → `numeric(p,s)`,
    /// `TIMESTAMP` → `timestamptz`, anything else → `text`.
    pub fn of(name: String, t: Option<&SqlType>) -> ViewColumn {
        let (type_oid, typmod) = match t {
            Some(SqlType::Boolean) => (16, -1),
            Some(SqlType::Integer | SqlType::BigInt) => (20, -1),
            Some(SqlType::Double) => (701, -1),
            Some(SqlType::Decimal { precision, scale }) => (
                1700,
                ((i64::from(*precision) << 16) | i64::from(*scale)) + 4,
            ),
            Some(SqlType::Timestamp) => (1184, -1),
            Some(SqlType::Varchar) | Some(SqlType::Json) | None => (25, -1),
        };
        ViewColumn {
            name,
            type_oid,
            typmod,
        }
    }
}

/// One of Kappa's views as the catalogs show it.
#[derive(Debug, Clone)]
pub struct KappaView {
    /// Its name.
    pub name: String,
    /// Its output columns in order.
    pub columns: Vec<ViewColumn>,
}

/// A relation of `pg_class`: a system relation or one of Kappa's views.
#[derive(Debug, Clone)]
pub struct RelationInfo {
    /// Its oid.
    pub oid: i64,
    /// Its schema's oid.
    pub schema_oid: i64,
    /// Its schema's name.
    pub schema: &'static str,
    /// Its name.
    pub name: String,
    /// `r` (table) or `v` (view).
    pub kind: char,
    /// Its columns: name, type oid, type modifier.
    pub columns: Vec<(String, i64, i64)>,
}

/// The rows of a relation, under typed columns.
#[derive(Debug, Clone)]
pub struct Table {
    /// Column names and types.
    pub columns: Vec<(String, Ty)>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
}

/// Everything one catalog query may read.
#[derive(Debug, Clone)]
pub struct Catalog {
    relations: Vec<RelationInfo>,
}

/// The schemas: oid and name.
pub const SCHEMAS: [(i64, &str); 3] = [
    (PG_CATALOG_OID, "pg_catalog"),
    (PUBLIC_OID, "public"),
    (INFORMATION_SCHEMA_OID, "information_schema"),
];

/// The settings `pg_settings` and `current_setting` answer.
pub const SETTINGS: &[(&str, &str)] = &[
    ("DateStyle", "ISO, MDY"),
    ("TimeZone", "UTC"),
    ("client_encoding", "UTF8"),
    ("default_transaction_isolation", "read committed"),
    ("integer_datetimes", "on"),
    ("max_identifier_length", "63"),
    ("max_index_keys", "32"),
    ("search_path", "public"),
    ("server_encoding", "UTF8"),
    ("server_version", super::super::session::SERVER_VERSION),
    ("server_version_num", "150000"),
    ("standard_conforming_strings", "on"),
    ("transaction_isolation", "read committed"),
];

impl Catalog {
    /// The catalog of `views` (in any order) and the system relations.
    pub fn new(mut views: Vec<KappaView>) -> Catalog {
        views.sort_by(|a, b| a.name.cmp(&b.name));
        let mut relations: Vec<RelationInfo> = SYSTEM.iter().map(system_info).collect();
        for (i, view) in views.into_iter().enumerate() {
            relations.push(RelationInfo {
                oid: FIRST_VIEW_OID + i as i64,
                schema_oid: PUBLIC_OID,
                schema: "public",
                name: view.name,
                kind: 'r',
                columns: view
                    .columns
                    .into_iter()
                    .map(|c| (c.name, c.type_oid, c.typmod))
                    .collect(),
            });
        }
        Catalog { relations }
    }

    /// The catalog `principal` sees of `app`: the views `SHOW TABLES`
    /// lists to it (tables a query defines, which pull queries read).
    pub fn of(app: &AppState, principal: &Principal) -> Catalog {
        let catalog = app.views.catalog();
        let views = catalog
            .views
            .values()
            .filter(|v| v.is_table() && principal.may_see_view(&v.name))
            .map(|v| KappaView {
                name: v.name.clone(),
                columns: crate::statements::view_columns(&v.served.plan)
                    .into_iter()
                    .map(|c| ViewColumn::of(c.name, c.sql_type.as_ref()))
                    .collect(),
            })
            .collect();
        Catalog::new(views)
    }

    /// The relation of oid `oid`.
    pub fn relation_by_oid(&self, oid: i64) -> Option<&RelationInfo> {
        self.relations.iter().find(|r| r.oid == oid)
    }

    /// The relation `name` in `schema` (unqualified: `pg_catalog`, then
    /// `public`, as the search path finds it).
    pub fn relation_by_name(&self, schema: Option<&str>, name: &str) -> Option<&RelationInfo> {
        let find = |s: &str| {
            self.relations
                .iter()
                .find(|r| r.schema == s && r.name == name)
        };
        match schema {
            Some(s) => find(s),
            None => find("pg_catalog").or_else(|| find("public")),
        }
    }

    /// The rows of system relation `name` in `schema` (unqualified:
    /// `pg_catalog`), or `None` if there is no such system relation.
    pub fn table(&self, schema: Option<&str>, name: &str) -> Option<Table> {
        let schema = schema.unwrap_or("pg_catalog");
        let system = SYSTEM
            .iter()
            .find(|r| r.schema == schema && r.name == name)?;
        Some(Table {
            columns: system
                .columns
                .iter()
                .map(|(n, t)| (n.to_string(), *t))
                .collect(),
            rows: self.rows(system),
        })
    }

    fn views(&self) -> impl Iterator<Item = &RelationInfo> {
        self.relations.iter().filter(|r| r.schema == "public")
    }

    fn rows(&self, system: &SystemRelation) -> Vec<Vec<Value>> {
        match (system.schema, system.name) {
            ("pg_catalog", "pg_namespace") => SCHEMAS
                .iter()
                .map(|(oid, name)| vec![Int(*oid), text(name), Int(OWNER_OID), Null])
                .collect(),
            ("pg_catalog", "pg_class") => self.relations.iter().map(pg_class_row).collect(),
            ("pg_catalog", "pg_attribute") => self.attributes(),
            ("pg_catalog", "pg_type") => TYPES.iter().map(pg_type_row).collect(),
            ("pg_catalog", "pg_database") => vec![database_row()],
            ("pg_catalog", "pg_roles") => vec![vec![
                text(OWNER),
                Bool(true),
                Bool(true),
                Bool(true),
                Bool(true),
                Bool(true),
                Bool(false),
                Int(-1),
                text("********"),
                Null,
                Bool(true),
                Null,
                Int(OWNER_OID),
            ]],
            ("pg_catalog", "pg_user") => vec![vec![
                text(OWNER),
                Int(OWNER_OID),
                Bool(true),
                Bool(true),
                Bool(false),
                Bool(true),
                text("********"),
                Null,
                Null,
            ]],
            ("pg_catalog", "pg_am") => vec![
                vec![
                    Int(HEAP_AM_OID),
                    text("heap"),
                    text("heap_tableam_handler"),
                    text("t"),
                ],
                vec![Int(403), text("btree"), text("bthandler"), text("i")],
            ],
            ("pg_catalog", "pg_tablespace") => {
                vec![vec![
                    Int(1663),
                    text("pg_default"),
                    Int(OWNER_OID),
                    Null,
                    Null,
                ]]
            }
            ("pg_catalog", "pg_collation") => vec![
                collation_row(DEFAULT_COLLATION, "default", "d", None),
                collation_row(C_COLLATION, "C", "c", Some("C")),
                collation_row(951, "POSIX", "c", Some("POSIX")),
            ],
            ("pg_catalog", "pg_settings") => {
                SETTINGS.iter().map(|(n, v)| setting_row(n, v)).collect()
            }
            ("pg_catalog", "pg_tables") => self
                .relations
                .iter()
                .filter(|r| r.kind == 'r')
                .map(|r| {
                    vec![
                        text(r.schema),
                        text(&r.name),
                        text(OWNER),
                        Null,
                        Bool(false),
                        Bool(false),
                        Bool(false),
                        Bool(false),
                    ]
                })
                .collect(),
            ("pg_catalog", "pg_views") => self
                .relations
                .iter()
                .filter(|r| r.kind == 'v')
                .map(|r| vec![text(r.schema), text(&r.name), text(OWNER), Null])
                .collect(),
            ("information_schema", "schemata") => SCHEMAS
                .iter()
                .map(|(_, name)| {
                    vec![
                        text(DATABASE),
                        text(name),
                        text(OWNER),
                        Null,
                        Null,
                        Null,
                        Null,
                    ]
                })
                .collect(),
            ("information_schema", "tables") => self.relations.iter().map(is_table_row).collect(),
            ("information_schema", "columns") => self.is_columns(),
            ("information_schema", "views") => self
                .relations
                .iter()
                .filter(|r| r.kind == 'v')
                .map(|r| {
                    let no = || text("NO");
                    vec![
                        text(DATABASE),
                        text(r.schema),
                        text(&r.name),
                        Null,
                        text("NONE"),
                        no(),
                        no(),
                        no(),
                        no(),
                        no(),
                    ]
                })
                .collect(),
            ("information_schema", "table_privileges" | "role_table_grants") => self
                .views()
                .map(|r| {
                    vec![
                        text(OWNER),
                        text(OWNER),
                        text(DATABASE),
                        text(r.schema),
                        text(&r.name),
                        text("SELECT"),
                        text("NO"),
                        text("YES"),
                    ]
                })
                .collect(),
            // Constraints, indexes, policies, triggers, rules, functions,
            // extensions, descriptions, ..: Kappa has none.
            _ => Vec::new(),
        }
    }

    fn attributes(&self) -> Vec<Vec<Value>> {
        let mut rows = Vec::new();
        for r in &self.relations {
            for (i, (name, type_oid, typmod)) in r.columns.iter().enumerate() {
                let t = builtin_type(*type_oid);
                let len = t.map_or(-1, |t| t.len);
                rows.push(vec![
                    Int(r.oid),
                    text(name),
                    Int(*type_oid),
                    Int(-1),
                    Int(len),
                    Int(i as i64 + 1),
                    Int(i64::from(t.is_some_and(|t| t.category == 'A'))),
                    Int(-1),
                    Int(*typmod),
                    Bool(matches!(len, 1 | 2 | 4 | 8)),
                    text(if len == 8 { "d" } else { "i" }),
                    text(if len == -1 { "x" } else { "p" }),
                    text(""),
                    Bool(false),
                    Bool(false),
                    Bool(false),
                    text(""),
                    text(""),
                    Bool(false),
                    Bool(true),
                    Int(0),
                    Int(t.map_or(0, |t| t.collation)),
                    Null,
                    Null,
                    Null,
                    Null,
                ]);
            }
        }
        rows
    }

    fn is_columns(&self) -> Vec<Vec<Value>> {
        let mut rows = Vec::new();
        for r in &self.relations {
            for (i, (name, type_oid, typmod)) in r.columns.iter().enumerate() {
                let t = builtin_type(*type_oid);
                let (precision, radix, scale) = numeric_shape(*type_oid, *typmod);
                let data_type = match t {
                    Some(t) if t.category == 'A' => "ARRAY".to_string(),
                    Some(t) => t.formatted.to_string(),
                    None => "USER-DEFINED".to_string(),
                };
                let textual = t.is_some_and(|t| t.collation == DEFAULT_COLLATION);
                let mut row = vec![
                    text(DATABASE),
                    text(r.schema),
                    text(&r.name),
                    text(name),
                    Int(i as i64 + 1),
                    Null,
                    text("YES"),
                    text(&data_type),
                    Null,
                    if textual { Int(1_073_741_824) } else { Null },
                    precision,
                    radix,
                    scale,
                    if *type_oid == 1184 || *type_oid == 1114 {
                        Int(6)
                    } else {
                        Null
                    },
                ];
                row.extend([
                    Null, Null, Null, Null, Null, Null, Null, Null, Null, Null, Null,
                ]);
                row.extend([
                    text(DATABASE),
                    text("pg_catalog"),
                    text(t.map_or("unknown", |t| t.name)),
                    Null,
                    Null,
                    Null,
                    Null,
                    text(&(i + 1).to_string()),
                    text("NO"),
                    text("NO"),
                    Null,
                    Null,
                    Null,
                    Null,
                    Null,
                    text("NO"),
                    text("NEVER"),
                    Null,
                    text("NO"),
                ]);
                rows.push(row);
            }
        }
        rows
    }
}

use Value::{Bool, Int, Null};

fn text(s: &str) -> Value {
    Value::text(s)
}

fn system_info(r: &SystemRelation) -> RelationInfo {
    RelationInfo {
        oid: r.oid,
        schema_oid: if r.schema == "pg_catalog" {
            PG_CATALOG_OID
        } else {
            INFORMATION_SCHEMA_OID
        },
        schema: r.schema,
        name: r.name.to_string(),
        kind: r.kind,
        columns: r
            .columns
            .iter()
            .map(|(n, t)| (n.to_string(), type_oid(*t), -1))
            .collect(),
    }
}

fn pg_class_row(r: &RelationInfo) -> Vec<Value> {
    let f = || Bool(false);
    vec![
        Int(r.oid),
        text(&r.name),
        Int(r.schema_oid),
        Int(0),
        Int(0),
        Int(OWNER_OID),
        Int(if r.kind == 'r' { HEAP_AM_OID } else { 0 }),
        Int(0),
        Int(0),
        Int(0),
        Value::Float(-1.0),
        Int(0),
        Int(0),
        f(),
        f(),
        text("p"),
        text(&r.kind.to_string()),
        Int(r.columns.len() as i64),
        Int(0),
        Bool(r.kind == 'v'),
        f(),
        f(),
        f(),
        f(),
        Bool(true),
        text(if r.kind == 'v' { "n" } else { "d" }),
        f(),
        Int(0),
        text("0"),
        text("0"),
        Null,
        Null,
        Null,
    ]
}

fn pg_type_row(t: &BuiltinType) -> Vec<Value> {
    let proc = |suffix: &str| text(&format!("{}{suffix}", t.name.trim_start_matches('_')));
    let array = t.category == 'A';
    vec![
        Int(t.oid),
        text(t.name),
        Int(PG_CATALOG_OID),
        Int(OWNER_OID),
        Int(t.len),
        Bool(matches!(t.len, 1 | 2 | 4 | 8)),
        text("b"),
        text(&t.category.to_string()),
        Bool(false),
        Bool(true),
        text(","),
        Int(0),
        text(if array {
            "array_subscript_handler"
        } else {
            "-"
        }),
        Int(t.elem),
        Int(t.array),
        if array { text("array_in") } else { proc("in") },
        if array {
            text("array_out")
        } else {
            proc("out")
        },
        if array {
            text("array_recv")
        } else {
            proc("recv")
        },
        if array {
            text("array_send")
        } else {
            proc("send")
        },
        text("-"),
        text("-"),
        text("-"),
        text(if t.len == 8 { "d" } else { "i" }),
        text(if t.len == -1 { "x" } else { "p" }),
        Bool(false),
        Int(0),
        Int(-1),
        Int(0),
        Int(t.collation),
        Null,
        Null,
        Null,
    ]
}

fn database_row() -> Vec<Value> {
    vec![
        Int(5),
        text(DATABASE),
        Int(OWNER_OID),
        Int(6),
        text("c"),
        Bool(false),
        Bool(true),
        Int(-1),
        text("0"),
        text("0"),
        Int(1663),
        text("C.UTF-8"),
        text("C.UTF-8"),
        Null,
        Null,
        Null,
    ]
}

fn collation_row(oid: i64, name: &str, provider: &str, locale: Option<&str>) -> Vec<Value> {
    let locale = || locale.map_or(Null, text);
    vec![
        Int(oid),
        text(name),
        Int(PG_CATALOG_OID),
        Int(OWNER_OID),
        text(provider),
        Bool(true),
        Int(-1),
        locale(),
        locale(),
        Null,
        Null,
    ]
}

fn setting_row(name: &str, value: &str) -> Vec<Value> {
    let mut row = vec![text(name), text(value), Null, text("Kappa"), Null, Null];
    row.extend([text("internal"), text("string"), text("default")]);
    row.extend([
        Null,
        Null,
        Null,
        text(value),
        text(value),
        Null,
        Null,
        Bool(false),
    ]);
    row
}

fn is_table_row(r: &RelationInfo) -> Vec<Value> {
    let kind = if r.kind == 'r' { "BASE TABLE" } else { "VIEW" };
    vec![
        text(DATABASE),
        text(r.schema),
        text(&r.name),
        text(kind),
        Null,
        Null,
        Null,
        Null,
        Null,
        text("NO"),
        text("NO"),
        Null,
    ]
}

/// `numeric_precision`, `numeric_precision_radix` and `numeric_scale` of
/// a column of type `oid` with modifier `typmod`.
fn numeric_shape(oid: i64, typmod: i64) -> (Value, Value, Value) {
    match oid {
        21 => (Int(16), Int(2), Int(0)),
        23 => (Int(32), Int(2), Int(0)),
        20 => (Int(64), Int(2), Int(0)),
        700 => (Int(24), Int(2), Null),
        701 => (Int(53), Int(2), Null),
        1700 if typmod >= 4 => (Int((typmod - 4) >> 16), Int(10), Int((typmod - 4) & 0xffff)),
        1700 => (Null, Int(10), Null),
        _ => (Null, Null, Null),
    }
}

/// The name of the schema of oid `oid`.
pub fn schema_name(oid: i64) -> Option<&'static str> {
    SCHEMAS.iter().find(|(o, _)| *o == oid).map(|(_, n)| *n)
}

/// Whether `schema` is one the search path reaches (`pg_catalog`,
/// `public`): its relations are visible unqualified.
pub fn on_search_path(schema: &str) -> bool {
    schema == "pg_catalog" || schema == "public"
}

/// The built-in type called `name` (its `typname` or its SQL name).
pub fn type_by_name(name: &str) -> Option<&'static BuiltinType> {
    let name = name.trim_start_matches("pg_catalog.");
    schema::TYPES
        .iter()
        .find(|t| t.name == name || t.formatted == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Catalog {
        Catalog::new(vec![
            KappaView {
                name: "zeta".into(),
                columns: vec![ViewColumn::of("z".into(), None)],
            },
            KappaView {
                name: "purchase_stats".into(),
                columns: vec![
                    ViewColumn::of("user_id".into(), Some(&SqlType::Varchar)),
                    ViewColumn::of("purchase_count".into(), Some(&SqlType::BigInt)),
                ],
            },
        ])
    }

    #[test]
    fn views_are_public_tables_numbered_in_name_order() {
        let c = sample();
        let v = c.relation_by_name(None, "purchase_stats").unwrap();
        assert_eq!((v.oid, v.kind, v.schema), (FIRST_VIEW_OID, 'r', "public"));
        assert_eq!(
            c.relation_by_name(Some("public"), "zeta").unwrap().oid,
            FIRST_VIEW_OID + 1
        );
        let pg_class = c.table(None, "pg_class").unwrap();
        assert_eq!(pg_class.rows.len(), SYSTEM.len() + 2);
        assert!(c.table(None, "tables").is_none());
        assert!(c.table(Some("information_schema"), "tables").is_some());
    }

    #[test]
    fn every_row_has_its_relations_columns() {
        let c = sample();
        for r in SYSTEM {
            let t = c.table(Some(r.schema), r.name).unwrap();
            for row in &t.rows {
                assert_eq!(row.len(), t.columns.len(), "{}", r.name);
            }
        }
    }
}
