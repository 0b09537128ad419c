// --- Topic page (topic.js) -----------------------------------------------------
//
// #/topic/NAME: its partitions (offsets, size, segments) and settings; a
// message browser (a partition from an offset, the earliest, the latest or
// a time; key, value and headers as stored; "follow" long-polls for new
// records); and a form that produces a test message.

const FOLLOW_WAIT_MS = 10000;
const RECORDS_KEPT = 500;

let topicShown = "";
// Bumped to stop a running follow loop (new read, other topic, unchecked).
let followRun = 0;
let nextOffset = null;

async function refreshTopic() {
  const name = topicShown;
  if (!name) {
    if (topicNames.length) pages.topic.show("");
    else $("topic-title").textContent = "no topics yet";
    return;
  }
  try {
    const t = await api(`/v1/topics/${encodeURIComponent(name)}`);
    if (name !== topicShown) return;
    $("topic-title").textContent = `Topic ${t.name}`;
    const c = t.config;
    $("topic-config").textContent = `${int(c.partitions)} partitions · retention ${retention(c)} · ` +
      `segments of ${bytes(c.segment_bytes)} or ${duration(c.segment_ms)} · fsync ${c.fsync}`;
    fill($("topic-partitions"), ["partition", "start offset", "end offset", "records", "size", "segments"],
      t.partitions.map((p) => [
        num(p.partition), num(p.start_offset), num(p.end_offset), num(p.end_offset - p.start_offset),
        num(p.bytes, bytes), num(p.segment_count),
      ]));
    refreshTopicChart(name);
    const numbers = t.partitions.map((p) => String(p.partition));
    options($("partition"), numbers);
    options($("produce-partition"), ["auto"].concat(numbers));
  } catch (e) {
    $("topic-title").textContent = `Topic ${name}`;
    fill($("topic-partitions"), ["error"], [[e.message]]);
  }
}

// The topic's produce and consume rates over the last 15 minutes (hidden
// without the `metrics` grant).
async function refreshTopicChart(name) {
  const h = await loadHistory();
  const series = h && h.topics.find((s) => s.name === name);
  $("topic-chart-box").hidden = !series;
  if (!series || name !== topicShown) return;
  drawChart($("topic-chart"), $("topic-chart-legend"), h.times_ms, [
    { name: "produced", values: series.records_per_second },
    { name: "consumed (committed)", values: series.consumed_per_second },
  ], (x) => perSecond(x));
}

// The records API's start parameter for the chosen start.
function startParam() {
  const kind = $("start-kind").value;
  if (kind === "offset") {
    const n = $("offset").value.trim();
    return n ? ["offset", n] : ["offset", "earliest"];
  }
  if (kind === "time") {
    const ms = Date.parse($("from-time").value);
    return Number.isNaN(ms) ? ["offset", "earliest"] : ["from_timestamp", String(ms)];
  }
  return ["offset", kind];
}

// A record's cells. A value that is not JSON (e.g. from a Kafka client)
// comes as text, shown as is, or as base64, shown with a "base64:" prefix;
// so do keys and header values that are not UTF-8.
function recordRow(r) {
  const key = r.key === null || r.key === undefined ? "" : r.key_encoding === "base64" ? `base64:${r.key}` : r.key;
  const value = r.value_encoding === "text" ? r.value : r.value_encoding === "base64" ? `base64:${r.value}` : json(r.value);
  const base64 = r.base64_headers || [];
  const headers = Object.keys(r.headers || {}).length
    ? json(Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, base64.includes(k) ? `base64:${v}` : v])))
    : "";
  return [num(r.offset), time(r.timestamp), key, value, headers];
}

function recordsUrl(topic, partition, params) {
  return `/v1/topics/${encodeURIComponent(topic)}/partitions/${encodeURIComponent(partition)}/records?${params}`;
}

// Reads 50 records from the chosen start (or, with `more`, after the last).
async function readRecords(more) {
  const topic = topicShown;
  if (!topic) return;
  const partition = $("partition").value || "0";
  const run = ++followRun;
  const params = new URLSearchParams({ max_records: "50" });
  if (more && nextOffset !== null) params.set("offset", String(nextOffset));
  else params.set(...startParam());
  try {
    const answer = await api(recordsUrl(topic, partition, params));
    if (run !== followRun) return;
    const shown = $("records").firstChild;
    let table = shown;
    if (!more || !shown || shown.tagName !== "TABLE") {
      table = tableOf(["offset", "timestamp", "key", "value", "headers"], []);
      $("records").replaceChildren(table);
    }
    appendRecords(table, answer.records);
    nextOffset = answer.next_offset;
    readState(answer);
    $("more").hidden = false;
    if ($("follow").checked) follow(run, topic, partition, table);
  } catch (e) {
    $("read-state").textContent = "";
    showError($("records"), e);
  }
}

