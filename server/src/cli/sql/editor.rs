//! Line input of the SQL shell: a small line editor for terminals (cursor
//! keys, up/down history recall, Ctrl-A/E/U/K/C/D) and plain line reads for
//! anything else (pipes, files), plus the history kept in a file.
//!
//! The editor puts the terminal in non-canonical, no-echo mode only while a
//! line is read and restores it before returning (a guard restores it on
//! every path). Lines wider than the terminal are redrawn imperfectly; the
//! text is right.

use std::fs::OpenOptions;
use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::path::PathBuf;

/// Most history entries kept (in memory and in the file).
pub const MAX_HISTORY: usize = 1000;

/// The statements entered before, oldest first, and the file they live in.
#[derive(Debug, Default)]
pub struct History {
    entries: Vec<String>,
    file: Option<PathBuf>,
}

impl History {
    /// History kept in `file` (loaded now; a missing or unreadable file is
    /// an empty history), or only in memory when `file` is None.
    pub fn open(file: Option<PathBuf>) -> Self {
        let mut entries: Vec<String> = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .map(|text| {
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let excess = entries.len().saturating_sub(MAX_HISTORY);
        entries.drain(..excess);
        History { entries, file }
    }

    /// `$KAPPA_HISTORY`, else `~/.kappa_history`; None without a home.
    pub fn default_file() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("KAPPA_HISTORY") {
            return Some(PathBuf::from(path));
        }
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".kappa_history"))
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Adds an entry (its lines joined by spaces) unless it repeats the last
    /// one, and appends it to the file. A file that cannot be written only
    /// loses the history.
    pub fn add(&mut self, entry: &str) {
        let entry = entry.split_whitespace().collect::<Vec<_>>().join(" ");
        if entry.is_empty() || self.entries.last() == Some(&entry) {
            return;
        }
        self.entries.push(entry.clone());
        if self.entries.len() > MAX_HISTORY {
            self.entries.remove(0);
            self.rewrite();
        } else if let Some(file) = &self.file {
            let appended = OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .and_then(|mut f| writeln!(f, "{entry}"));
            if appended.is_err() {
                self.file = None;
            }
        }
    }

    fn rewrite(&mut self) {
        if let Some(file) = &self.file {
            let text: String = self.entries.iter().map(|e| format!("{e}\n")).collect();
            if std::fs::write(file, text).is_err() {
                self.file = None;
            }
        }
    }
}

/// What a read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// A line, without its newline.
    Line(String),
    /// Ctrl-C: the line typed so far was dropped.
    Interrupted,
    /// End of input (Ctrl-D on an empty line, or the end of a pipe).
    Eof,
}

/// Reads lines: edited on a terminal, plain otherwise.
pub struct LineReader {
    interactive: bool,
    stdin: io::Stdin,
}

impl LineReader {
    /// A reader of standard input; it edits lines when stdin and stdout
    /// are terminals.
    pub fn new() -> Self {
        LineReader {
            interactive: io::stdin().is_terminal() && io::stdout().is_terminal(),
            stdin: io::stdin(),
        }
    }

    /// True when lines are read from a terminal.
    pub fn is_interactive(&self) -> bool {
        self.interactive
    }

    /// Reads one line, showing `prompt` on a terminal; `history` is what
    /// the up and down keys recall.
    pub fn read(&mut self, prompt: &str, history: &[String]) -> io::Result<Input> {
        if !self.interactive {
            let mut line = String::new();
            return Ok(match self.stdin.lock().read_line(&mut line)? {
                0 => Input::Eof,
                _ => Input::Line(line.trim_end_matches(['\n', '\r']).to_string()),
            });
        }
        let _raw = raw::RawMode::enter()?;
        let mut editor = Editor::new(prompt, history);
        let mut out = io::stdout();
        editor.redraw(&mut out)?;
        let mut stdin = self.stdin.lock();
        let mut byte = [0u8; 1];
        let mut pending = Vec::new();
        loop {
            if stdin.read(&mut byte)? == 0 {
                return Ok(Input::Eof);
            }
            pending.push(byte[0]);
            let Some(key) = decode(&mut pending) else {
                continue;
            };
            if let Some(done) = editor.key(key) {
                write!(out, "\r\n")?;
                out.flush()?;
                return Ok(done);
            }
            editor.redraw(&mut out)?;
        }
    }
}

