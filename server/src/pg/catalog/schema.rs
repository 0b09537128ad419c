//! The shape of the catalogs served: every system relation of
//! `pg_catalog` and `information_schema` a client may read, with its oid
//! and typed columns (PostgreSQL 15's names and types), and the built-in
//! types `pg_type` lists.
//!
//! A relation listed here answers every query; the ones naming objects
//! Kappa does not have (constraints, policies, triggers, ..) have no rows.

use super::value::Ty::{self, *};

/// The schema oid of `pg_catalog`.
pub const PG_CATALOG_OID: i64 = 11;
/// The schema oid of `public`, where Kappa's views are.
pub const PUBLIC_OID: i64 = 2200;
/// The schema oid of `information_schema`.
pub const INFORMATION_SCHEMA_OID: i64 = 13000;
/// The oid of the one role, `kappa`, that owns everything.
pub const OWNER_OID: i64 = 10;
/// The role every object belongs to and `current_user` names.
pub const OWNER: &str = "kappa";
/// The one database.
pub const DATABASE: &str = "kappa";
/// The oid of the first of Kappa's views; the others follow in name order.
pub const FIRST_VIEW_OID: i64 = 16384;
/// The oid of the `heap` access method (ordinary tables).
pub const HEAP_AM_OID: i64 = 2;
/// The collation oid of `default` (text columns).
pub const DEFAULT_COLLATION: i64 = 100;
/// The collation oid of `C` (`name` columns).
pub const C_COLLATION: i64 = 950;

/// A system relation: where it lives, its oid, kind and columns.
pub struct SystemRelation {
    /// `pg_catalog` or `information_schema`.
    pub schema: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its oid.
    pub oid: i64,
    /// `r` (table) or `v` (view), as `pg_class.relkind` says.
    pub kind: char,
    /// Its columns in order.
    pub columns: &'static [(&'static str, Ty)],
}

const fn rel(
    schema: &'static str,
    name: &'static str,
    oid: i64,
    kind: char,
    columns: &'static [(&'static str, Ty)],
) -> SystemRelation {
    SystemRelation {
        schema,
        name,
        oid,
        kind,
        columns,
    }
}

const PG: &str = "pg_catalog";
const IS: &str = "information_schema";

