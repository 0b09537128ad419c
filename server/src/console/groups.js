// --- Consumer groups (groups.js) -----------------------------------------------
//
// #/groups: every group with its topics and total lag; #/groups/NAME: per
// topic and partition its committed offset, the partition's offsets and the
// lag, and a reset of the group's offsets on a topic (earliest, latest, an
// offset or a time) after a second click to confirm.

const MAX_GROUPS_DESCRIBED = 100;
let groupShown = "";

function groupOffsets(group) {
  return api(`/v1/groups/${encodeURIComponent(group)}/offsets`);
}

async function refreshGroupList() {
  try {
    const { groups } = await api("/v1/groups");
    const described = await Promise.all(groups.slice(0, MAX_GROUPS_DESCRIBED).map((g) => groupOffsets(g).catch(() => null)));
    fill($("groups"), ["group", "topics", "lag"], groups.map((g, i) => {
      const d = described[i];
      const lag = d ? d.topics.reduce((n, t) => n + t.partitions.reduce((m, p) => m + p.lag, 0), 0) : null;
      return [link(`#/groups/${encodeURIComponent(g)}`, g), d ? d.topics.map((t) => t.topic).join(", ") : "", num(lag)];
    }));
    if (!groups.length) fill($("groups"), ["group"], [["no consumer group has committed offsets yet"]]);
  } catch (e) { fill($("groups"), ["error"], [[e.message]]); }
}

// A reset form for `topic` of the group shown: target and a two-click button.
function resetForm(topic) {
  const row = el("div", null, "row");
  const kind = el("select");
  kind.setAttribute("aria-label", `reset ${topic} to`);
  ["earliest", "latest", "offset", "timestamp"].forEach((k) => { const o = el("option", k); o.value = k; kind.appendChild(o); });
  const value = el("input");
  value.placeholder = "offset, or time (ISO 8601)";
  value.hidden = true;
  kind.addEventListener("change", () => { value.hidden = kind.value === "earliest" || kind.value === "latest"; });
  const button = el("button", `Reset offsets on ${topic}…`, "secondary");
  const result = el("span", "", "muted");
  let armed = false;
  button.addEventListener("click", async () => {
    if (!armed) {
      armed = true;
      button.textContent = `Click again to reset ${groupShown} on ${topic}`;
      button.classList.add("danger");
      return;
    }
    armed = false;
    button.textContent = `Reset offsets on ${topic}…`;
    button.classList.remove("danger");
    let to = kind.value;
    if (to === "offset") to = { offset: Number(value.value) };
    if (to === "timestamp") to = { timestamp: Date.parse(value.value) };
    try {
      const r = await post(`/v1/groups/${encodeURIComponent(groupShown)}/reset`, { topic, to });
      result.textContent = `reset: ${r.offsets.map((o) => `${o.partition}:${int(o.offset)}`).join(" ")}`;
      refreshGroup();
    } catch (e) { result.textContent = e.message; }
  });
  row.append(kind, value, button, result);
  return row;
}

async function refreshGroup() {
  const group = groupShown;
  if (!group) return;
  try {
    const d = await groupOffsets(group);
    if (group !== groupShown) return;
    $("group-title").textContent = `Group ${d.group}`;
    // The tables are rebuilt; a reset form being filled in is kept.
    const box = $("group-topics");
    const kept = new Map([...box.querySelectorAll("[data-topic]")].map((s) => [s.dataset.topic, s]));
    const sections = d.topics.map((t) => {
      const section = kept.get(t.topic) || el("div", null, "group-topic");
      section.dataset.topic = t.topic;
      const table = tableOf(["partition", "committed", "start offset", "end offset", "lag"], t.partitions.map((p) => [
        num(p.partition), p.committed === null ? "none" : num(p.committed), num(p.start_offset), num(p.end_offset), num(p.lag),
      ]));
      if (!kept.has(t.topic)) section.append(el("h3"), el("div", null, "scroll"), resetForm(t.topic));
      section.children[0].replaceChildren(link(`#/topic/${encodeURIComponent(t.topic)}`, t.topic),
        el("span", ` · lag ${int(t.partitions.reduce((n, p) => n + p.lag, 0))}`, "muted"));
      section.children[1].replaceChildren(table);
      return section;
    });
    box.replaceChildren(...sections);
  } catch (e) { showError($("group-topics"), e); }
}

pages.groups = {
  show(name) {
    if (name !== groupShown) $("group-topics").replaceChildren();
    groupShown = name;
    $("group-detail").hidden = !name;
    this.refresh();
  },
  async refresh() {
    await Promise.all([refreshGroupList(), refreshGroup()]);
  },
};

clearers.push(() => {
  ["groups", "group-topics"].forEach((id) => $(id).replaceChildren());
});
