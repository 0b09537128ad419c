// --- Overview (overview.js) ----------------------------------------------------
//
// Charts of the last 15 minutes (GET /v1/history: produce and consume
// throughput per topic, processing rate and lag per view), the topics and
// the views with links to their pages.

const CHARTS = [
  { id: "chart-produce", of: "topics", field: "records_per_second", format: (v) => perSecond(v) },
  { id: "chart-consume", of: "topics", field: "consumed_per_second", format: (v) => perSecond(v) },
  { id: "chart-view-rate", of: "views", field: "records_per_second", format: (v) => perSecond(v) },
  { id: "chart-view-lag", of: "views", field: "lag", format: (v) => `${dec(v)} rec` },
];

let historyData = null;

// Lines one chart draws at most: the busiest series of the last minute.
const MAX_LINES = 8;

// The MAX_LINES series with the highest values over the last 60 samples.
function busiest(series) {
  const recent = (s) => s.values.slice(-60).reduce((m, v) => (v !== null && v > m ? v : m), -1);
  return [...series].sort((a, b) => recent(b) - recent(a) || a.name.localeCompare(b.name)).slice(0, MAX_LINES);
}

function drawCharts() {
  if (!historyData) return;
  CHARTS.forEach((c) => {
    const all = historyData[c.of].map((s) => ({ name: s.name, values: s[c.field] }));
    const legend = $(`${c.id}-legend`);
    drawChart($(c.id), legend, historyData.times_ms, busiest(all), c.format);
    if (all.length > MAX_LINES) legend.appendChild(el("span", `+${int(all.length - MAX_LINES)} more (the busiest are drawn)`, "muted"));
  });
  const n = historyData.times_ms.length;
  $("history-state").textContent = n
    ? `last ${duration(historyData.times_ms[n - 1] - historyData.times_ms[0])} · one sample a second, up to ${duration(historyData.capacity * historyData.interval_ms)}`
    : "no samples yet";
}

// The history (GET /v1/history), or null with the error in #history-state.
// Once loaded, only the samples after the newest one held are asked for
// and added (mergeHistory).
async function loadHistory() {
  const held = historyData;
  const last = held && held.times_ms.length ? held.times_ms[held.times_ms.length - 1] : null;
  try {
    const answer = await api(last === null ? "/v1/history" : `/v1/history?since_ms=${last}`);
    // Another load may have finished meanwhile: add to what it left only
    // what it did not add already.
    historyData = historyData === held ? (last === null ? answer : mergeHistory(held, answer)) : historyData;
  } catch (e) {
    historyData = null;
    $("history-state").textContent = `history: ${e.message}`;
  }
  return historyData;
}

// `held` followed by `added` (the samples after it), as one history of at
// most `capacity` samples; a series neither has a value in any more is left out.
function mergeHistory(held, added) {
  const n = held.times_ms.length;
  const m = added.times_ms.length;
  const drop = Math.max(0, n + m - added.capacity);
  const joined = (a, b, fields) => {
    const byName = new Map();
    a.forEach((s) => byName.set(s.name, [s, null]));
    b.forEach((s) => byName.set(s.name, [(byName.get(s.name) || [null])[0], s]));
    const out = [];
    [...byName.keys()].sort().forEach((name) => {
      const [old, add] = byName.get(name);
      const series = { name };
      fields.forEach((f) => {
        const before = old ? old[f] : new Array(n).fill(null);
        const after = add ? add[f] : new Array(m).fill(null);
        series[f] = before.concat(after).slice(drop);
      });
      if (fields.some((f) => series[f].some((v) => v !== null))) out.push(series);
    });
    return out;
  };
  return {
    ...added,
    times_ms: held.times_ms.concat(added.times_ms).slice(drop),
    topics: joined(held.topics, added.topics, ["records_per_second", "bytes_per_second", "consumed_per_second"]),
    views: joined(held.views, added.views, ["records_per_second", "lag", "build_lag", "status"]),
  };
}

async function refreshHistory() {
  if (await loadHistory()) drawCharts();
}

async function refreshTopics() {
  try {
    const { topics } = await api("/v1/topics");
    fill($("topics"), ["topic", "partitions", "records", "size", "retention"], topics.map((t) => [
      link(`#/topic/${encodeURIComponent(t.name)}`, t.name),
      num(t.partitions.length),
      num(t.partitions.reduce((n, p) => n + (p.end_offset - p.start_offset), 0)),
      num(t.partitions.reduce((n, p) => n + p.bytes, 0), bytes),
      retention(t.config),
    ]));
  } catch (e) { fill($("topics"), ["error"], [[e.message]]); }
}

// A topic's retention: "forever", "7 d 0 h", "1.0 GB per partition".
function retention(config) {
  const parts = [];
  if (config.retention_ms !== null && config.retention_ms !== undefined) parts.push(duration(config.retention_ms));
  if (config.retention_bytes !== null && config.retention_bytes !== undefined) parts.push(`${bytes(config.retention_bytes)} per partition`);
  return parts.length ? parts.join(", ") : "forever";
}

// A version's progress as one line: "v2 building: 1,234 / 5,000 records
// (24.7%) · 1,234 rec/s · ETA 3 s".
function progressText(label, p) {
  const pct = p.total > 0 ? (100 * p.done) / p.total : 100;
  const eta = p.done >= p.total ? "ETA done" : p.eta_ms === null || p.eta_ms === undefined ? "ETA unknown" : `ETA ${duration(p.eta_ms)}`;
  return `${label}: ${int(p.done)} / ${int(p.total)} records (${ONE_DECIMAL.format(pct)}%) · ${perSecond(p.rate_records_per_second)} · ${eta}`;
}

// A view's build or first catch-up, if any: [label, progress].
function viewProgress(v) {
  const b = v.building_version;
  if (b) return [`v${b.version} ${b.ready ? "caught up" : "building"}`, b.progress];
  const s = v.served_version || {};
  if (s.catch_up) return [`v${s.version} catching up`, s.catch_up];
  return null;
}

async function refreshViews() {
  try {
    const { views } = await api("/v1/views");
    fill($("views"), ["view", "kind", "status", "version", "lag", "watermark", "building"], views.map((v) => {
      const s = v.served_version || {};
      const p = viewProgress(v);
      return [
        link(`#/view/${encodeURIComponent(v.name)}`, v.name),
        v.kind,
        { text: v.status.replaceAll("_", " "), cls: `state-${v.status}` },
        s.version,
        num(s.lag),
        time(s.watermark),
        p ? progressText(p[0], p[1]) : "",
      ];
    }));
  } catch (e) { fill($("views"), ["error"], [[e.message]]); }
}

pages.overview = {
  show() { this.refresh(); },
  async refresh() {
    await Promise.all([refreshHistory(), refreshTopics(), refreshViews()]);
  },
};

clearers.push(() => {
  historyData = null;
  ["topics", "views"].forEach((id) => $(id).replaceChildren());
  CHARTS.forEach((c) => {
    const canvas = $(c.id);
    canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
    canvas.dataset.points = "0";
    $(`${c.id}-legend`).replaceChildren();
  });
});

window.addEventListener("resize", drawCharts);