function appendRecords(table, records) {
  records.forEach((r) => {
    const tr = el("tr");
    recordRow(r).forEach((c) => tr.appendChild(cell(c)));
    table.appendChild(tr);
  });
  // The header row and the newest RECORDS_KEPT records stay.
  while (table.rows.length > RECORDS_KEPT + 1) table.rows[1].remove();
}

function readState(answer) {
  $("read-state").textContent = `${int(answer.records.length)} records of ${answer.topic}/${answer.partition} · ` +
    `next offset ${int(answer.next_offset)} · end ${int(answer.high_watermark)}` +
    ($("follow").checked ? " · following" : "");
}

// Long-polls for records after the last one until `run` is stopped.
async function follow(run, topic, partition, table) {
  while (run === followRun && $("follow").checked && current.page === "topic") {
    const params = new URLSearchParams({
      max_records: "100", offset: String(nextOffset), max_wait_ms: String(FOLLOW_WAIT_MS),
    });
    try {
      const answer = await api(recordsUrl(topic, partition, params));
      if (run !== followRun) return;
      appendRecords(table, answer.records);
      nextOffset = answer.next_offset;
      readState(answer);
    } catch (e) {
      if (run === followRun) {
        $("follow").checked = false;
        $("read-state").textContent = `following stopped: ${e.message}`;
      }
      return;
    }
  }
}

async function produceTest() {
  const topic = topicShown;
  const out = $("produce-result");
  if (!topic) return;
  const record = {};
  try {
    record.value = JSON.parse($("produce-value").value || "null");
  } catch (e) {
    out.textContent = `the value is not JSON: ${e.message}`;
    out.className = "bad";
    return;
  }
  const key = $("produce-key").value;
  if (key) record.key = key;
  const headers = $("produce-headers").value.trim();
  if (headers) {
    try { record.headers = JSON.parse(headers); } catch (e) {
      out.textContent = `the headers are not a JSON object: ${e.message}`;
      out.className = "bad";
      return;
    }
  }
  const partition = $("produce-partition").value;
  if (partition && partition !== "auto") record.partition = Number(partition);
  try {
    const answer = await post(`/v1/topics/${encodeURIComponent(topic)}/records`, { records: [record] });
    const r = answer.records[0];
    out.textContent = `produced to partition ${r.partition} at offset ${int(r.offset)}`;
    out.className = "ok";
    refreshTopic();
  } catch (e) {
    out.textContent = e.message;
    out.className = "bad";
  }
}

pages.topic = {
  show(name) {
    const target = name || topicShown || topicNames[0] || "";
    if (target !== topicShown) {
      followRun++;
      nextOffset = null;
      $("records").replaceChildren();
      ["read-state", "produce-result"].forEach((id) => { $(id).textContent = ""; });
      $("more").hidden = true;
      options($("partition"), []);
    }
    topicShown = target;
    if (current.page === "topic") current.arg = target;
    if (!name && target) { history.replaceState(null, "", `#/topic/${encodeURIComponent(target)}`); }
    this.refresh();
  },
  refresh: refreshTopic,
};

clearers.push(() => {
  followRun++;
  nextOffset = null;
  $("records").replaceChildren();
  $("topic-partitions").replaceChildren();
  ["read-state", "produce-result", "topic-config"].forEach((id) => { $(id).textContent = ""; });
  options($("partition"), []);
});

$("start-kind").addEventListener("change", () => {
  const kind = $("start-kind").value;
  $("offset").hidden = kind !== "offset";
  $("from-time").hidden = kind !== "time";
});
$("read").addEventListener("click", () => readRecords(false));
$("more").addEventListener("click", () => readRecords(true));
$("follow").addEventListener("change", () => {
  followRun++;
  if ($("follow").checked && topicShown) readRecords(nextOffset !== null);
});
$("produce").addEventListener("click", produceTest);
