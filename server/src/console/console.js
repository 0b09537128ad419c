"use strict";
// The Kappa console (served as /console.js; the page allows no inline code).
// This file is the core: DOM and number helpers, the token, API calls and
// the hash router. The pages follow it in the same served script (the
// binary concatenates charts.js, overview.js, topic.js, groups.js, view.js,
// sql.js and main.js after it, in that order).
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

// An element with text (set as textContent, never parsed) and a class.
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// A table cell value: a string or number shown as is, or {text, cls}
// (e.g. num(n): a formatted number, right-aligned), or an element.
function cell(c) {
  if (c instanceof Node) { const td = el("td"); td.appendChild(c); return td; }
  if (c !== null && typeof c === "object") return el("td", c.text, c.cls);
  return el("td", c === undefined || c === null ? "" : c, typeof c === "number" ? "num" : "");
}

function fill(table, headers, rows) {
  table.replaceChildren();
  const head = el("tr");
  table.appendChild(head);
  const bodies = rows.map((cells) => {
    const tr = el("tr");
    cells.forEach((c) => tr.appendChild(cell(c)));
    table.appendChild(tr);
    return tr;
  });
  // A column of numbers has its header over them, on the right.
  headers.forEach((h, i) => {
    const numbers = bodies.length > 0 && bodies.every((tr) => !tr.cells[i] || tr.cells[i].classList.contains("num"));
    head.appendChild(el("th", h, numbers ? "num" : ""));
  });
}

// A table of `headers` and `rows`, built with fill.
function tableOf(headers, rows, id) {
  const t = el("table");
  if (id) t.id = id;
  fill(t, headers, rows);
  return t;
}

// A link to a console page (#/…) with `text`.
function link(hash, text) {
  const a = el("a", text);
  a.href = hash;
  return a;
}

// --- Numbers -------------------------------------------------------------------

const INT = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const ONE_DECIMAL = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

// 1234567 -> "1,234,567"; "" for null.
function int(n) {
  return n === null || n === undefined || Number.isNaN(n) ? "" : INT.format(n);
}

// A decimal with one digit below 100 ("12.3"), none above ("1,234").
function dec(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "";
  return Math.abs(n) >= 100 ? INT.format(n) : ONE_DECIMAL.format(n);
}

// A rate: "1,234 rec/s".
function perSecond(n, unit) {
  return n === null || n === undefined ? "" : `${dec(n)} ${unit || "rec/s"}`;
}

// Bytes in SI units: "12.3 MB".
function bytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "kB", "MB", "GB", "TB", "PB"];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return i === 0 ? `${int(v)} B` : `${ONE_DECIMAL.format(v)} ${units[i]}`;
}

// A duration: "45 s", "3 min 5 s", "15 min", "2 h 10 min", "3 d 4 h".
function duration(ms) {
  if (ms === null || ms === undefined) return "";
  const s = Math.round(ms / 1000);
  // Two units at most, the second left out when it is 0.
  const two = (big, unit, small, smallUnit) => (small ? `${big} ${unit} ${small} ${smallUnit}` : `${big} ${unit}`);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return two(m, "min", s % 60, "s");
  const h = Math.floor(m / 60);
  if (h < 24) return two(h, "h", m % 60, "min");
  return two(int(Math.floor(h / 24)), "d", h % 24, "h");
}

// A right-aligned table cell of a formatted number.
function num(n, format) {
  return { text: (format || int)(n), cls: "num" };
}

function time(ms) {
  return ms === null || ms === undefined ? "" : new Date(ms).toISOString().replace(".000Z", "Z");
}

function json(v) {
  return v === null || v === undefined ? "" : JSON.stringify(v);
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

// What each page shows, cleared when the token changes so that nothing
// read with the previous token stays on the page under another or none.
const clearers = [];

function clearData() {
  clearers.forEach((f) => f());
}

function useToken() {
  const typed = $("token").value.trim();
  if (!typed) return;
  sessionStorage.setItem(TOKEN_KEY, typed);
  $("token").value = "";
  clearData();
  showAuth("token set (kept in this tab only)", false);
  refreshAll();
}

function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  $("token").value = "";
  clearData();
  showAuth("token forgotten", false);
  refreshAll();
}