impl Default for LineReader {
    fn default() -> Self {
        LineReader::new()
    }
}

/// A key press.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Char(char),
    Enter,
    Backspace,
    Delete,
    Left,
    Right,
    Up,
    Down,
    Home,
    End,
    /// Ctrl + this letter (lower case).
    Ctrl(char),
    /// A sequence this editor ignores.
    Ignored,
}

/// Decodes the key in `pending` once it is complete (and clears it);
/// None while more bytes are needed.
fn decode(pending: &mut Vec<u8>) -> Option<Key> {
    let key = match pending.as_slice() {
        [b'\r' | b'\n'] => Key::Enter,
        [0x7f | 0x08] => Key::Backspace,
        [0x1b] | [0x1b, b'[' | b'O'] => return None,
        [0x1b, b'[' | b'O', rest @ ..] => {
            let last = *rest.last()?;
            if !(0x40..=0x7e).contains(&last) {
                if rest.len() > 8 {
                    pending.clear();
                    return Some(Key::Ignored);
                }
                return None;
            }
            match rest {
                [b'A'] => Key::Up,
                [b'B'] => Key::Down,
                [b'C'] => Key::Right,
                [b'D'] => Key::Left,
                [b'H'] | [b'1', b'~'] | [b'7', b'~'] => Key::Home,
                [b'F'] | [b'4', b'~'] | [b'8', b'~'] => Key::End,
                [b'3', b'~'] => Key::Delete,
                _ => Key::Ignored,
            }
        }
        [0x1b, _] => Key::Ignored,
        [b] if *b < 0x20 => Key::Ctrl((b + b'a' - 1) as char),
        bytes => match std::str::from_utf8(bytes) {
            Ok(s) => s.chars().next().map_or(Key::Ignored, Key::Char),
            Err(e) if e.error_len().is_none() && bytes.len() < 4 => return None,
            Err(_) => Key::Ignored,
        },
    };
    pending.clear();
    Some(key)
}

/// The line being edited.
struct Editor<'a> {
    prompt: &'a str,
    history: &'a [String],
    line: Vec<char>,
    cursor: usize,
    /// Index into `history` while recalling; `history.len()` = the new line.
    recall: usize,
    /// The new line, kept while recalling older ones.
    draft: Vec<char>,
}

impl<'a> Editor<'a> {
    fn new(prompt: &'a str, history: &'a [String]) -> Self {
        Editor {
            prompt,
            history,
            line: Vec::new(),
            cursor: 0,
            recall: history.len(),
            draft: Vec::new(),
        }
    }

    /// Applies a key; Some when the read is over.
    fn key(&mut self, key: Key) -> Option<Input> {
        match key {
            Key::Enter => return Some(Input::Line(self.line.iter().collect())),
            Key::Ctrl('c') => return Some(Input::Interrupted),
            Key::Ctrl('d') if self.line.is_empty() => return Some(Input::Eof),
            Key::Ctrl('d') | Key::Delete if self.cursor < self.line.len() => {
                self.line.remove(self.cursor);
            }
            Key::Char(c) => {
                self.line.insert(self.cursor, c);
                self.cursor += 1;
            }
            Key::Backspace | Key::Ctrl('h') if self.cursor > 0 => {
                self.cursor -= 1;
                self.line.remove(self.cursor);
            }
            Key::Left | Key::Ctrl('b') => self.cursor = self.cursor.saturating_sub(1),
            Key::Right | Key::Ctrl('f') => self.cursor = (self.cursor + 1).min(self.line.len()),
            Key::Home | Key::Ctrl('a') => self.cursor = 0,
            Key::End | Key::Ctrl('e') => self.cursor = self.line.len(),
            Key::Ctrl('u') => {
                self.line.drain(..self.cursor);
                self.cursor = 0;
            }
            Key::Ctrl('k') => self.line.truncate(self.cursor),
            Key::Up | Key::Ctrl('p') => self.recall_entry(-1),
            Key::Down | Key::Ctrl('n') => self.recall_entry(1),
            _ => {}
        }
        None
    }

