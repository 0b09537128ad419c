//! Every example in docs/sql.md runs (issue 38): each ```sql block
//! (also those indented in a list item) is sent to a real server, in the
//! order the reference gives them, and each statement must be accepted.
//! Blocks that show syntax rather than statements are ```text.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{workspace_root, Server};

/// The ```sql blocks of `markdown`, each with its indentation removed, and
/// the line it starts on.
fn sql_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, usize, String)> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None if trimmed == "```sql" => open = Some((n + 1, indent, String::new())),
            None => {}
            Some(_) if trimmed == "```" => {
                let (start, _, text) = open.take().unwrap();
                blocks.push((start, text));
            }
            Some((_, indent, text)) => {
                text.push_str(line.get(*indent..).unwrap_or(line.trim_start()));
                text.push('\n');
            }
        }
    }
    assert!(open.is_none(), "an unclosed ```sql block");
    blocks
}

#[test]
fn every_sql_example_in_the_reference_runs() {
    let docs = std::fs::read_to_string(workspace_root().join("docs/sql.md")).unwrap();
    let blocks = sql_blocks(&docs);
    assert!(blocks.len() >= 5, "found {} examples", blocks.len());
    let server = Server::start(&[]);
    let client = server.client();
    for (line, sql) in &blocks {
        let (status, body) = client.sql(sql);
        assert_eq!(
            status, 200,
            "docs/sql.md line {line}: the example fails:\n{sql}\n{body}"
        );
    }
}
