// --- View page (view.js) -------------------------------------------------------
//
// #/view/NAME: status with a clear warning when the view is not keeping up,
// failed or waits for its source (a cluster that cannot be read); where its
// input and output topics live (the built-in log or a cluster); a build's
// (or a first catch-up's) progress bar with rate and ETA; the served
// version's numbers and per-partition offsets and lag; the SQL of every
// version; replay and drop; the review of a new version (diff, promote,
// roll back); and a rows browser with paging and key search.

const ROWS_PER_PAGE = 50;
const BUILD_REFRESH_MS = 500;

let viewShown = "";
let viewData = null;

// --- Status, progress, details ---

function viewWarning(v) {
  const s = v.served_version || {};
  const b = v.building_version;
  if (v.status === "failed") {
    const f = v.failure;
    return ["bad", `The served version v${s.version} stopped: ${f ? f.reason : "see /ready"}` +
      (v.retry ? ` · retry ${int(v.retry.attempts)} at ${time(v.retry.next_attempt_ms)}` : "")];
  }
  if (v.status === "waiting_for_source") {
    const f = v.failure;
    const where = v.source_cluster ? `cluster ${v.source_cluster}` : `topic ${v.source_topic}`;
    return ["bad", `Waiting for the source: v${s.version} stopped because ${where} cannot be read: ` +
      `${f ? sourceReason(f.reason) : "see /ready"}; it is retried and resumes from its last commit` +
      (v.retry ? ` · retry ${int(v.retry.attempts)} at ${time(v.retry.next_attempt_ms)}` : "")];
  }
  if (v.status === "not_keeping_up") {
    const who = b && b.not_keeping_up ? `The build of v${b.version}` : `v${s.version}`;
    return ["bad", `Not keeping up: ${who} processed fewer records than arrived over the last minute ` +
      "(its lag grew); at this rate it will not catch up. Give it more processor threads, simplify the query, or drop it."];
  }
  if (s.catching_up) {
    return ["warn", `v${s.version} is catching up with its input: rows are partial until it reaches the end once.`];
  }
  return null;
}

// A waiting view's failure reason without the "waiting for the source: "
// its status already says.
function sourceReason(reason) {
  const prefix = "waiting for the source: ";
  return reason.startsWith(prefix) ? reason.slice(prefix.length) : reason;
}

// A topic as a fact: a link to its page when it is in the built-in log,
// else "topic on cluster name" (the topic page reads the built-in log only).
function topicFact(topic, cluster) {
  if (!topic) return "—";
  if (cluster) return `${topic} on cluster ${cluster}`;
  return link(`#/topic/${encodeURIComponent(topic)}`, topic);
}

function renderProgress(v) {
  const box = $("build-progress");
  const p = viewProgress(v);
  box.hidden = !p;
  if (!p) return;
  const [label, progress] = p;
  const bar = $("build-bar");
  bar.max = Math.max(1, progress.total);
  bar.value = Math.min(progress.done, progress.total);
  $("build-progress-text").textContent = progressText(label, progress);
  const b = v.building_version;
  $("build-progress-note").textContent = b && b.ready && b.swap === "manual"
    ? "caught up: it waits for Promote below" : b ? `swap: ${b.swap} · started from ${json(b.start)}` : "";
}

function renderDetails(v) {
  const s = v.served_version;
  const rows = [
    ["status", { text: v.status.replaceAll("_", " "), cls: `state-${v.status}` }],
    ["kind", v.kind],
    ["source topic", topicFact(v.source_topic, v.source_cluster)],
    ["output topic", topicFact(v.output_topic, v.output_cluster)],
    ["served version", `v${s.version} since ${time(s.started_ms)}`],
    ["lag", `${int(s.lag)} records`],
    ["watermark", s.watermark === null ? "none yet" : time(s.watermark)],
    ["state size", bytes(s.state_bytes)],
    ["processed", `${int(s.processed)} records (since this server started it)`],
    ["late", int(s.late)],
    ["invalid", int(s.invalid)],
    ["parallelism", int(s.parallelism)],
    ["failure", v.failure ? `v${v.failure.version} at ${time(v.failure.at_ms)}: ${v.failure.reason}` : "none"],
  ];
  fill($("view-details"), ["", ""], rows);
  $("view-details").rows[0].remove();
  const b = v.building_version;
  const headers = ["partition", "committed", "end", "lag"].concat(b ? [`v${b.version} committed`, `v${b.version} lag`] : []);
  fill($("view-partitions"), headers, s.partitions.map((p, i) => {
    const bp = b ? b.partitions[i] : null;
    return [num(p.partition), num(p.committed), num(p.end), num(p.lag)].concat(b ? [bp ? num(bp.committed) : "", bp ? num(bp.lag) : ""] : []);
  }));
}

