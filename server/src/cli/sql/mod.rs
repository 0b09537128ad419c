//! `kappa sql`: a SQL shell on `POST /v1/statements`.
//!
//! Statements end with `;` and may span lines. Each complete statement is
//! sent on its own, as soon as it is complete, and its answer printed (a
//! table or a one-line status); an error prints the server's message with
//! the line and column in the text typed (or the file) and the offending
//! line with a caret.
//!
//! Modes: `-e TEXT` and `-f FILE` run their statements in order and stop at
//! the first error (non-zero exit); so does input piped to stdin. On a
//! terminal the shell edits lines, recalls history with the up key (kept in
//! `~/.kappa_history`, or `$KAPPA_HISTORY`), and reports errors without
//! exiting. A text ending without `;` runs its last statement as it is.

mod editor;
mod render;
mod split;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, Context};
use serde::Deserialize;
use serde_json::Value;

use super::http::{ApiError, Client};
use super::Reported;
use editor::{History, Input, LineReader};
use render::render;
use split::{position, shift, split, Span};

/// Arguments of `kappa sql`.
#[derive(Debug, clap::Args)]
pub struct SqlArgs {
    /// Run these statements and exit.
    #[arg(short = 'e', long = "execute", conflicts_with = "file")]
    pub execute: Option<String>,
    /// Run the statements of this file and exit.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
}

const PROMPT: &str = "kappa> ";
const CONTINUATION: &str = "   ..> ";

const HELP: &str = "\
Statements end with ';' and may span lines. Examples:
  SHOW STREAMS;  SHOW TABLES;  DESCRIBE purchase_stats;
  SELECT * FROM purchase_stats WHERE user_id = 'user-1';
Shell commands (at the start of a statement):
  \\history   print the statements entered before (up/down recall them)
  \\c         drop the statement typed so far (also Ctrl-C)
  clear      clear the screen
  \\help      this text
  \\q         quit (also Ctrl-D, `exit`, `quit`)
The SQL reference is docs/sql.md.
";

#[derive(Deserialize)]
struct Answer {
    results: Vec<Value>,
}

/// Runs `kappa sql`, printing answers to `out` and errors to stderr.
pub fn run(client: &Client, args: SqlArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let (text, source) = match (args.execute, args.file) {
        (Some(text), _) => (text, "-e".to_string()),
        (None, Some(path)) => (
            std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?,
            path.display().to_string(),
        ),
        (None, None) => return shell(client, out),
    };
    let mut errors = std::io::stderr();
    run_text(client, &text, &source, true, out, &mut errors)
}

/// Runs every statement of `text` (the last one may lack its `;`). With
/// `stop_on_error`, the first failure ends the run as [`Reported`].
/// `source` names the text in error messages.
pub fn run_text(
    client: &Client,
    text: &str,
    source: &str,
    stop_on_error: bool,
    out: &mut dyn Write,
    errors: &mut dyn Write,
) -> anyhow::Result<()> {
    let split = split(text);
    let mut failed = false;
    for span in split.complete.iter().chain(&split.rest) {
        if let Err(e) = execute(client, text, *span, out) {
            report(&e, text, *span, (source, (1, 1)), errors)?;
            failed = true;
            if stop_on_error {
                return Err(Reported.into());
            }
        }
    }
    if failed {
        return Err(Reported.into());
    }
    Ok(())
}