// --- API ---------------------------------------------------------------------

// A call to this server's API with the token, if any; the JSON answer, or an
// Error naming the status, code and the server's message (its `error`
// object, e.g. a SQL error's line and column, is the Error's `details`).
// A 401 opens the token prompt; a 403 names the missing grant.
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
    const error = new Error(`${res.status} ${e.code || ""}: ${e.message || res.statusText}`);
    error.details = e;
    throw error;
  }
  if (tokenNeeded) showAuth("token accepted (kept in this tab only)", false);
  return body;
}

// A POST of `body` as JSON.
function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

// Sets the options of a <select> to `names` (text and value), keeping the
// pick; with `placeholder`, a first option of value "" (only when there
// are names: an empty list leaves no option at all).
function options(pick, names, placeholder) {
  const values = names.length && placeholder !== undefined ? [""].concat(names) : names;
  if (values.join("\u0000") === [...pick.options].map((o) => o.value).join("\u0000")) return;
  const chosen = pick.value;
  pick.replaceChildren(...values.map((n) => {
    const o = el("option", n === "" ? placeholder : n);
    o.value = n;
    return o;
  }));
  if (values.includes(chosen)) pick.value = chosen;
}

// Shows an error in `box` (an element) as text.
function showError(box, e) {
  box.replaceChildren(el("pre", e.message, "bad"));
}

// --- Router --------------------------------------------------------------------

// Pages by name: {show(arg), refresh()}; the page shown is the hash's
// first part (#/topic/orders -> page "topic", arg "orders").
const pages = {};
let current = { page: "overview", arg: "" };

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const page = parts[0] || "overview";
  let arg = "";
  try { arg = decodeURIComponent(parts.slice(1).join("/")); } catch (e) { arg = ""; }
  return pages[page] ? { page, arg } : { page: "overview", arg: "" };
}

function route() {
  current = parseHash();
  document.querySelectorAll(".page").forEach((p) => { p.hidden = p.id !== `page-${current.page}`; });
  document.querySelectorAll("nav a").forEach((a) => {
    a.classList.toggle("active", a.dataset.page === current.page);
  });
  pages[current.page].show(current.arg);
}

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// The server's readiness, in the header.
async function refreshStatus() {
  try {
    const ready = await fetch("/ready");
    $("status").textContent = ready.ok ? "ready" : "degraded (see /ready)";
    $("status").className = "status " + (ready.ok ? "ok" : "bad");
  } catch (e) {
    $("status").textContent = "unreachable";
    $("status").className = "status bad";
  }
}

// The topic and view pickers of the header, which open their pages.
let topicNames = [];
let viewList = [];

async function refreshPickers() {
  try {
    const { topics } = await api("/v1/topics");
    topicNames = topics.map((t) => t.name);
  } catch (e) { topicNames = []; }
  try {
    const { views } = await api("/v1/views");
    viewList = views;
  } catch (e) { viewList = []; }
  options($("topic-pick"), topicNames, "topic…");
  options($("view-pick"), viewList.map((v) => v.name), "view…");
  $("topic-pick").value = current.page === "topic" && topicNames.includes(current.arg) ? current.arg : "";
  $("view-pick").value = current.page === "view" && viewList.some((v) => v.name === current.arg) ? current.arg : "";
}

clearers.push(() => {
  topicNames = [];
  viewList = [];
  options($("topic-pick"), []);
  options($("view-pick"), []);
});

// Refreshes the header and the page shown.
async function refreshAll() {
  await refreshStatus();
  await refreshPickers();
  const page = pages[current.page];
  if (page && page.refresh) await page.refresh();
}