function renderVersions(v) {
  const s = v.served_version;
  const list = [];
  if (v.building_version) {
    const b = v.building_version;
    list.push([`v${b.version}`, b.ready ? "built, waiting" : "building", time(b.started_ms), b.sql]);
  }
  list.push([`v${s.version}`, "served", time(s.started_ms), s.sql]);
  [...v.grace_versions].reverse().forEach((g) => list.push([`v${g.version}`, `kept until ${time(g.readable_until_ms)}`, "", g.sql]));
  fill($("view-versions"), ["version", "role", "started", "SQL"], list.map(([ver, role, started, sql]) =>
    [ver, role, started, el("pre", sql || "(defined by a plan)", "sql")]));
}

async function refreshView() {
  const name = viewShown;
  if (!name) {
    if (viewList.length) pages.view.show("");
    else $("view-title").textContent = "no views yet";
    return;
  }
  try {
    const v = await api(`/v1/views/${encodeURIComponent(name)}`);
    if (name !== viewShown) return;
    renderView(v);
    // A build moves fast: look again sooner than the page's refresh.
    if (v.building_version && !v.building_version.ready) soon();
  } catch (e) {
    viewData = null;
    $("view-title").textContent = name;
    $("view-warning").hidden = false;
    $("view-warning").className = "banner bad";
    $("view-warning").textContent = e.message;
  }
  await refreshViewChart(name);
}

// Shows view `v` (a GET /v1/views/{view} answer) on the page.
function renderView(v) {
  viewData = v;
  $("view-title").textContent = `${v.kind === "table" ? "Table" : "Stream"} ${v.name}`;
  const warning = viewWarning(v);
  $("view-warning").hidden = !warning;
  if (warning) {
    $("view-warning").className = `banner ${warning[0]}`;
    $("view-warning").textContent = warning[1];
  }
  renderProgress(v);
  renderDetails(v);
  renderVersions(v);
  $("rows-section").hidden = v.kind !== "table";
  renderReview(v);
}

// The view's rate and lag over the last 15 minutes (hidden without the
// `metrics` grant).
async function refreshViewChart(name) {
  const h = await loadHistory();
  const series = h && h.views.find((s) => s.name === name);
  $("view-chart-box").hidden = !series;
  if (!series || name !== viewShown) return;
  drawChart($("view-chart-rate"), $("view-chart-rate-legend"), h.times_ms,
    [{ name: "processed", values: series.records_per_second }], (x) => perSecond(x));
  drawChart($("view-chart-lag"), $("view-chart-lag-legend"), h.times_ms,
    [{ name: "lag", values: series.lag }, { name: "build lag", values: series.build_lag }], (x) => `${dec(x)} rec`);
}

let soonTimer = null;

function soon() {
  if (soonTimer) return;
  soonTimer = setTimeout(() => {
    soonTimer = null;
    if (current.page === "view") refreshView();
  }, BUILD_REFRESH_MS);
}

// --- Replay and drop ---

