//! A derived stream's output row: the projection's columns
//! ([`crate::plan::Operation::Project`]) written straight into the JSON
//! text of the record's value, without building a map first.
//!
//! The text is byte for byte what serializing a `serde_json::Map` of the
//! columns gave before (the crate is built without `preserve_order`, so a
//! map lists its keys sorted, and a name given twice keeps its last
//! column): an output topic's records stay the same across this change,
//! and live and in replay. [`RowWriter::write`] is the one place a
//! projection's value is made.

use std::sync::Arc;

use serde_json::Value;

use crate::event::Raw;
use crate::expr::{Arithmetic, Expr, Row};
use crate::plan::{Operation, Plan, Sink};

/// Where a projection's rows go and how they are written.
#[derive(Debug, Clone)]
pub(crate) struct ProjectOutput {
    /// The sink topic (shared by its records).
    pub(crate) topic: Arc<str>,
    /// Writes each row.
    pub(crate) row: RowWriter,
}

impl ProjectOutput {
    /// The output of `plan` when it is a projection into a topic.
    pub(crate) fn of(plan: &Plan) -> Option<ProjectOutput> {
        match (&plan.operation, &plan.sink) {
            (Operation::Project { columns }, Sink::Topic(topic)) => {
                let mut row = RowWriter::new(columns);
                if let Some(names) = plan.used_fields() {
                    row = row.with_fields(columns, &names);
                }
                Some(ProjectOutput {
                    topic: Arc::from(topic.as_str()),
                    row,
                })
            }
            _ => None,
        }
    }
}

/// Writes a projection's row as a JSON object.
#[derive(Debug, Clone)]
pub(crate) struct RowWriter {
    /// The columns in the order the object lists them — by name, a
    /// repeated name only once, for its last column — each as the index
    /// of its column and its name already written (`"name":`).
    columns: Vec<(usize, Vec<u8>)>,
    /// How each column is read from located fields, when the plan decodes
    /// by field names ([`RowWriter::write_located`]).
    located: Option<Arc<LocatedColumns>>,
}

/// How [`RowWriter::write_located`] reads each column: a top-level field
/// from its located bytes, arithmetic from its fields' numbers, anything
/// else computed on the fields it reads.
#[derive(Debug)]
struct LocatedColumns {
    /// Per column of [`RowWriter::columns`], how it is read.
    columns: Vec<LocatedColumn>,
    /// The indices among the used fields of those the
    /// [`LocatedColumn::Computed`] columns read.
    computed_reads: Vec<usize>,
}

/// How [`RowWriter::write_located`] reads one column.
#[derive(Debug)]
enum LocatedColumn {
    /// The top-level field at this index among the used fields.
    Field(usize),
    /// Arithmetic on the used fields' numbers.
    Arithmetic(Arithmetic),
    /// Evaluated on a row of the fields it reads, built.
    Computed,
}

impl RowWriter {
    /// The writer of rows of `columns` (name, expression).
    pub(crate) fn new(columns: &[(String, Expr)]) -> RowWriter {
        let mut order: Vec<usize> = (0..columns.len()).collect();
        // Stable: a repeated name's columns stay in plan order, the last
        // one wins below as it did in the map.
        order.sort_by(|&a, &b| columns[a].0.cmp(&columns[b].0));
        let mut kept: Vec<usize> = Vec::with_capacity(order.len());
        for i in order {
            match kept.last_mut() {
                Some(last) if columns[*last].0 == columns[i].0 => *last = i,
                _ => kept.push(i),
            }
        }
        let columns = kept
            .into_iter()
            .map(|i| {
                let mut name = serde_json::to_vec(&columns[i].0).expect("a string serializes");
                name.push(b':');
                (i, name)
            })
            .collect();
        RowWriter {
            columns,
            located: None,
        }
    }

    /// This writer able to write rows from located fields, `names` being
    /// the used fields a plan decodes (`columns` as given to
    /// [`RowWriter::new`]); unchanged if a column reads a field not among
    /// them.
    pub(crate) fn with_fields(mut self, columns: &[(String, Expr)], names: &[String]) -> RowWriter {
        let index = |name: &str| names.iter().position(|n| n == name);
        let mut located = Vec::with_capacity(self.columns.len());
        let mut computed_reads = Vec::new();
        for (i, _) in &self.columns {
            let expr = &columns[*i].1;
            let column = match expr {
                Expr::Field(path) if path.len() == 1 => match index(&path[0]) {
                    Some(at) => LocatedColumn::Field(at),
                    None => return self,
                },
                expr => match Arithmetic::compile(expr, &index) {
                    Some(arithmetic) => LocatedColumn::Arithmetic(arithmetic),
                    None => {
                        for path in expr.fields() {
                            let Some(at) = path.first().and_then(|name| index(name)) else {
                                return self;
                            };
                            if !computed_reads.contains(&at) {
                                computed_reads.push(at);
                            }
                        }
                        LocatedColumn::Computed
                    }
                },
            };
            located.push(column);
        }
        self.located = Some(Arc::new(LocatedColumns {
            columns: located,
            computed_reads,
        }));
        self
    }

