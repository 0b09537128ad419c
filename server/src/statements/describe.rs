//! The output columns of a view for `DESCRIBE`: each column's name, its
//! SQL type where the plan fixes one, and whether it is part of the row
//! key. Plans carry no types, so they are worked out here from what does:
//! the stream's declared (typed) columns, casts, literals, operators,
//! functions and aggregates. A column of a schemaless input, or one whose
//! type depends on the values, has none (`null`).

use kappa_processor::accumulators::AggregateKind;
use kappa_processor::expr::{BinaryOp, DataType, Expr, Function, UnaryOp};
use kappa_processor::plan::{
    group_key_input, AggregateSpec, ColumnSource, InnerRows, Operation, Plan, WINDOW_END_INPUT,
    WINDOW_START_INPUT,
};
use kappa_processor::sql::SqlType;
use serde_json::Value;

use crate::dto::statements::ColumnOut;
use crate::dto::IntoWire;

/// Digits an exact `SUM`/`AVG` of decimals holds (an `i128` of units).
const DECIMAL_SUM_PRECISION: u32 = 38;

/// `plan`'s output columns in SELECT order: a view over rows
/// ([`Plan::then`]) has the outer query's.
pub fn columns(plan: &Plan) -> Vec<ColumnOut> {
    // The fields an aggregate over a subquery's rows reads are the
    // subquery's columns, not the stream's: their types are not known here.
    let fields = match InnerRows::of(plan) {
        Some(InnerRows::Aggregate(_)) => &[][..],
        _ => &plan.source.typed_fields[..],
    };
    let typed = Types {
        fields,
        inputs: None,
    };
    if let Some(rows) = &plan.then {
        return aggregate_columns(&rows.aggregate, fields);
    }
    match &plan.operation {
        Operation::Project { columns } => columns
            .iter()
            .map(|(name, expr)| ColumnOut {
                name: name.clone(),
                sql_type: typed.of(expr).into_wire(),
                key: false,
            })
            .collect(),
        Operation::Aggregate(a) => aggregate_columns(a, fields),
    }
}

/// The columns of the aggregate `a`, whose inputs read `fields`.
fn aggregate_columns(a: &AggregateSpec, fields: &[(String, DataType)]) -> Vec<ColumnOut> {
    let typed = Types {
        fields,
        inputs: None,
    };
    a.columns
        .iter()
        .map(|(name, source)| {
            let (sql_type, key) = match source {
                ColumnSource::GroupKey(i) => (a.group_by.get(*i).and_then(|e| typed.of(e)), true),
                ColumnSource::WindowStart | ColumnSource::WindowEnd => {
                    (Some(SqlType::Timestamp), false)
                }
                ColumnSource::Aggregate(i) => (
                    a.aggregates
                        .get(*i)
                        .and_then(|agg| typed.aggregate(agg.kind, agg.input.as_ref())),
                    false,
                ),
                ColumnSource::Computed(e) => {
                    let over = Types {
                        fields,
                        inputs: Some(a),
                    };
                    (over.of(e), false)
                }
            };
            ColumnOut {
                name: name.clone(),
                sql_type: sql_type.into_wire(),
                key,
            }
        })
        .collect()
}

/// Types of a plan's expressions.
struct Types<'a> {
    /// The input's fields of a known type.
    fields: &'a [(String, DataType)],
    /// The aggregate whose inputs a computed column's [`Expr::Column`]s
    /// name ([`AggregateSpec::inputs`]).
    inputs: Option<&'a AggregateSpec>,
}

