// --- Start (main.js) -------------------------------------------------------------
//
// Wires the header (token box, topic and view pickers), routes the hash
// and refreshes the header and the page shown every 2 s.

const REFRESH_MS = 2000;

$("use-token").addEventListener("click", useToken);
$("token").addEventListener("keydown", (e) => { if (e.key === "Enter") useToken(); });
$("forget-token").addEventListener("click", forgetToken);
$("topic-pick").addEventListener("change", () => {
  const name = $("topic-pick").value;
  if (name) go(`#/topic/${encodeURIComponent(name)}`);
});
$("view-pick").addEventListener("change", () => {
  const name = $("view-pick").value;
  if (name) go(`#/view/${encodeURIComponent(name)}`);
});
window.addEventListener("hashchange", () => { route(); refreshPickers(); });
if (token()) showAuth("token set (kept in this tab only)", false);

// One refresh at a time: a slow server is not sent a queue of them.
let refreshing = false;
async function tick() {
  if (refreshing) return;
  refreshing = true;
  try { await refreshAll(); } finally { refreshing = false; }
}

current = parseHash();
route();
tick();
setInterval(tick, REFRESH_MS);
