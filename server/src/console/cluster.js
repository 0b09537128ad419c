// --- Kappa cluster (cluster.js) --------------------------------------------------
//
// #/cluster: the Kappa cluster this node belongs to (GET /v1/cluster) — one
// row per node: up or not, when it last said so, and per view version the
// partitions it owns with their lag, rate and checkpoint age. A node
// running alone says so.

async function refreshCluster() {
  try {
    const c = await api("/v1/cluster");
    $("cluster-title").textContent = `Kappa cluster ${c.cluster_id}`;
    const rows = [];
    c.nodes.forEach((n) => {
      const versions = Object.keys(n.views);
      const stats = (n.stats && n.stats.views) || {};
      const here = n.node === c.node ? " (this node)" : "";
      const first = [n.url + here, n.up ? "up" : "silent", time(n.last_seen_ms)];
      if (!versions.length) rows.push([...first, "", "", "", "", ""]);
      versions.forEach((v, i) => {
        const s = stats[v];
        rows.push([
          ...(i === 0 ? first : ["", "", ""]),
          v,
          n.views[v].join(", "),
          s ? num(s.lag_records) : "",
          s ? num(s.records_per_second, perSecond) : "",
          s && s.checkpoint_age_ms !== null ? duration(s.checkpoint_age_ms) : "",
        ]);
      });
    });
    fill($("cluster-nodes"), ["node", "state", "last seen", "view version", "partitions", "lag", "rate", "checkpoint age"], rows);
  } catch (e) {
    if (e.details && e.details.code === "not_in_a_cluster") {
      $("cluster-title").textContent = "Kappa cluster";
      fill($("cluster-nodes"), ["node"], [["this node runs alone (start nodes with --cluster-id and --advertise-url to share views: docs/clusters.md)"]]);
    } else {
      fill($("cluster-nodes"), ["error"], [[e.message]]);
    }
  }
}

pages.cluster = {
  show() { this.refresh(); },
  async refresh() { await refreshCluster(); },
};

clearers.push(() => { $("cluster-nodes").replaceChildren(); });
