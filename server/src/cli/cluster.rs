//! `kappa cluster`: the Kappa cluster the server belongs to — its nodes,
//! whether each is up, and the input partitions each owns per view
//! version (`GET /v1/cluster`).

use std::io::Write;

use kappa_wire::clusters::KappaClusterOut;

use super::http::Client;
use super::table::{Align, Table};

/// Prints the nodes of the server's Kappa cluster (`--json`: the answer
/// as is).
pub fn run(client: &Client, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let cluster: KappaClusterOut = client.get_json("/v1/cluster", &[])?;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&cluster)?)?;
        return Ok(());
    }
    write!(out, "{}", render(&cluster))?;
    Ok(())
}

/// The cluster as a table: one row per node.
fn render(cluster: &KappaClusterOut) -> String {
    let mut table = Table::new(&[
        ("NODE", Align::Left),
        ("UP", Align::Left),
        ("LAST SEEN (ms)", Align::Right),
        ("OWNS", Align::Left),
    ]);
    for node in &cluster.nodes {
        let owns: Vec<String> = node
            .views
            .iter()
            .map(|(version, partitions)| {
                let list: Vec<String> = partitions.iter().map(u32::to_string).collect();
                format!("{version}:{}", list.join(","))
            })
            .collect();
        let me = if node.node == cluster.node {
            " (this node)"
        } else {
            ""
        };
        table.row(vec![
            format!("{}{me}", node.url),
            if node.up { "yes" } else { "no" }.to_string(),
            node.last_seen_ms.to_string(),
            owns.join(" "),
        ]);
    }
    format!("Kappa cluster {}\n{}", cluster.cluster_id, table.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_node_with_its_partitions() {
        let cluster: KappaClusterOut = serde_json::from_str(
            r#"{"cluster_id":"shop","node":"http://a:1","nodes":[
              {"node":"http://a:1","url":"http://a:1","last_seen_ms":5,"up":true,"views":{"v@1":[0,1]}},
              {"node":"http://b:2","url":"http://b:2","last_seen_ms":7,"up":false,"views":{}}]}"#,
        )
        .unwrap();
        let text = render(&cluster);
        assert!(text.starts_with("Kappa cluster shop\n"), "{text}");
        assert!(text.contains("http://a:1 (this node)  yes"), "{text}");
        assert!(text.contains("v@1:0,1"), "{text}");
        assert!(text.contains("http://b:2"), "{text}");
        assert!(text.contains("no"), "{text}");
    }
}