    fn recall_entry(&mut self, step: isize) {
        let target = self.recall as isize + step;
        if target < 0 || target > self.history.len() as isize {
            return;
        }
        if self.recall == self.history.len() {
            self.draft = self.line.clone();
        }
        self.recall = target as usize;
        self.line = match self.history.get(self.recall) {
            Some(entry) => entry.chars().collect(),
            None => self.draft.clone(),
        };
        self.cursor = self.line.len();
    }

    fn redraw(&self, out: &mut impl Write) -> io::Result<()> {
        let line: String = self.line.iter().collect();
        write!(out, "\r{}{line}\x1b[K", self.prompt)?;
        let back = self.line.len() - self.cursor;
        if back > 0 {
            write!(out, "\x1b[{back}D")?;
        }
        out.flush()
    }
}

/// Terminal mode switching (termios), Unix only.
mod raw {
    use std::io;

    /// While alive, stdin is in non-canonical, no-echo mode.
    pub struct RawMode {
        saved: libc::termios,
    }

    impl RawMode {
        /// Switches stdin's terminal to character-at-a-time input.
        pub fn enter() -> io::Result<RawMode> {
            // SAFETY: termios is plain data; tcgetattr fills it for fd 0.
            let mut saved: libc::termios = unsafe { std::mem::zeroed() };
            // SAFETY: fd 0 and a valid pointer to a termios.
            if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let mut raw = saved;
            raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
            raw.c_iflag &= !(libc::IXON | libc::ICRNL);
            raw.c_cc[libc::VMIN] = 1;
            raw.c_cc[libc::VTIME] = 0;
            // SAFETY: fd 0 and a valid termios derived from the current one.
            if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSADRAIN, &raw) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(RawMode { saved })
        }
    }

    impl Drop for RawMode {
        fn drop(&mut self) {
            // SAFETY: restores the settings read in `enter` on the same fd.
            unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSADRAIN, &self.saved) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bytes: &[u8]) -> Vec<Key> {
        let mut pending = Vec::new();
        let mut out = Vec::new();
        for b in bytes {
            pending.push(*b);
            if let Some(k) = decode(&mut pending) {
                out.push(k);
            }
        }
        out
    }

    #[test]
    fn decodes_keys() {
        assert_eq!(
            keys(b"a\x1b[A\x1b[B\x1b[3~\x1bOH\x7f\r\x03"),
            vec![
                Key::Char('a'),
                Key::Up,
                Key::Down,
                Key::Delete,
                Key::Home,
                Key::Backspace,
                Key::Enter,
                Key::Ctrl('c')
            ]
        );
        assert_eq!(keys("é".as_bytes()), vec![Key::Char('é')]);
        assert_eq!(keys(b"\x1b[1;5C"), vec![Key::Ignored]);
    }

    fn type_keys(history: &[String], keys: &[Key]) -> Option<Input> {
        let mut editor = Editor::new("> ", history);
        keys.iter().find_map(|k| editor.key(*k))
    }

    #[test]
    fn edits_and_recalls_history() {
        let history = vec!["SHOW TABLES;".to_string(), "SHOW VIEWS;".to_string()];
        use Key::*;
        assert_eq!(
            type_keys(&history, &[Up, Up, Enter]),
            Some(Input::Line("SHOW TABLES;".into()))
        );
        assert_eq!(
            type_keys(&history, &[Char('x'), Up, Down, Char('y'), Enter]),
            Some(Input::Line("xy".into()))
        );
        assert_eq!(
            type_keys(
                &history,
                &[Char('a'), Char('c'), Left, Char('b'), Home, Delete, Enter]
            ),
            Some(Input::Line("bc".into()))
        );
        assert_eq!(type_keys(&history, &[Ctrl('d')]), Some(Input::Eof));
        assert_eq!(
            type_keys(&history, &[Char('a'), Ctrl('c')]),
            Some(Input::Interrupted)
        );
    }

    #[test]
    fn history_file_keeps_single_line_entries() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("history");
        let mut history = History::open(Some(file.clone()));
        history.add("SELECT *\n  FROM v;");
        history.add("SELECT * FROM v;");
        history.add("  ");
        assert_eq!(history.entries(), ["SELECT * FROM v;"]);
        let reopened = History::open(Some(file));
        assert_eq!(reopened.entries(), ["SELECT * FROM v;"]);
    }
}