/// Sends one statement and prints its answer.
fn execute(client: &Client, text: &str, span: Span, out: &mut dyn Write) -> anyhow::Result<()> {
    let statement = &text[span.start..span.end];
    let body = client
        .post("/v1/statements", "application/sql", statement, &[])
        .map_err(|e| with_suggestion(client, e))?;
    let answer: Answer = super::http::parse("/v1/statements", &body)?;
    for result in &answer.results {
        out.write_all(render(result).as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// A statement's `unknown_view` error with the closest existing names
/// (the view is the one the server's message quotes).
fn with_suggestion(client: &Client, error: anyhow::Error) -> anyhow::Error {
    let quoted = error
        .downcast_ref::<super::http::ApiError>()
        .filter(|api| api.code == "unknown_view")
        .and_then(|api| api.message.split('"').nth(1).map(str::to_string));
    match quoted {
        Some(name) => super::suggest::unknown(client, &super::suggest::Named::View(name), error),
        None => error,
    }
}

/// Prints an error of the statement at `span` of `text`: the server's
/// message with the position in the input (named `source`, in which `text`
/// starts at position `origin`), the line and a caret.
fn report(
    error: &anyhow::Error,
    text: &str,
    span: Span,
    (source, origin): (&str, (u64, u64)),
    errors: &mut dyn Write,
) -> std::io::Result<()> {
    let start = position(text, span.start);
    let Some(api) = error.downcast_ref::<ApiError>() else {
        return writeln!(errors, "{error:#}");
    };
    let in_text = match api.position {
        Some(inner) => shift(start, inner),
        None => start,
    };
    let (line, column) = shift(origin, in_text);
    let place = if api.position.is_some() {
        format!("line {line}, column {column}")
    } else {
        format!("statement at line {line}")
    };
    writeln!(
        errors,
        "error: {}: {source}: {place}: {}",
        api.code, api.message
    )?;
    if api.position.is_some() {
        if let Some(source_line) = text.lines().nth(in_text.0 as usize - 1) {
            let pad: String = source_line
                .chars()
                .take(in_text.1 as usize - 1)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            writeln!(errors, "  {source_line}\n  {pad}^")?;
        }
    }
    Ok(())
}

/// Reads statements from stdin: edited lines with history on a terminal,
/// plain lines otherwise (then the first error ends the run).
fn shell(client: &Client, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut reader = LineReader::new();
    let interactive = reader.is_interactive();
    let mut history = History::open(if interactive {
        History::default_file()
    } else {
        None
    });
    if interactive {
        writeln!(
            out,
            "kappa sql on {}: statements end with ';', \\help for help, \\q to quit",
            client.base_url()
        )?;
    }
    let mut errors = std::io::stderr();
    let mut buffer = String::new();
    // Where `buffer` starts in the input (piped input reports positions in
    // the whole input; a terminal, in the statement typed).
    let mut origin = (1, 1);
    let mut line_number: u64 = 0;
    loop {
        let prompt = if buffer.trim().is_empty() {
            PROMPT
        } else {
            CONTINUATION
        };
        let line = match reader.read(prompt, history.entries())? {
            Input::Line(line) => {
                line_number += 1;
                line
            }
            Input::Interrupted => {
                buffer.clear();
                origin = (1, 1);
                continue;
            }
            Input::Eof => break,
        };
        if buffer.trim().is_empty() {
            match command(&line, &history, out) {
                Ok(Command::Quit) => return Ok(()),
                Ok(Command::Clear) => {
                    if interactive {
                        out.write_all(CLEAR_SCREEN.as_bytes())?;
                        out.flush()?;
                    }
                    continue;
                }
                Ok(Command::Done) => {
                    buffer.clear();
                    continue;
                }
                Ok(Command::None) => {}
                Err(e) => {
                    writeln!(errors, "{e}")?;
                    if !interactive {
                        return Err(Reported.into());
                    }
                    continue;
                }
            }
        } else if line.trim() == "\\c" {
            buffer.clear();
            continue;
        }
        if buffer.trim().is_empty() {
            buffer.clear();
            if !interactive {
                origin = (line_number, 1);
            }
        }
        buffer.push_str(&line);
        buffer.push('\n');
        let split = split(&buffer);
        for span in &split.complete {
            if interactive {
                history.add(&buffer[span.start..span.end]);
            }
            if let Err(e) = execute(client, &buffer, *span, out) {
                report(&e, &buffer, *span, ("stdin", origin), &mut errors)?;
                if !interactive {
                    return Err(Reported.into());
                }
            }
        }
        if !interactive {
            origin = shift(origin, position(&buffer, split.consumed));
        }
        buffer.drain(..split.consumed);
    }
    if !buffer.trim().is_empty() && !interactive {
        let split = split(&buffer);
        if let Some(span) = split.rest {
            if let Err(e) = execute(client, &buffer, span, out) {
                report(&e, &buffer, span, ("stdin", origin), &mut errors)?;
                return Err(Reported.into());
            }
        }
    }
    Ok(())
}

enum Command {
    /// Not a shell command: the start of a statement.
    None,
    /// A command that ran.
    Done,
    /// `clear`: clear the screen (a terminal's only).
    Clear,
    Quit,
}

/// Cursor home, erase the screen.
const CLEAR_SCREEN: &str = "\x1b[H\x1b[2J";

/// A shell command typed at the start of a statement.
fn command(line: &str, history: &History, out: &mut dyn Write) -> anyhow::Result<Command> {
    let word = line.trim().trim_end_matches(';');
    match word {
        "\\q" | "quit" | "exit" => Ok(Command::Quit),
        "\\help" | "\\h" | "\\?" | "help" => {
            out.write_all(HELP.as_bytes())?;
            Ok(Command::Done)
        }
        "\\history" => {
            for (i, entry) in history.entries().iter().enumerate() {
                writeln!(out, "{:5}  {entry}", i + 1)?;
            }
            Ok(Command::Done)
        }
        "\\c" => Ok(Command::Done),
        // Not SQL; as the start of a statement it would swallow the next one.
        "clear" => Ok(Command::Clear),
        w if w.starts_with('\\') => Err(anyhow!("unknown command {w}: \\help lists them")),
        _ => Ok(Command::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};

    #[test]
    fn runs_statements_one_by_one_and_maps_error_positions() {
        let server = FakeServer::start(vec![
            Canned::json(
                200,
                r#"{"results":[{"statement":"DROP TABLE","name":"a","status":"dropped"}]}"#,
            ),
            Canned::json(
                400,
                r#"{"error":{"code":"sql_error","message":"unknown stream 'nope'","line":2,"column":6,"statement":0}}"#,
            ),
        ]);
        let text = "DROP TABLE a;\n  SELECT *\nFROM nope;\nSHOW TABLES;";
        let (mut out, mut errors) = (Vec::new(), Vec::new());
        let error = run_text(
            &Client::new(&server.url),
            text,
            "-e",
            true,
            &mut out,
            &mut errors,
        )
        .unwrap_err();
        assert!(error.downcast_ref::<Reported>().is_some());
        assert_eq!(String::from_utf8(out).unwrap(), "dropped table a\n");
        assert_eq!(
            String::from_utf8(errors).unwrap(),
            "error: sql_error: -e: line 3, column 6: unknown stream 'nope'\n  FROM nope;\n       ^\n"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].body, "DROP TABLE a;");
        assert_eq!(requests[1].body, "SELECT *\nFROM nope;");
        assert_eq!(requests[1].header("content-type"), Some("application/sql"));
    }

    #[test]
    fn errors_without_position_name_the_statement() {
        let server = FakeServer::start(vec![Canned::json(
            404,
            r#"{"error":{"code":"unknown_view","message":"view \"x\" does not exist","statement":0}}"#,
        )]);
        let mut errors = Vec::new();
        let text = "\n\nDROP TABLE x";
        run_text(
            &Client::new(&server.url),
            text,
            "f.sql",
            true,
            &mut Vec::new(),
            &mut errors,
        )
        .unwrap_err();
        assert_eq!(
            String::from_utf8(errors).unwrap(),
            "error: unknown_view: f.sql: statement at line 3: view \"x\" does not exist\n"
        );
    }

    #[test]
    fn shell_commands() {
        let history = History::open(None);
        let mut out = Vec::new();
        assert!(matches!(
            command("\\q", &history, &mut out).unwrap(),
            Command::Quit
        ));
        assert!(matches!(
            command(" exit; ", &history, &mut out).unwrap(),
            Command::Quit
        ));
        assert!(matches!(
            command("SHOW TABLES;", &history, &mut out).unwrap(),
            Command::None
        ));
        assert!(matches!(
            command("clear", &history, &mut out).unwrap(),
            Command::Clear
        ));
        assert!(matches!(
            command(" clear;", &history, &mut out).unwrap(),
            Command::Clear
        ));
        assert!(command("\\nope", &history, &mut out).is_err());
    }
}
