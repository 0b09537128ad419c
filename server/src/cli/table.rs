//! Plain-text tables for human-readable output: a header row, columns
//! separated by two spaces, numeric columns right-aligned.

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Pad on the right (text).
    Left,
    /// Pad on the left (numbers).
    Right,
}

/// A table built row by row and rendered to a string.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with the given `(header, alignment)` columns.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Table {
            headers: columns.iter().map(|(h, _)| h.to_string()).collect(),
            aligns: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are empty and extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// Renders the table, one line per row, each ending in `\n`, no trailing spaces.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|c| {
                std::iter::once(&self.headers[c])
                    .chain(self.rows.iter().map(|r| &r[c]))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(widths[c] - cell.chars().count());
                match self.aligns[c] {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut table = Table::new(&[("TOPIC", Align::Left), ("PARTITIONS", Align::Right)]);
        table.row(vec!["orders".into(), "3".into()]);
        table.row(vec!["a".into(), "12".into()]);
        assert_eq!(
            table.render(),
            "TOPIC   PARTITIONS\norders           3\na               12\n"
        );
    }

    #[test]
    fn empty_table_is_just_the_header_and_short_rows_are_padded() {
        let mut table = Table::new(&[("A", Align::Left), ("B", Align::Left)]);
        assert_eq!(table.render(), "A  B\n");
        table.row(vec!["xyz".into()]);
        assert_eq!(table.render(), "A    B\nxyz\n");
    }
}