impl Types<'_> {
    fn aggregate(&self, kind: AggregateKind, input: Option<&Expr>) -> Option<SqlType> {
        let input = || input.and_then(|e| self.of(e));
        match kind {
            AggregateKind::CountAll | AggregateKind::Count | AggregateKind::CountDistinct => {
                Some(SqlType::BigInt)
            }
            AggregateKind::Sum => match input()? {
                SqlType::Integer | SqlType::BigInt => Some(SqlType::BigInt),
                SqlType::Double => Some(SqlType::Double),
                _ => None,
            },
            AggregateKind::Avg => Some(SqlType::Double),
            AggregateKind::Min
            | AggregateKind::Max
            | AggregateKind::Latest
            | AggregateKind::Earliest => input(),
            AggregateKind::SumDecimal { scale } => Some(SqlType::Decimal {
                precision: DECIMAL_SUM_PRECISION,
                scale,
            }),
            AggregateKind::AvgDecimal { scale } => Some(SqlType::Decimal {
                precision: DECIMAL_SUM_PRECISION,
                scale: scale + 4,
            }),
        }
    }

    /// The type of `expr`, when the plan fixes one.
    fn of(&self, expr: &Expr) -> Option<SqlType> {
        match expr {
            Expr::Field(path) => match path.as_slice() {
                [name] => self
                    .fields
                    .iter()
                    .find(|(field, _)| field == name)
                    .map(|(_, t)| sql_type(*t)),
                _ => None,
            },
            Expr::Column(name) => self.input(name),
            Expr::Key => Some(SqlType::Varchar),
            Expr::RecordTimestamp => Some(SqlType::Timestamp),
            Expr::Literal(value) => literal(value),
            Expr::Unary(UnaryOp::Not, _) => Some(SqlType::Boolean),
            Expr::Unary(UnaryOp::Neg, operand) => self.of(operand),
            Expr::Binary(op, left, right) => self.binary(*op, left, right),
            Expr::IsNull { .. }
            | Expr::InList { .. }
            | Expr::Between { .. }
            | Expr::Like { .. } => Some(SqlType::Boolean),
            Expr::Case {
                branches,
                otherwise,
                ..
            } => branches
                .iter()
                .map(|(_, then)| then)
                .chain(otherwise.as_deref())
                .find_map(|e| self.of(e)),
            Expr::Cast(_, to) => Some(sql_type(*to)),
            Expr::Function(f, args) => self.function(*f, args),
        }
    }

    /// The type of a computed column's input `name`.
    fn input(&self, name: &str) -> Option<SqlType> {
        let a = self.inputs?;
        if name == WINDOW_START_INPUT || name == WINDOW_END_INPUT {
            return Some(SqlType::Timestamp);
        }
        if let Some(i) = (0..a.group_by.len()).find(|i| group_key_input(*i) == name) {
            return self.of(&a.group_by[i]);
        }
        let agg = a.aggregates.iter().find(|agg| agg.name == name)?;
        self.aggregate(agg.kind, agg.input.as_ref())
    }

    fn binary(&self, op: BinaryOp, left: &Expr, right: &Expr) -> Option<SqlType> {
        let integer = |t: SqlType| matches!(t, SqlType::Integer | SqlType::BigInt);
        let numeric =
            |t: SqlType| integer(t) || matches!(t, SqlType::Double | SqlType::Decimal { .. });
        match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => {
                let (l, r) = (self.of(left)?, self.of(right)?);
                if integer(l) && integer(r) {
                    Some(SqlType::BigInt)
                } else if numeric(l) && numeric(r) {
                    Some(SqlType::Double)
                } else {
                    None
                }
            }
            BinaryOp::Concat => Some(SqlType::Varchar),
            BinaryOp::Eq
            | BinaryOp::NotEq
            | BinaryOp::Lt
            | BinaryOp::LtEq
            | BinaryOp::Gt
            | BinaryOp::GtEq
            | BinaryOp::And
            | BinaryOp::Or => Some(SqlType::Boolean),
        }
    }

    fn function(&self, f: Function, args: &[Expr]) -> Option<SqlType> {
        match f {
            Function::Upper
            | Function::Lower
            | Function::Trim
            | Function::Substring
            | Function::Concat
            | Function::Replace
            | Function::FormatTimestamp => Some(SqlType::Varchar),
            Function::Length => Some(SqlType::BigInt),
            Function::Sqrt => Some(SqlType::Double),
            Function::ToTimestamp | Function::DateTrunc => Some(SqlType::Timestamp),
            Function::Abs
            | Function::Round
            | Function::Floor
            | Function::Ceil
            | Function::Coalesce
            | Function::IfNull
            | Function::Greatest
            | Function::Least => args.iter().find_map(|a| self.of(a)),
        }
    }
}