// A button that acts on a second click within a few seconds.
function twoClicks(button, label, armedLabel, action) {
  let armed = null;
  button.addEventListener("click", () => {
    if (!armed) {
      button.textContent = armedLabel();
      button.classList.add("danger");
      armed = setTimeout(() => { armed = null; button.textContent = label; button.classList.remove("danger"); }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.textContent = label;
    button.classList.remove("danger");
    action();
  });
}

async function replay() {
  const out = $("action-result");
  try {
    const r = await post(`/v1/views/${encodeURIComponent(viewShown)}/replay`,
      { from: "earliest", swap: $("replay-manual").checked ? "manual" : "auto" });
    out.textContent = r.building_version ? `building v${r.building_version} from the earliest records` : json(r);
  } catch (e) { out.textContent = e.message; }
  refreshView();
}

async function dropView() {
  const out = $("action-result");
  const kind = viewData && viewData.kind === "stream" ? "STREAM" : "TABLE";
  try {
    await post("/v1/statements", { sql: `DROP ${kind} ${viewShown};` });
    out.textContent = `${viewShown} dropped`;
    await refreshPickers();
    go("#/overview");
  } catch (e) { out.textContent = e.message; }
}

// --- Review of a new version (issue 12) ---

let reviewed = null; // {view, base, candidate, promote, rollback}

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
      : `v${build.version} building (${int(p.done)}/${int(p.total)})`);
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

function renderReview(view) {
  const state = reviewState(view);
  if (reviewed && (reviewed.view !== view.name || reviewed.candidate !== state.candidate)) {
    $("review-counts").replaceChildren();
    $("review-examples").replaceChildren();
  }
  if (reviewed && reviewed.view !== view.name) $("review-result").textContent = "";
  reviewed = { view: view.name, ...state };
  $("review-state").textContent = `${view.name}: ${state.text}`;
  $("diff").hidden = state.candidate === null;
  $("diff").textContent = state.candidate === null ? "" : `Show the differences v${state.base} → v${state.candidate}`;
  $("promote").hidden = state.promote === null;
  $("promote").textContent = `Promote v${state.promote}`;
  $("rollback").hidden = state.rollback === null;
  $("rollback").textContent = `Roll back to v${state.rollback}`;
}

async function showDiff() {
  if (!reviewed || reviewed.candidate === null) return;
  const { view, base, candidate } = reviewed;
  const params = new URLSearchParams({ base, candidate, limit: "50" });
  try {
    const d = await api(`/v1/views/${encodeURIComponent(view)}/diff?${params}`);
    $("review-counts").replaceChildren(tableOf(["added", "removed", "changed", "unchanged"],
      [[d.added, d.removed, d.changed, d.unchanged]], "diff-counts"));
    $("review-examples").replaceChildren(tableOf(["change", "key", "window_start", `v${d.base.version}`, `v${d.candidate.version}`],
      d.examples.map((x) => [x.change, x.key, time(x.window_start), json(x.base), json(x.candidate)]), "diff-examples"));
  } catch (e) {
    showError($("review-counts"), e);
  }
}

async function serve(action) {
  if (!reviewed) return;
  try {
    const r = await post(`/v1/views/${encodeURIComponent(reviewed.view)}/${action}`, {});
    $("review-result").textContent = `v${r.served_version} served (v${r.previous_version} kept)`;
  } catch (e) {
    $("review-result").textContent = e.message;
  }
  await refreshView();
}

// --- Rows browser ---

// Cursors of the pages shown so far ("" = the first): Previous pops one.
let rowCursors = [];
let nextCursor = null;

// A rows answer (rows endpoint or a pull query) as a table, columns in SELECT order.
function rowsTable(answer) {
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
  return tableOf(headers, rows.map((r) => {
    const cells = [r.key];
    if (windowed) cells.push(time(r.window_start), time(r.window_end));
    columns.forEach((c) => {
      const v = r.row && typeof r.row === "object" ? r.row[c] : undefined;
      cells.push(v === undefined ? "" : (typeof v === "object" && v !== null ? JSON.stringify(v) : v));
    });
    return cells;
  }));
}

function asOf(answer) {
  const a = answer.as_of || {};
  const offsets = (a.offsets || []).map((o) => `${o.partition}:${o.offset}`).join(" ");
  const n = (answer.rows || []).length;
  return `${int(n)} ${n === 1 ? "row" : "rows"} of ${answer.view} v${answer.version}, as of offsets ${offsets || "-"}` +
    (a.watermark !== null && a.watermark !== undefined ? `, watermark ${time(a.watermark)}` : "") +
    (answer.catching_up ? " · still catching up: partial" : "");
}

async function loadRows(cursor) {
  const view = viewShown;
  if (!view) return;
  const params = new URLSearchParams({ limit: String(ROWS_PER_PAGE) });
  const key = $("key").value;
  if (key) params.set($("key-mode").value, key);
  if (cursor) params.set("cursor", cursor);
  try {
    const answer = await api(`/v1/views/${encodeURIComponent(view)}/rows?${params}`);
    nextCursor = answer.next_cursor || null;
    $("as-of").textContent = `page ${rowCursors.length} · ${asOf(answer)}`;
    $("rows").replaceChildren(rowsTable(answer));
  } catch (e) {
    nextCursor = null;
    $("as-of").textContent = "";
    showError($("rows"), e);
  }
  $("rows-next").disabled = !nextCursor;
  $("rows-prev").disabled = rowCursors.length <= 1;
}

function firstRows() { rowCursors = [""]; loadRows(""); }
function nextRows() { if (nextCursor) { rowCursors.push(nextCursor); loadRows(nextCursor); } }
function previousRows() {
  if (rowCursors.length > 1) { rowCursors.pop(); loadRows(rowCursors[rowCursors.length - 1]); }
}

pages.view = {
  show(name) {
    const target = name || viewShown || (viewList[0] && viewList[0].name) || "";
    if (target !== viewShown) {
      viewData = null;
      rowCursors = [];
      nextCursor = null;
      ["rows", "review-counts", "review-examples"].forEach((id) => $(id).replaceChildren());
      ["as-of", "action-result", "review-result"].forEach((id) => { $(id).textContent = ""; });
      $("rows-next").disabled = true;
      $("rows-prev").disabled = true;
    }
    viewShown = target;
    if (current.page === "view") current.arg = target;
    if (!name && target) history.replaceState(null, "", `#/view/${encodeURIComponent(target)}`);
    this.refresh();
  },
  refresh: refreshView,
};

clearers.push(() => {
  viewData = null;
  reviewed = null;
  rowCursors = [];
  ["rows", "review-counts", "review-examples", "view-details", "view-partitions", "view-versions"]
    .forEach((id) => $(id).replaceChildren());
  ["as-of", "action-result", "review-result", "review-state"].forEach((id) => { $(id).textContent = ""; });
  ["diff", "promote", "rollback", "build-progress", "view-warning"].forEach((id) => { $(id).hidden = true; });
});

$("load").addEventListener("click", firstRows);
$("key").addEventListener("keydown", (e) => { if (e.key === "Enter") firstRows(); });
$("rows-next").addEventListener("click", nextRows);
$("rows-prev").addEventListener("click", previousRows);
$("diff").addEventListener("click", showDiff);
$("promote").addEventListener("click", () => serve("promote"));
$("rollback").addEventListener("click", () => serve("rollback"));
twoClicks($("replay"), "Replay from the earliest records", () => `Click again to rebuild ${viewShown}`, replay);
twoClicks($("drop"), "Drop…", () => `Click again to drop ${viewShown}`, dropView);
