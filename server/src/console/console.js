"use strict";
// The Kappa console (served as /console.js; the page allows no inline code).
//
// Everything shown comes from the JSON API of this server and is data, never
// markup: it reaches the page only through textContent (el), option values
// and input values. Nothing here uses innerHTML, outerHTML,
// insertAdjacentHTML, document.write or HTML strings (a test reads this file
// for them, and the page's Content-Security-Policy lets no inline script run).
//
// A token (auth = tokens) is what the user pastes: it is kept in this tab's
// sessionStorage only (never localStorage, never a cookie) and sent as
// `Authorization: Bearer` on every API call.
const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function fill(table, headers, rows) {
  table.replaceChildren();
  const head = el("tr");
  headers.forEach((h) => head.appendChild(el("th", h)));
  table.appendChild(head);
  rows.forEach((cells) => {
    const tr = el("tr");
    cells.forEach((c) => tr.appendChild(el("td", c === undefined ? "" : c, typeof c === "number" ? "num" : "")));
    table.appendChild(tr);
  });
}

// --- Token -----------------------------------------------------------------

const TOKEN_KEY = "kappa.token";

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

// The auth box: hidden until the server asks for a token (a 401) or one is held.
let tokenNeeded = false;

function showAuth(message, needed) {
  const box = $("auth");
  box.hidden = false;
  box.classList.toggle("needed", needed);
  $("auth-prompt").textContent = needed ? "This server needs a token" : "token";
  $("auth-state").textContent = message;
  $("forget-token").hidden = !token();
  if (needed && !tokenNeeded) $("token").focus();
  tokenNeeded = needed;
}

// Clears everything read with the previous token, so that nothing it was
// allowed to see stays on the page under another token or none.
function clearData() {
  ["topics", "views", "sql-result", "rows", "records", "review-counts", "review-examples"]
    .forEach((id) => $(id).replaceChildren());
  ["as-of", "read-state", "review-result"].forEach((id) => { $(id).textContent = ""; });
  options($("topic-pick"), []);
  options($("view-pick"), []);
  reviewed = null;
  $("review-state").textContent = "pick a table under Rows";
  ["diff", "promote", "rollback"].forEach((id) => { $(id).hidden = true; });
}

function useToken() {
  const typed = $("token").value.trim();
  if (!typed) return;
  sessionStorage.setItem(TOKEN_KEY, typed);
  $("token").value = "";
  clearData();
  showAuth("token set (kept in this tab only)", false);
  refresh().then(refreshReview);
}

function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  $("token").value = "";
  clearData();
  showAuth("token forgotten", false);
  refresh().then(refreshReview);
}

// --- API ---------------------------------------------------------------------

// A call to this server's API with the token, if any; the JSON answer, or an
// Error naming the status, code and the server's message. A 401 opens the
// token prompt; a 403 names the missing grant in the server's message.
async function api(path, options) {
  const opts = { ...(options || {}) };
  const headers = new Headers(opts.headers || {});
  const sent = token();
  if (sent) headers.set("Authorization", `Bearer ${sent}`);
  opts.headers = headers;
  opts.credentials = "omit";
  const res = await fetch(path, opts);
  const body = await res.json().catch(() => ({}));
  // An answer to a token the user has since replaced or forgotten is dropped.
  if (token() !== sent) throw new Error("the token changed while this was loading");
  if (!res.ok) {
    const e = body.error || {};
    if (res.status === 401) {
      showAuth(token() ? `the token was refused: ${e.message || res.statusText}` : "paste a token and press Use token", true);
    }
    throw new Error(`${res.status} ${e.code || ""}: ${e.message || res.statusText}`);
  }
  if (tokenNeeded) showAuth("token accepted (kept in this tab only)", false);
  return body;
}

function time(ms) {
  return ms === null || ms === undefined ? "" : new Date(ms).toISOString().replace(".000Z", "Z");
}

// Sets the options of a <select> to `names` (text and value), keeping the pick.
function options(pick, names) {
  if (names.join("\u0000") === [...pick.options].map((o) => o.value).join("\u0000")) return;
  const chosen = pick.value;
  pick.replaceChildren(...names.map((n) => { const o = el("option", n); o.value = n; return o; }));
  if (names.includes(chosen)) pick.value = chosen;
}

