//! The body of the `sql_statement` fuzz target (fuzz/fuzz_targets/), in
//! the crate so that the target and the corpus test
//! (processor/tests/fuzz_corpus.rs) run the same code.
//!
//! Invariants checked on any input: parsing and planning return `Ok` or
//! `Err` and never panic or overflow the stack; an error has a position
//! of at least line 1, column 1; a plan the planner returns is valid,
//! within the expression limits, evaluates against an event and encodes.

use serde_json::{json, Value};

use super::{parse, plan, SourceDecl, Statement};
use crate::expr::{get_path, Row};
use crate::limits::plan_complexity;
use crate::plan::Operation;

/// Streams and tables the fuzzed statements can read.
const SOURCES: &[&str] = &[
    super::brief::USER_EVENTS,
    "CREATE TABLE users (id VARCHAR PRIMARY KEY, name VARCHAR, tier VARCHAR) WITH (TOPIC='users');",
    "CREATE STREAM s (grp VARCHAR, amount INT) WITH (KAFKA_TOPIC = 's');",
    "CREATE STREAM clicks (user_id VARCHAR KEY, page VARCHAR, at BIGINT) WITH (TOPIC='clicks', TIMESTAMP='at');",
];

struct Event(Value);

impl Row for Event {
    fn field(&self, path: &[String]) -> Option<&Value> {
        get_path(&self.0, path)
    }
    fn key(&self) -> Option<&str> {
        Some("k")
    }
    fn record_timestamp(&self) -> i64 {
        1_700_000_000_000
    }
}

/// Parses `data` (if it is UTF-8) and plans every `CREATE .. AS` in it,
/// on a thread with the stack the server gives statements
/// ([`super::SQL_STACK_BYTES`]).
pub fn fuzz_sql_statement(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(super::SQL_STACK_BYTES)
            .spawn_scoped(scope, || parse_and_plan(text))
            .expect("a thread")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
}

fn parse_and_plan(text: &str) {
    let statements = match parse(text) {
        Ok(s) => s,
        Err(e) => {
            assert!(e.line >= 1 && e.column >= 1, "{e:?}");
            return;
        }
    };
    let catalog: Vec<SourceDecl> = SOURCES
        .iter()
        .filter_map(|s| match parse(s).ok()?.pop()? {
            Statement::CreateSource(d) => Some(d),
            _ => None,
        })
        .collect();
    let event = Event(
        json!({"user_id": "u", "event_type": "purchase", "amount": 3,
                             "event_time": 1_700_000_000_000i64, "grp": "g", "id": "u"}),
    );
    for statement in statements {
        let create = match statement {
            Statement::CreateAs(create) => create,
            Statement::Explain(super::Explain::Create(create)) => *create,
            Statement::InsertInto(insert) => match super::insert_create(&insert, "t") {
                Ok(create) => create,
                Err(e) => {
                    assert!(e.line >= 1 && e.column >= 1, "{e:?}");
                    continue;
                }
            },
            _ => continue,
        };
        let Ok(p) = plan(&create, &catalog) else {
            continue;
        };
        let operators = super::explain::operators(&p);
        super::explain::render(&operators, &Default::default(), None);
        assert_eq!(p.validate(), Ok(()), "the planner returns valid plans");
        plan_complexity(&p).check().expect("within the limits");
        if let Some(f) = &p.filter {
            f.is_true(&event);
        }
        match &p.operation {
            Operation::Project { columns } => columns.iter().for_each(|(_, e)| {
                e.eval(&event);
            }),
            Operation::Aggregate(a) => a.group_by.iter().for_each(|e| {
                e.eval(&event);
            }),
        }
        serde_json::to_vec(&p).expect("a plan encodes");
    }
}