/// The SQL type of an evaluated type.
fn sql_type(t: DataType) -> SqlType {
    match t {
        DataType::Boolean => SqlType::Boolean,
        DataType::Integer => SqlType::BigInt,
        DataType::Double => SqlType::Double,
        DataType::Decimal { precision, scale } => SqlType::Decimal { precision, scale },
        DataType::String => SqlType::Varchar,
        DataType::Timestamp => SqlType::Timestamp,
    }
}

fn literal(value: &Value) -> Option<SqlType> {
    match value {
        Value::Bool(_) => Some(SqlType::Boolean),
        Value::Number(n) if n.is_f64() => Some(SqlType::Double),
        Value::Number(_) => Some(SqlType::BigInt),
        Value::String(_) => Some(SqlType::Varchar),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kappa_processor::sql::brief::{PURCHASE_STATS, USER_EVENTS};
    use kappa_processor::sql::{self, SourceDecl, Statement};

    /// The columns of `query` (a `CREATE .. AS SELECT`) over the brief's
    /// `user_events` and a schemaless `raw` stream.
    fn columns_of(query: &str) -> Vec<(String, Option<String>, bool)> {
        let raw = "CREATE STREAM raw WITH (KAFKA_TOPIC='raw', VALUE_FORMAT='JSON');";
        let mut sources: Vec<SourceDecl> = Vec::new();
        for text in [USER_EVENTS, raw] {
            match sql::parse(text).unwrap().remove(0) {
                Statement::CreateSource(decl) => sources.push(decl),
                other => panic!("{other:?}"),
            }
        }
        let Statement::CreateAs(create) = sql::parse(query).unwrap().remove(0) else {
            panic!("{query}");
        };
        let plan = sql::plan(&create, &sources).unwrap();
        columns(&plan)
            .into_iter()
            .map(|c| (c.name, c.sql_type.map(|t| t.to_string()), c.key))
            .collect()
    }

    fn col(name: &str, ty: Option<&str>, key: bool) -> (String, Option<String>, bool) {
        (name.to_string(), ty.map(str::to_string), key)
    }

    #[test]
    fn the_brief_table_has_typed_columns() {
        assert_eq!(
            columns_of(PURCHASE_STATS),
            vec![
                col("user_id", Some("VARCHAR"), true),
                col("window_start", Some("TIMESTAMP"), false),
                col("window_end", Some("TIMESTAMP"), false),
                col("purchase_count", Some("BIGINT"), false),
                col("total_amount", Some("DECIMAL(38, 2)"), false),
                col("avg_amount", Some("DECIMAL(38, 6)"), false),
            ]
        );
    }

    #[test]
    fn schemaless_columns_have_no_type_unless_the_query_fixes_one() {
        let query = "CREATE TABLE t AS SELECT uid, COUNT(*) AS n, SUM(x) AS s, \
                     MAX(CAST(x AS DOUBLE)) AS m FROM raw GROUP BY uid;";
        assert_eq!(
            columns_of(query),
            vec![
                col("uid", None, true),
                col("n", Some("BIGINT"), false),
                col("s", None, false),
                col("m", Some("DOUBLE"), false),
            ]
        );
        let query = "CREATE STREAM s AS SELECT user_id, amount > 5 AS big, 1 + 2 AS three, \
                     UPPER(event_type) AS kind FROM user_events;";
        assert_eq!(
            columns_of(query),
            vec![
                col("user_id", Some("VARCHAR"), false),
                col("big", Some("BOOLEAN"), false),
                col("three", Some("BIGINT"), false),
                col("kind", Some("VARCHAR"), false),
            ]
        );
    }
}