async function refresh() {
  try {
    const ready = await fetch("/ready");
    $("status").textContent = ready.ok ? "ready" : "degraded (see /ready)";
    $("status").className = "status " + (ready.ok ? "ok" : "bad");
  } catch (e) {
    $("status").textContent = "unreachable";
    $("status").className = "status bad";
    return;
  }
  try {
    const { topics } = await api("/v1/topics");
    fill($("topics"), ["topic", "partitions", "records", "bytes", "fsync"], topics.map((t) => [
      t.name,
      t.partitions.length,
      t.partitions.reduce((n, p) => n + (p.end_offset - p.start_offset), 0),
      t.partitions.reduce((n, p) => n + p.bytes, 0),
      t.config.fsync,
    ]));
    options($("topic-pick"), topics.map((t) => t.name));
  } catch (e) { fill($("topics"), ["error"], [[e.message]]); }
  try {
    const { views } = await api("/v1/views");
    fill($("views"), ["view", "kind", "status", "version", "lag", "watermark", "building"], views.map((v) => {
      const s = v.served_version || {};
      const b = v.building_version;
      const building = b && b.progress ? `v${b.version}: ${b.progress.done}/${b.progress.total}` : "";
      return [v.name, v.kind, v.status, s.version, s.lag, time(s.watermark), building];
    }));
    options($("view-pick"), views.filter((v) => v.kind === "table").map((v) => v.name));
  } catch (e) { fill($("views"), ["error"], [[e.message]]); }
}

// A rows answer (rows endpoint or a pull query) as a table, columns in SELECT order.
function rowsTable(answer) {
  const table = el("table");
  const rows = answer.rows || [];
  const windowed = rows.some((r) => r.window_start !== undefined && r.window_start !== null);
  const all = [...(answer.columns || [])];
  rows.forEach((r) => {
    if (r.row && typeof r.row === "object") Object.keys(r.row).forEach((k) => { if (!all.includes(k)) all.push(k); });
  });
  // Columns that only repeat the key or a window bound are shown once, up front.
  const repeats = (r, v) => v === r.key || (windowed && (v === r.window_start || v === r.window_end));
  const columns = all.filter((c) => !rows.length || !rows.every((r) => r.row && typeof r.row === "object" && repeats(r, r.row[c])));
  const headers = ["key"].concat(windowed ? ["window_start", "window_end"] : []).concat(columns);
  fill(table, headers, rows.map((r) => {
    const cells = [r.key];
    if (windowed) cells.push(time(r.window_start), time(r.window_end));
    columns.forEach((c) => {
      const v = r.row && typeof r.row === "object" ? r.row[c] : undefined;
      cells.push(v === undefined ? "" : (typeof v === "object" && v !== null ? JSON.stringify(v) : v));
    });
    return cells;
  }));
  return table;
}

function asOf(answer) {
  const a = answer.as_of || {};
  const offsets = (a.offsets || []).map((o) => `${o.partition}:${o.offset}`).join(" ");
  return `${(answer.rows || []).length} rows of ${answer.view} v${answer.version}, as of offsets ${offsets || "-"}` +
    (a.watermark !== null && a.watermark !== undefined ? `, watermark ${time(a.watermark)}` : "");
}

async function runSql() {
  const out = $("sql-result");
  out.replaceChildren(el("span", "running…", "muted"));
  try {
    const { results } = await api("/v1/statements", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ sql: $("sql").value }),
    });
    out.replaceChildren();
    results.forEach((r) => {
      if (r.statement === "SELECT") {
        out.appendChild(el("div", asOf(r), "muted"));
        out.appendChild(rowsTable(r));
      } else {
        out.appendChild(el("pre", JSON.stringify(r, null, 2)));
      }
    });
    refresh();
  } catch (e) {
    out.replaceChildren(el("pre", e.message, "bad"));
  }
}

async function loadRows() {
  const view = $("view-pick").value;
  if (!view) return;
  const params = new URLSearchParams({ limit: "200" });
  if ($("key").value) params.set("key", $("key").value);
  try {
    const answer = await api(`/v1/views/${encodeURIComponent(view)}/rows?${params}`);
    $("as-of").textContent = asOf(answer) + (answer.next_cursor ? " (first 200)" : "");
    $("rows").replaceChildren(rowsTable(answer));
  } catch (e) {
    $("as-of").textContent = "";
    $("rows").replaceChildren(el("pre", e.message, "bad"));
  }
}

// Records of one partition, as stored: key, value and headers shown as JSON text.
async function readRecords() {
  const topic = $("topic-pick").value;
  if (!topic) return;
  const partition = $("partition").value || "0";
  const params = new URLSearchParams({ max_records: "50" });
  if ($("offset").value.trim()) params.set("offset", $("offset").value.trim());
  try {
    const answer = await api(`/v1/topics/${encodeURIComponent(topic)}/partitions/${encodeURIComponent(partition)}/records?${params}`);
    const table = el("table");
    fill(table, ["offset", "timestamp", "key", "value", "headers"], answer.records.map((r) => [
      r.offset, time(r.timestamp), r.key === null ? "" : r.key, json(r.value), json(r.headers),
    ]));
    $("read-state").textContent = `${answer.records.length} records of ${answer.topic}/${answer.partition}, ` +
      `next offset ${answer.next_offset}, end ${answer.high_watermark}`;
    $("records").replaceChildren(table);
  } catch (e) {
    $("read-state").textContent = "";
    $("records").replaceChildren(el("pre", e.message, "bad"));
  }
}