    /// The indices among the used fields of those a row written by
    /// [`RowWriter::write_located`] needs built; `None` if it cannot write
    /// rows from located fields.
    pub(crate) fn computed_reads(&self) -> Option<&[usize]> {
        self.located.as_deref().map(|l| l.computed_reads.as_slice())
    }

    /// Appends to `out` the JSON text of the row of a record whose used
    /// fields are located in `raws` by [`crate::decoder::Decoder::locate`]
    /// (which checked every located string to be UTF-8), exactly as
    /// [`RowWriter::write`] writes it for the event decoded from them: a
    /// top-level field is written from its located bytes (a string without
    /// escapes, a literal or a short integer as it is, any other value
    /// built and written), arithmetic ([`Arithmetic`]) on the located
    /// fields' numbers, any other column computed on `row`, which holds
    /// the fields [`RowWriter::computed_reads`] names built. `None` where a
    /// located value does not build (the event path then decides; `out`
    /// may hold part of the row), or without [`RowWriter::with_fields`].
    pub(crate) fn write_located(
        &self,
        columns: &[(String, Expr)],
        raws: &[Raw<'_>],
        row: &dyn Row,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let located = self.located.as_deref()?;
        out.push(b'{');
        for (n, ((i, name), column)) in self.columns.iter().zip(&located.columns).enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(name);
            match column {
                // serde_json escapes only `"`, `\` and control characters,
                // which a located string without escapes does not hold.
                LocatedColumn::Field(at) => match raws[*at] {
                    Raw::Text(text) => {
                        debug_assert!(std::str::from_utf8(text).is_ok());
                        out.push(b'"');
                        out.extend_from_slice(text);
                        out.push(b'"');
                    }
                    raw => match raw.canonical_text() {
                        Some(text) => out.extend_from_slice(text),
                        None => write_value(out, &raw.build()?),
                    },
                },
                LocatedColumn::Arithmetic(arithmetic) => {
                    let n = arithmetic.eval(&|at| raws[at].number())?;
                    Arithmetic::write_text(n, out);
                }
                LocatedColumn::Computed => write_value(out, &columns[*i].1.eval_ref(row)),
            }
        }
        out.push(b'}');
        Some(())
    }

    /// Appends to `out` the JSON text of `event`'s row (`columns` as given
    /// to [`RowWriter::new`]). Every byte written is UTF-8 text: `{`, `,`,
    /// `}`, the names (serde_json's text of `String`s) and serde_json's
    /// text of the values.
    pub(crate) fn write(&self, columns: &[(String, Expr)], event: &dyn Row, out: &mut Vec<u8>) {
        out.push(b'{');
        for (n, (i, name)) in self.columns.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(name);
            let value = columns[*i].1.eval_ref(event);
            write_value(out, &value);
        }
        out.push(b'}');
    }

    /// [`RowWriter::write`] as a `String`.
    pub(crate) fn write_text(&self, columns: &[(String, Expr)], event: &dyn Row) -> String {
        let mut out = Vec::new();
        self.write(columns, event, &mut out);
        // SAFETY: `write` writes UTF-8 text only (see there); a row is not
        // checked again as a whole: that check was a pass over every
        // output byte.
        unsafe { String::from_utf8_unchecked(out) }
    }
}

/// Appends `value`'s compact JSON text (as `Value::to_string` gives it).
fn write_value(out: &mut Vec<u8>, value: &Value) {
    serde_json::to_writer(&mut *out, value).expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An event's value, as a row.
    struct Fields(Value);

    impl Row for Fields {
        fn field(&self, path: &[String]) -> Option<&Value> {
            crate::expr::get_path(&self.0, path)
        }
        fn key(&self) -> Option<&str> {
            None
        }
        fn record_timestamp(&self) -> i64 {
            0
        }
    }

    /// What the runtime wrote before: a map of the columns, serialized.
    fn as_map(columns: &[(String, Expr)], event: &dyn Row) -> String {
        let row: serde_json::Map<String, Value> = columns
            .iter()
            .map(|(name, e)| (name.clone(), e.eval(event)))
            .collect();
        Value::Object(row).to_string()
    }

    #[test]
    fn rows_are_written_as_the_map_of_their_columns_was() {
        let columns: Vec<(String, Expr)> = [
            ("price", Expr::field("price")),
            ("auction", Expr::field("auction")),
            ("b", Expr::lit(json!(1.5))),
            ("a\"quoted\"", Expr::field("extra")),
            ("b", Expr::field("nested")),
            ("big", Expr::field("big")),
            ("neg", Expr::field("neg")),
            ("missing", Expr::field("nope")),
            ("é", Expr::lit(json!([true, null, "x\n"]))),
        ]
        .into_iter()
        .map(|(n, e)| (n.to_string(), e))
        .collect();
        let e = Fields(json!({
            "price": 0.908, "auction": 1001, "extra": "a \"b\" \u{1}",
            "nested": {"z": 1, "a": [1, 2]}, "big": u64::MAX, "neg": -7,
        }));
        let writer = RowWriter::new(&columns);
        assert_eq!(writer.write_text(&columns, &e), as_map(&columns, &e));
        let empty: Vec<(String, Expr)> = Vec::new();
        assert_eq!(RowWriter::new(&empty).write_text(&empty, &e), "{}");
    }
}