/// Every system relation served.
#[rustfmt::skip]
pub const SYSTEM: &[SystemRelation] = &[
    rel(PG, "pg_namespace", 2615, 'r', &[("oid", Oid), ("nspname", Name), ("nspowner", Oid), ("nspacl", TextArray)]),
    rel(PG, "pg_class", 1259, 'r', &[
        ("oid", Oid), ("relname", Name), ("relnamespace", Oid), ("reltype", Oid), ("reloftype", Oid),
        ("relowner", Oid), ("relam", Oid), ("relfilenode", Oid), ("reltablespace", Oid),
        ("relpages", Int4), ("reltuples", Float4), ("relallvisible", Int4), ("reltoastrelid", Oid),
        ("relhasindex", Bool), ("relisshared", Bool), ("relpersistence", Char), ("relkind", Char),
        ("relnatts", Int2), ("relchecks", Int2), ("relhasrules", Bool), ("relhastriggers", Bool),
        ("relhassubclass", Bool), ("relrowsecurity", Bool), ("relforcerowsecurity", Bool),
        ("relispopulated", Bool), ("relreplident", Char), ("relispartition", Bool), ("relrewrite", Oid),
        ("relfrozenxid", Text), ("relminmxid", Text), ("relacl", TextArray), ("reloptions", TextArray),
        ("relpartbound", Text),
    ]),
    rel(PG, "pg_attribute", 1249, 'r', &[
        ("attrelid", Oid), ("attname", Name), ("atttypid", Oid), ("attstattarget", Int4), ("attlen", Int2),
        ("attnum", Int2), ("attndims", Int4), ("attcacheoff", Int4), ("atttypmod", Int4), ("attbyval", Bool),
        ("attalign", Char), ("attstorage", Char), ("attcompression", Char), ("attnotnull", Bool),
        ("atthasdef", Bool), ("atthasmissing", Bool), ("attidentity", Char), ("attgenerated", Char),
        ("attisdropped", Bool), ("attislocal", Bool), ("attinhcount", Int4), ("attcollation", Oid),
        ("attacl", TextArray), ("attoptions", TextArray), ("attfdwoptions", TextArray), ("attmissingval", Text),
    ]),
    rel(PG, "pg_type", 1247, 'r', &[
        ("oid", Oid), ("typname", Name), ("typnamespace", Oid), ("typowner", Oid), ("typlen", Int2),
        ("typbyval", Bool), ("typtype", Char), ("typcategory", Char), ("typispreferred", Bool),
        ("typisdefined", Bool), ("typdelim", Char), ("typrelid", Oid), ("typsubscript", RegProc),
        ("typelem", Oid), ("typarray", Oid), ("typinput", RegProc), ("typoutput", RegProc),
        ("typreceive", RegProc), ("typsend", RegProc), ("typmodin", RegProc), ("typmodout", RegProc),
        ("typanalyze", RegProc), ("typalign", Char), ("typstorage", Char), ("typnotnull", Bool),
        ("typbasetype", Oid), ("typtypmod", Int4), ("typndims", Int4), ("typcollation", Oid),
        ("typdefaultbin", Text), ("typdefault", Text), ("typacl", TextArray),
    ]),
    rel(PG, "pg_database", 1262, 'r', &[
        ("oid", Oid), ("datname", Name), ("datdba", Oid), ("encoding", Int4), ("datlocprovider", Char),
        ("datistemplate", Bool), ("datallowconn", Bool), ("datconnlimit", Int4), ("datfrozenxid", Text),
        ("datminmxid", Text), ("dattablespace", Oid), ("datcollate", Text), ("datctype", Text),
        ("daticulocale", Text), ("datcollversion", Text), ("datacl", TextArray),
    ]),
    rel(PG, "pg_roles", 12001, 'v', &[
        ("rolname", Name), ("rolsuper", Bool), ("rolinherit", Bool), ("rolcreaterole", Bool),
        ("rolcreatedb", Bool), ("rolcanlogin", Bool), ("rolreplication", Bool), ("rolconnlimit", Int4),
        ("rolpassword", Text), ("rolvaliduntil", Text), ("rolbypassrls", Bool), ("rolconfig", TextArray),
        ("oid", Oid),
    ]),
    rel(PG, "pg_user", 12002, 'v', &[
        ("usename", Name), ("usesysid", Oid), ("usecreatedb", Bool), ("usesuper", Bool), ("userepl", Bool),
        ("usebypassrls", Bool), ("passwd", Text), ("valuntil", Text), ("useconfig", TextArray),
    ]),
    rel(PG, "pg_auth_members", 1261, 'r', &[
        ("oid", Oid), ("roleid", Oid), ("member", Oid), ("grantor", Oid), ("admin_option", Bool),
    ]),
    rel(PG, "pg_am", 2601, 'r', &[("oid", Oid), ("amname", Name), ("amhandler", RegProc), ("amtype", Char)]),
    rel(PG, "pg_tablespace", 1213, 'r', &[
        ("oid", Oid), ("spcname", Name), ("spcowner", Oid), ("spcacl", TextArray), ("spcoptions", TextArray),
    ]),
    rel(PG, "pg_collation", 3456, 'r', &[
        ("oid", Oid), ("collname", Name), ("collnamespace", Oid), ("collowner", Oid), ("collprovider", Char),
        ("collisdeterministic", Bool), ("collencoding", Int4), ("collcollate", Text), ("collctype", Text),
        ("colliculocale", Text), ("collversion", Text),
    ]),
    rel(PG, "pg_settings", 12003, 'v', &[
        ("name", Text), ("setting", Text), ("unit", Text), ("category", Text), ("short_desc", Text),
        ("extra_desc", Text), ("context", Text), ("vartype", Text), ("source", Text), ("min_val", Text),
        ("max_val", Text), ("enumvals", TextArray), ("boot_val", Text), ("reset_val", Text),
        ("sourcefile", Text), ("sourceline", Int4), ("pending_restart", Bool),
    ]),
    rel(PG, "pg_description", 2609, 'r', &[
        ("objoid", Oid), ("classoid", Oid), ("objsubid", Int4), ("description", Text),
    ]),
    rel(PG, "pg_attrdef", 2604, 'r', &[("oid", Oid), ("adrelid", Oid), ("adnum", Int2), ("adbin", Text)]),
    rel(PG, "pg_index", 2610, 'r', &[
        ("indexrelid", Oid), ("indrelid", Oid), ("indnatts", Int2), ("indnkeyatts", Int2),
        ("indisunique", Bool), ("indnullsnotdistinct", Bool), ("indisprimary", Bool),
        ("indisexclusion", Bool), ("indimmediate", Bool), ("indisclustered", Bool), ("indisvalid", Bool),
        ("indcheckxmin", Bool), ("indisready", Bool), ("indislive", Bool), ("indisreplident", Bool),
        ("indkey", Int2Array), ("indcollation", OidArray), ("indclass", OidArray),
        ("indoption", Int2Array), ("indexprs", Text), ("indpred", Text),
    ]),
    rel(PG, "pg_constraint", 2606, 'r', &[
        ("oid", Oid), ("conname", Name), ("connamespace", Oid), ("contype", Char), ("condeferrable", Bool),
        ("condeferred", Bool), ("convalidated", Bool), ("conrelid", Oid), ("contypid", Oid),
        ("conindid", Oid), ("conparentid", Oid), ("confrelid", Oid), ("confupdtype", Char),
        ("confdeltype", Char), ("confmatchtype", Char), ("conislocal", Bool), ("coninhcount", Int4),
        ("connoinherit", Bool), ("conkey", Int2Array), ("confkey", Int2Array), ("conpfeqop", OidArray),
        ("conppeqop", OidArray), ("conffeqop", OidArray), ("confdelsetcols", Int2Array),
        ("conexclop", OidArray), ("conbin", Text),
    ]),
    rel(PG, "pg_inherits", 2611, 'r', &[
        ("inhrelid", Oid), ("inhparent", Oid), ("inhseqno", Int4), ("inhdetachpending", Bool),
    ]),
    rel(PG, "pg_policy", 3256, 'r', &[
        ("oid", Oid), ("polname", Name), ("polrelid", Oid), ("polcmd", Char), ("polpermissive", Bool),
        ("polroles", OidArray), ("polqual", Text), ("polwithcheck", Text),
    ]),
    rel(PG, "pg_statistic_ext", 3381, 'r', &[
        ("oid", Oid), ("stxrelid", Oid), ("stxname", Name), ("stxnamespace", Oid), ("stxowner", Oid),
        ("stxstattarget", Int4), ("stxkeys", Int2Array), ("stxkind", TextArray), ("stxexprs", Text),
    ]),
    rel(PG, "pg_publication", 6104, 'r', &[
        ("oid", Oid), ("pubname", Name), ("pubowner", Oid), ("puballtables", Bool), ("pubinsert", Bool),
        ("pubupdate", Bool), ("pubdelete", Bool), ("pubtruncate", Bool), ("pubviaroot", Bool),
    ]),
    rel(PG, "pg_publication_rel", 6106, 'r', &[
        ("oid", Oid), ("prpubid", Oid), ("prrelid", Oid), ("prqual", Text), ("prattrs", Int2Array),
    ]),
    rel(PG, "pg_publication_namespace", 6237, 'r', &[("oid", Oid), ("pnpubid", Oid), ("pnnspid", Oid)]),
    rel(PG, "pg_trigger", 2620, 'r', &[
        ("oid", Oid), ("tgrelid", Oid), ("tgparentid", Oid), ("tgname", Name), ("tgfoid", Oid),
        ("tgtype", Int2), ("tgenabled", Char), ("tgisinternal", Bool), ("tgconstrrelid", Oid),
        ("tgconstrindid", Oid), ("tgconstraint", Oid), ("tgdeferrable", Bool), ("tginitdeferred", Bool),
        ("tgnargs", Int2), ("tgattr", Int2Array), ("tgargs", Text), ("tgqual", Text),
        ("tgoldtable", Name), ("tgnewtable", Name),
    ]),
    rel(PG, "pg_rewrite", 2618, 'r', &[
        ("oid", Oid), ("rulename", Name), ("ev_class", Oid), ("ev_type", Char), ("ev_enabled", Char),
        ("is_instead", Bool), ("ev_qual", Text), ("ev_action", Text),
    ]),
    rel(PG, "pg_proc", 1255, 'r', &[
        ("oid", Oid), ("proname", Name), ("pronamespace", Oid), ("proowner", Oid), ("prolang", Oid),
        ("procost", Float4), ("prorows", Float4), ("provariadic", Oid), ("prosupport", RegProc),
        ("prokind", Char), ("prosecdef", Bool), ("proleakproof", Bool), ("proisstrict", Bool),
        ("proretset", Bool), ("provolatile", Char), ("proparallel", Char), ("pronargs", Int2),
        ("pronargdefaults", Int2), ("prorettype", Oid), ("proargtypes", OidArray),
        ("proallargtypes", OidArray), ("proargmodes", TextArray), ("proargnames", TextArray),
        ("proargdefaults", Text), ("protrftypes", OidArray), ("prosrc", Text), ("probin", Text),
        ("prosqlbody", Text), ("proconfig", TextArray), ("proacl", TextArray),
    ]),
    rel(PG, "pg_extension", 3079, 'r', &[
        ("oid", Oid), ("extname", Name), ("extowner", Oid), ("extnamespace", Oid),
        ("extrelocatable", Bool), ("extversion", Text), ("extconfig", OidArray), ("extcondition", TextArray),
    ]),
    rel(PG, "pg_enum", 3501, 'r', &[
        ("oid", Oid), ("enumtypid", Oid), ("enumsortorder", Float4), ("enumlabel", Name),
    ]),
    rel(PG, "pg_sequence", 2224, 'r', &[
        ("seqrelid", Oid), ("seqtypid", Oid), ("seqstart", Int8), ("seqincrement", Int8), ("seqmax", Int8),
        ("seqmin", Int8), ("seqcache", Int8), ("seqcycle", Bool),
    ]),
    rel(PG, "pg_foreign_table", 3118, 'r', &[("ftrelid", Oid), ("ftserver", Oid), ("ftoptions", TextArray)]),
    rel(PG, "pg_partitioned_table", 3350, 'r', &[
        ("partrelid", Oid), ("partstrat", Char), ("partnatts", Int2), ("partdefid", Oid),
        ("partattrs", Int2Array), ("partclass", OidArray), ("partcollation", OidArray), ("partexprs", Text),
    ]),
    rel(PG, "pg_depend", 2608, 'r', &[
        ("classid", Oid), ("objid", Oid), ("objsubid", Int4), ("refclassid", Oid), ("refobjid", Oid),
        ("refobjsubid", Int4), ("deptype", Char),
    ]),
    rel(PG, "pg_tables", 12004, 'v', &[
        ("schemaname", Name), ("tablename", Name), ("tableowner", Name), ("tablespace", Name),
        ("hasindexes", Bool), ("hasrules", Bool), ("hastriggers", Bool), ("rowsecurity", Bool),
    ]),
    rel(PG, "pg_views", 12005, 'v', &[
        ("schemaname", Name), ("viewname", Name), ("viewowner", Name), ("definition", Text),
    ]),
    rel(PG, "pg_matviews", 12006, 'v', &[
        ("schemaname", Name), ("matviewname", Name), ("matviewowner", Name), ("tablespace", Name),
        ("hasindexes", Bool), ("ispopulated", Bool), ("definition", Text),
    ]),
    rel(PG, "pg_indexes", 12007, 'v', &[
        ("schemaname", Name), ("tablename", Name), ("indexname", Name), ("tablespace", Name),
        ("indexdef", Text),
    ]),
    rel(PG, "pg_stat_user_tables", 12008, 'v', &[
        ("relid", Oid), ("schemaname", Name), ("relname", Name), ("seq_scan", Int8), ("seq_tup_read", Int8),
        ("idx_scan", Int8), ("idx_tup_fetch", Int8), ("n_tup_ins", Int8), ("n_tup_upd", Int8),
        ("n_tup_del", Int8), ("n_tup_hot_upd", Int8), ("n_live_tup", Int8), ("n_dead_tup", Int8),
    ]),
    rel(IS, "schemata", 13001, 'v', &[
        ("catalog_name", Name), ("schema_name", Name), ("schema_owner", Name),
        ("default_character_set_catalog", Name), ("default_character_set_schema", Name),
        ("default_character_set_name", Name), ("sql_path", Text),
    ]),
    rel(IS, "tables", 13002, 'v', &[
        ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("table_type", Text),
        ("self_referencing_column_name", Name), ("reference_generation", Text),
        ("user_defined_type_catalog", Name), ("user_defined_type_schema", Name),
        ("user_defined_type_name", Name), ("is_insertable_into", Text), ("is_typed", Text),
        ("commit_action", Text),
    ]),
    rel(IS, "columns", 13003, 'v', &[
        ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("column_name", Name),
        ("ordinal_position", Int4), ("column_default", Text), ("is_nullable", Text), ("data_type", Text),
        ("character_maximum_length", Int4), ("character_octet_length", Int4), ("numeric_precision", Int4),
        ("numeric_precision_radix", Int4), ("numeric_scale", Int4), ("datetime_precision", Int4),
        ("interval_type", Text), ("interval_precision", Int4), ("character_set_catalog", Name),
        ("character_set_schema", Name), ("character_set_name", Name), ("collation_catalog", Name),
        ("collation_schema", Name), ("collation_name", Name), ("domain_catalog", Name),
        ("domain_schema", Name), ("domain_name", Name), ("udt_catalog", Name), ("udt_schema", Name),
        ("udt_name", Name), ("scope_catalog", Name), ("scope_schema", Name), ("scope_name", Name),
        ("maximum_cardinality", Int4), ("dtd_identifier", Name), ("is_self_referencing", Text),
        ("is_identity", Text), ("identity_generation", Text), ("identity_start", Text),
        ("identity_increment", Text), ("identity_maximum", Text), ("identity_minimum", Text),
        ("identity_cycle", Text), ("is_generated", Text), ("generation_expression", Text),
        ("is_updatable", Text),
    ]),
    rel(IS, "views", 13004, 'v', &[
        ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("view_definition", Text),
        ("check_option", Text), ("is_updatable", Text), ("is_insertable_into", Text),
        ("is_trigger_updatable", Text), ("is_trigger_deletable", Text), ("is_trigger_insertable_into", Text),
    ]),
    rel(IS, "table_constraints", 13005, 'v', &[
        ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name),
        ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("constraint_type", Text),
        ("is_deferrable", Text), ("initially_deferred", Text), ("enforced", Text), ("nulls_distinct", Text),
    ]),
    rel(IS, "key_column_usage", 13006, 'v', &[
        ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name),
        ("table_catalog", Name), ("table_schema", Name), ("table_name", Name), ("column_name", Name),
        ("ordinal_position", Int4), ("position_in_unique_constraint", Int4),
    ]),
    rel(IS, "referential_constraints", 13007, 'v', &[
        ("constraint_catalog", Name), ("constraint_schema", Name), ("constraint_name", Name),
        ("unique_constraint_catalog", Name), ("unique_constraint_schema", Name),
        ("unique_constraint_name", Name), ("match_option", Text), ("update_rule", Text),
        ("delete_rule", Text),
    ]),
    rel(IS, "table_privileges", 13008, 'v', &[
        ("grantor", Name), ("grantee", Name), ("table_catalog", Name), ("table_schema", Name),
        ("table_name", Name), ("privilege_type", Text), ("is_grantable", Text), ("with_hierarchy", Text),
    ]),
    rel(IS, "role_table_grants", 13009, 'v', &[
        ("grantor", Name), ("grantee", Name), ("table_catalog", Name), ("table_schema", Name),
        ("table_name", Name), ("privilege_type", Text), ("is_grantable", Text), ("with_hierarchy", Text),
    ]),
    rel(IS, "routines", 13010, 'v', &[
        ("specific_catalog", Name), ("specific_schema", Name), ("specific_name", Name),
        ("routine_catalog", Name), ("routine_schema", Name), ("routine_name", Name),
        ("routine_type", Text), ("data_type", Text),
    ]),
];