// Review of a new version (issue 12): what changes between two versions,
// and the buttons that serve the new one or the previous one again.
let reviewed = null; // {view, base, candidate, promote, rollback} of the picked table

function reviewState(view) {
  const served = view.served_version.version;
  const build = view.building_version;
  const kept = view.grace_versions.map((g) => g.version);
  const previous = kept.length ? kept[kept.length - 1] : null;
  const parts = [`v${served} served`];
  if (build) {
    const p = build.progress || {};
    parts.push(build.ready
      ? `v${build.version} ${build.swap === "manual" ? "ready, waiting for promote" : "caught up"}`
      : `v${build.version} building (${p.done}/${p.total})`);
  }
  if (kept.length) parts.push(`kept: ${kept.map((v) => "v" + v).join(", ")}`);
  return {
    text: parts.join(" · "),
    // A build is compared with the served version; else what a rollback
    // would serve is compared with what is served.
    base: served,
    candidate: build ? build.version : previous,
    promote: build ? build.version : null,
    rollback: previous,
  };
}

async function refreshReview() {
  const name = $("view-pick").value;
  if (!name) return;
  try {
    const view = await api(`/v1/views/${encodeURIComponent(name)}`);
    const state = reviewState(view);
    if (reviewed && reviewed.view !== name) {
      $("review-counts").replaceChildren();
      $("review-examples").replaceChildren();
      $("review-result").textContent = "";
    }
    reviewed = { view: name, ...state };
    $("review-state").textContent = `${name}: ${state.text}`;
    $("diff").hidden = state.candidate === null;
    $("diff").textContent = state.candidate === null ? "" : `Show the differences v${state.base} → v${state.candidate}`;
    $("promote").hidden = state.promote === null;
    $("promote").textContent = `Promote v${state.promote}`;
    $("rollback").hidden = state.rollback === null;
    $("rollback").textContent = `Roll back to v${state.rollback}`;
  } catch (e) {
    $("review-state").textContent = e.message;
  }
}

function json(v) {
  return v === null || v === undefined ? "" : JSON.stringify(v);
}

async function showDiff() {
  if (!reviewed || reviewed.candidate === null) return;
  const { view, base, candidate } = reviewed;
  const params = new URLSearchParams({ base, candidate, limit: "50" });
  try {
    const d = await api(`/v1/views/${encodeURIComponent(view)}/diff?${params}`);
    const counts = el("table");
    fill(counts, ["added", "removed", "changed", "unchanged"], [[d.added, d.removed, d.changed, d.unchanged]]);
    counts.id = "diff-counts";
    $("review-counts").replaceChildren(counts);
    const examples = el("table");
    examples.id = "diff-examples";
    fill(examples, ["change", "key", "window_start", `v${d.base.version}`, `v${d.candidate.version}`],
      d.examples.map((x) => [x.change, x.key, time(x.window_start), json(x.base), json(x.candidate)]));
    $("review-examples").replaceChildren(examples);
  } catch (e) {
    $("review-counts").replaceChildren(el("pre", e.message, "bad"));
  }
}

async function serve(action) {
  if (!reviewed) return;
  try {
    const r = await api(`/v1/views/${encodeURIComponent(reviewed.view)}/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    $("review-result").textContent = `v${r.served_version} served (v${r.previous_version} kept)`;
  } catch (e) {
    $("review-result").textContent = e.message;
  }
  await refresh();
  await refreshReview();
}

$("diff").addEventListener("click", showDiff);
$("promote").addEventListener("click", () => serve("promote"));
$("rollback").addEventListener("click", () => serve("rollback"));
$("view-pick").addEventListener("change", refreshReview);
setInterval(refreshReview, 2000);

$("run").addEventListener("click", runSql);
$("sql").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) runSql(); });
$("load").addEventListener("click", loadRows);
$("read").addEventListener("click", readRecords);
$("use-token").addEventListener("click", useToken);
$("token").addEventListener("keydown", (e) => { if (e.key === "Enter") useToken(); });
$("forget-token").addEventListener("click", forgetToken);
if (token()) showAuth("token set (kept in this tab only)", false);
refresh().then(refreshReview);
setInterval(refresh, 2000);
