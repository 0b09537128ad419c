// --- SQL editor (sql.js) -------------------------------------------------------
//
// #/sql: statements run with POST /v1/statements. A SQL error shows the
// line it names with a caret under its column (and selects that place in
// the editor); SELECT, SHOW and DESCRIBE answers are tables; the statements
// run are kept in this tab's history (sessionStorage, like the token:
// statements can hold data, and nothing is kept beyond the tab).

const SQL_HISTORY_KEY = "kappa.sql-history";
const SQL_HISTORY_MAX = 50;

function sqlHistory() {
  try {
    const list = JSON.parse(sessionStorage.getItem(SQL_HISTORY_KEY) || "[]");
    return Array.isArray(list) ? list.filter((s) => typeof s === "string") : [];
  } catch (e) { return []; }
}

function remember(sql) {
  const list = [sql].concat(sqlHistory().filter((s) => s !== sql)).slice(0, SQL_HISTORY_MAX);
  sessionStorage.setItem(SQL_HISTORY_KEY, JSON.stringify(list));
  renderSqlHistory();
}

function renderSqlHistory() {
  const list = sqlHistory();
  $("sql-history").replaceChildren(...list.map((sql) => {
    const item = el("li");
    const button = el("button", sql.length > 140 ? sql.slice(0, 140) + "…" : sql, "history-entry");
    button.title = sql;
    button.addEventListener("click", () => { $("sql").value = sql; $("sql").focus(); });
    item.appendChild(button);
    return item;
  }));
  if (!list.length) $("sql-history").replaceChildren(el("li", "statements you run appear here", "muted"));
}

// The error's line of `sql` with a caret under its column:
//   line 2, column 8: message
//   2 | SELEC x FROM y;
//     |       ^
function caret(sql, line, column, message) {
  const lines = sql.split("\n");
  const text = lines[line - 1] === undefined ? "" : lines[line - 1];
  const gutter = String(line);
  // Characters, not UTF-16 units; a tab before the column stays a tab so
  // that the caret lines up in the same font.
  const before = Array.from(text).slice(0, Math.max(0, column - 1)).map((c) => (c === "\t" ? "\t" : " ")).join("");
  const block = el("pre", null, "caret bad");
  block.id = "sql-caret";
  block.dataset.line = String(line);
  block.dataset.column = String(column);
  block.append(
    el("span", `line ${line}, column ${column}: ${message}\n`, "caret-message"),
    el("span", `${gutter} | ${text}\n`, "caret-source"),
    el("span", `${" ".repeat(gutter.length)} | ${before}^`, "caret-mark"),
  );
  return block;
}

// Selects the character at line/column in the editor.
function selectAt(line, column) {
  const area = $("sql");
  const lines = area.value.split("\n");
  let index = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i++) index += lines[i].length + 1;
  const chars = Array.from(lines[line - 1] || "").slice(0, Math.max(0, column - 1)).join("");
  index += chars.length;
  area.focus();
  area.setSelectionRange(index, Math.min(area.value.length, index + 1));
}

// Where a view or a SHOW row reads: "topic", or "topic @ cluster" for a
// Kafka cluster's topic.
function sourceOf(topic, cluster) {
  return cluster ? `${topic} @ ${cluster}` : topic;
}

// SHOW rows: one column per field any row has (a source's cluster shown
// with its topic).
function showTable(rows) {
  const columns = [];
  rows.forEach((r) => Object.keys(r).forEach((k) => { if (!columns.includes(k) && k !== "source_cluster") columns.push(k); }));
  const value = (r, c) => (c === "source_topic" ? sourceOf(r[c], r.source_cluster) : r[c]);
  return tableOf(columns, rows.map((r) => columns.map((c) => {
    const v = value(r, c);
    return typeof v === "object" && v !== null ? json(v) : v;
  })));
}

// A DESCRIBE: columns, settings, the source declaration, as tables.
function describeResult(r) {
  const box = el("div", null, "describe");
  box.appendChild(el("h3", `${r.statement} ${r.name}`));
  if (r.view) {
    const v = r.view;
    box.appendChild(tableOf(["kind", "status", "source topic", "served version", "lag"],
      [[v.kind, v.status.replaceAll("_", " "), sourceOf(v.source_topic, v.source_cluster), `v${v.served_version.version}`, num(v.served_version.lag)]]));
  }
  if (r.columns) {
    box.appendChild(el("h4", "Columns"));
    box.appendChild(tableOf(["column", "type", "key"], r.columns.map((c) => [c.name, c.sql_type ? c.sql_type.type || json(c.sql_type) : "any", c.key ? "key" : ""])));
  }
  const pairs = (title, o) => {
    if (!o) return;
    box.appendChild(el("h4", title));
    box.appendChild(tableOf(["setting", "value"], Object.entries(o).map(([k, v]) => [k, typeof v === "object" && v !== null ? json(v) : v === null ? "none" : v])));
  };
  pairs("Settings", r.settings);
  pairs("Source", r.source);
  pairs("Defaults", r.defaults);
  return box;
}

function statementResult(r) {
  if (r.statement === "SELECT") {
    const box = el("div");
    box.append(el("div", asOf(r), "muted"), rowsTable(r));
    return box;
  }
  if (r.statement && r.statement.startsWith("SHOW")) {
    const box = el("div");
    box.append(el("div", `${r.statement}: ${int(r.rows.length)} rows`, "muted"), showTable(r.rows));
    return box;
  }
  if (r.statement === "DESCRIBE") return describeResult(r);
  if (r.name && r.status) {
    return el("div", `${r.statement} ${r.name}: ${r.status}${r.version !== undefined ? ` (v${r.version})` : ""}` +
      (r.topic_created ? ` · topic ${r.topic} created` : ""), "ok");
  }
  return el("pre", JSON.stringify(r, null, 2));
}

async function runSql() {
  const out = $("sql-result");
  const sql = $("sql").value;
  out.replaceChildren(el("span", "running…", "muted"));
  remember(sql);
  try {
    const { results } = await post("/v1/statements", { sql });
    out.replaceChildren(...results.map((r) => {
      const item = el("div", null, "result");
      item.appendChild(statementResult(r));
      return item;
    }));
    refreshPickers();
  } catch (e) {
    const d = e.details || {};
    if (Number.isInteger(d.line) && Number.isInteger(d.column)) {
      out.replaceChildren(caret(sql, d.line, d.column, d.message || e.message));
      selectAt(d.line, d.column);
    } else {
      showError(out, e);
    }
  }
}

pages.sql = {
  show() { renderSqlHistory(); },
  refresh() {},
};

clearers.push(() => { $("sql-result").replaceChildren(); });

$("run").addEventListener("click", runSql);
$("sql").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) runSql(); });
$("clear-history").addEventListener("click", () => { sessionStorage.removeItem(SQL_HISTORY_KEY); renderSqlHistory(); });
