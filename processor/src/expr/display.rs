//! An expression written back as SQL text (`EXPLAIN`, messages): fields
//! as dotted paths (a joined side under its alias), `ROWKEY`, `ROWTIME`,
//! literals as SQL literals, and parentheses around every operation that
//! has operands, so the text reads back as the same expression.

use std::fmt;

use serde_json::Value;

use super::{BinaryOp, DataType, Expr, UnaryOp};

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Field(path) => write!(f, "{}", path.join(".")),
            Expr::Column(name) if name == crate::event::JOINED_KEY_COLUMN => {
                write!(f, "<joined stream's key>")
            }
            Expr::Column(name) => write!(f, "{name}"),
            Expr::Key => write!(f, "ROWKEY"),
            Expr::RecordTimestamp => write!(f, "ROWTIME"),
            Expr::Literal(v) => literal(v, f),
            Expr::Unary(UnaryOp::Not, e) => write!(f, "(NOT {e})"),
            Expr::Unary(UnaryOp::Neg, e) => write!(f, "(-{e})"),
            Expr::Binary(op, l, r) => write!(f, "({l} {} {r})", symbol(*op)),
            Expr::IsNull { expr, negated } => {
                write!(f, "({expr} IS {}NULL)", not(*negated))
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                write!(f, "({expr} {}IN (", not(*negated))?;
                comma_separated(list, f)?;
                write!(f, "))")
            }
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => write!(f, "({expr} {}BETWEEN {low} AND {high})", not(*negated)),
            Expr::Like {
                expr,
                pattern,
                negated,
            } => write!(f, "({expr} {}LIKE {pattern})", not(*negated)),
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                write!(f, "CASE")?;
                if let Some(o) = operand {
                    write!(f, " {o}")?;
                }
                for (when, then) in branches {
                    write!(f, " WHEN {when} THEN {then}")?;
                }
                if let Some(e) = otherwise {
                    write!(f, " ELSE {e}")?;
                }
                write!(f, " END")
            }
            Expr::Cast(e, ty) => write!(f, "CAST({e} AS {})", type_name(*ty)),
            Expr::Function(func, args) => {
                write!(f, "{}(", func.name())?;
                comma_separated(args, f)?;
                write!(f, ")")
            }
        }
    }
}

fn not(negated: bool) -> &'static str {
    if negated {
        "NOT "
    } else {
        ""
    }
}

fn comma_separated(items: &[Expr], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        write!(f, "{e}")?;
    }
    Ok(())
}

fn literal(v: &Value, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match v {
        Value::Null => write!(f, "NULL"),
        Value::Bool(b) => write!(f, "{}", if *b { "TRUE" } else { "FALSE" }),
        Value::Number(n) => write!(f, "{n}"),
        Value::String(s) => write!(f, "'{}'", s.replace('\'', "''")),
        other => write!(f, "'{}'", other.to_string().replace('\'', "''")),
    }
}

fn symbol(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Mod => "%",
        BinaryOp::Eq => "=",
        BinaryOp::NotEq => "<>",
        BinaryOp::Lt => "<",
        BinaryOp::LtEq => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::GtEq => ">=",
        BinaryOp::And => "AND",
        BinaryOp::Or => "OR",
        BinaryOp::Concat => "||",
    }
}

fn type_name(ty: DataType) -> String {
    match ty {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Integer => "BIGINT".into(),
        DataType::Double => "DOUBLE".into(),
        DataType::Decimal { precision, scale } => format!("DECIMAL({precision}, {scale})"),
        DataType::String => "VARCHAR".into(),
        DataType::Timestamp => "TIMESTAMP".into(),
    }
}