/// A built-in type `pg_type` lists.
pub struct BuiltinType {
    /// Its oid.
    pub oid: i64,
    /// `typname`.
    pub name: &'static str,
    /// What `format_type` (and `information_schema.columns.data_type`)
    /// calls it.
    pub formatted: &'static str,
    /// `typlen` (-1: variable).
    pub len: i64,
    /// `typcategory`.
    pub category: char,
    /// `typelem` (0: not an array).
    pub elem: i64,
    /// `typarray` (0: none).
    pub array: i64,
    /// `typcollation`.
    pub collation: i64,
}

#[allow(clippy::too_many_arguments)] // One row of the TYPES table.
const fn ty(
    oid: i64,
    name: &'static str,
    formatted: &'static str,
    len: i64,
    category: char,
    elem: i64,
    array: i64,
    collation: i64,
) -> BuiltinType {
    BuiltinType {
        oid,
        name,
        formatted,
        len,
        category,
        elem,
        array,
        collation,
    }
}

/// The built-in types: those of Kappa's columns and of the catalogs'.
#[rustfmt::skip]
pub const TYPES: &[BuiltinType] = &[
    ty(16, "bool", "boolean", 1, 'B', 0, 1000, 0),
    ty(17, "bytea", "bytea", -1, 'U', 0, 1001, 0),
    ty(18, "char", "\"char\"", 1, 'Z', 0, 1002, 0),
    ty(19, "name", "name", 64, 'S', 0, 1003, C_COLLATION),
    ty(20, "int8", "bigint", 8, 'N', 0, 1016, 0),
    ty(21, "int2", "smallint", 2, 'N', 0, 1005, 0),
    ty(22, "int2vector", "int2vector", -1, 'A', 21, 1006, 0),
    ty(23, "int4", "integer", 4, 'N', 0, 1007, 0),
    ty(24, "regproc", "regproc", 4, 'N', 0, 1008, 0),
    ty(25, "text", "text", -1, 'S', 0, 1009, DEFAULT_COLLATION),
    ty(26, "oid", "oid", 4, 'N', 0, 1028, 0),
    ty(30, "oidvector", "oidvector", -1, 'A', 26, 1013, 0),
    ty(114, "json", "json", -1, 'U', 0, 199, 0),
    ty(194, "pg_node_tree", "pg_node_tree", -1, 'Z', 0, 0, DEFAULT_COLLATION),
    ty(700, "float4", "real", 4, 'N', 0, 1021, 0),
    ty(701, "float8", "double precision", 8, 'N', 0, 1022, 0),
    ty(1000, "_bool", "boolean[]", -1, 'A', 16, 0, 0),
    ty(1002, "_char", "\"char\"[]", -1, 'A', 18, 0, 0),
    ty(1003, "_name", "name[]", -1, 'A', 19, 0, C_COLLATION),
    ty(1005, "_int2", "smallint[]", -1, 'A', 21, 0, 0),
    ty(1007, "_int4", "integer[]", -1, 'A', 23, 0, 0),
    ty(1009, "_text", "text[]", -1, 'A', 25, 0, DEFAULT_COLLATION),
    ty(1016, "_int8", "bigint[]", -1, 'A', 20, 0, 0),
    ty(1021, "_float4", "real[]", -1, 'A', 700, 0, 0),
    ty(1022, "_float8", "double precision[]", -1, 'A', 701, 0, 0),
    ty(1028, "_oid", "oid[]", -1, 'A', 26, 0, 0),
    ty(1033, "aclitem", "aclitem", 12, 'U', 0, 1034, 0),
    ty(1034, "_aclitem", "aclitem[]", -1, 'A', 1033, 0, 0),
    ty(1043, "varchar", "character varying", -1, 'S', 0, 1015, DEFAULT_COLLATION),
    ty(1082, "date", "date", 4, 'D', 0, 1182, 0),
    ty(1114, "timestamp", "timestamp without time zone", 8, 'D', 0, 1115, 0),
    ty(1184, "timestamptz", "timestamp with time zone", 8, 'D', 0, 1185, 0),
    ty(1185, "_timestamptz", "timestamp with time zone[]", -1, 'A', 1184, 0, 0),
    ty(1231, "_numeric", "numeric[]", -1, 'A', 1700, 0, 0),
    ty(1700, "numeric", "numeric", -1, 'N', 0, 1231, 0),
    ty(2205, "regclass", "regclass", 4, 'N', 0, 2210, 0),
    ty(2206, "regtype", "regtype", 4, 'N', 0, 2211, 0),
    ty(2950, "uuid", "uuid", 16, 'U', 0, 2951, 0),
    ty(3802, "jsonb", "jsonb", -1, 'U', 0, 3807, 0),
    ty(4089, "regnamespace", "regnamespace", 4, 'N', 0, 4090, 0),
];

/// The built-in type of oid `oid`.
pub fn builtin_type(oid: i64) -> Option<&'static BuiltinType> {
    TYPES.iter().find(|t| t.oid == oid)
}

/// The oid of a catalog column's type.
pub fn type_oid(t: Ty) -> i64 {
    match t {
        Bool => 16,
        Char => 18,
        Name => 19,
        Text => 25,
        Int2 => 21,
        Int4 => 23,
        Int8 => 20,
        Oid => 26,
        Float4 => 700,
        Float8 => 701,
        RegClass => 2205,
        RegType => 2206,
        RegProc => 24,
        RegNamespace => 4089,
        TextArray => 1009,
        OidArray => 1028,
        Int2Array => 1005,
    }
}

/// `format_type(oid, typmod)`: a type's SQL name with its modifier
/// (`numeric(38,2)`), `???` for an unknown oid.
pub fn format_type(oid: i64, typmod: i64) -> String {
    let Some(t) = builtin_type(oid) else {
        return "???".to_string();
    };
    match (oid, typmod) {
        (1700, m) if m >= 4 => format!("numeric({},{})", (m - 4) >> 16, (m - 4) & 0xffff),
        (1043, m) if m >= 4 => format!("character varying({})", m - 4),
        _ => t.formatted.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_relation_has_a_distinct_oid_and_every_column_type_is_listed() {
        let mut oids: Vec<i64> = SYSTEM.iter().map(|r| r.oid).collect();
        oids.sort_unstable();
        oids.dedup();
        assert_eq!(oids.len(), SYSTEM.len());
        for r in SYSTEM {
            for (_, t) in r.columns {
                assert!(builtin_type(type_oid(*t)).is_some(), "{}", r.name);
            }
        }
    }

    #[test]
    fn types_format_with_their_modifiers() {
        assert_eq!(format_type(1700, (38 << 16 | 2) + 4), "numeric(38,2)");
        assert_eq!(format_type(1184, -1), "timestamp with time zone");
        assert_eq!(format_type(20, -1), "bigint");
        assert_eq!(format_type(99999, -1), "???");
    }
}
