//! The records of a Kappa cluster's control topic
//! (`_kappa-<cluster id>-control`, one partition on the coordination
//! cluster). Each record's key is the writing node's id and its value one
//! JSON object of a `kind`:
//!
//! ```json
//! {"kind":"node","node":"http://127.0.0.1:8081","url":"http://127.0.0.1:8081","at_ms":1733300000000}
//! {"kind":"owns","node":"…","version":"purchase_stats@1","partitions":[0,1]}
//! {"kind":"statement","node":"…","id":"5f0c…","sql":"CREATE TABLE …;"}
//! {"kind":"ready","node":"…","version":"purchase_stats@2","partitions":[0,1],"of":6}
//! {"kind":"operation","node":"…","id":"…","op":{"op":"promote","view":"purchase_stats","version":2}}
//! {"kind":"operation","node":"…","id":"…","op":{"op":"rollback","view":"purchase_stats"}}
//! {"kind":"operation","node":"…","id":"…","op":{"op":"replay","view":"purchase_stats","request":{"from":"earliest"}}}
//! {"kind":"leave","node":"…"}
//! ```
//!
//! - `node`: a node is up and where its HTTP API is (at start, then every
//!   [`super::HEARTBEAT`]);
//! - `owns`: the partitions of a spread version's input the node owns now
//!   (after every rebalance; an empty list when it owns none);
//! - `statement`: SQL that changes the catalog, run by every node in the
//!   topic's order (`id` lets the node that wrote it find its result);
//! - `ready`: the partitions (of `of`) of a version being built whose
//!   tasks on the node have caught up; once every partition's owner says
//!   so, a node appends a `promote` and every node swaps the version in;
//! - `operation`: a promote, rollback or replay (the request of
//!   `POST /v1/views/{view}/replay`), run by every node in order;
//! - `leave`: the node stopped.
//!
//! A record of an unknown kind, or that does not decode, is skipped with a
//! warning: a newer node's records do not stop an older one.

use serde::{Deserialize, Serialize};

/// One record of the control topic.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ControlRecord {
    /// A node is up.
    Node {
        /// Its id.
        node: String,
        /// Where its HTTP API is.
        url: String,
        /// When it said so (ms since the epoch).
        at_ms: i64,
    },
    /// The partitions of a version's input a node owns now.
    Owns {
        /// The node.
        node: String,
        /// `view@version`.
        version: String,
        /// The partitions.
        partitions: Vec<u32>,
    },
    /// SQL every node runs.
    Statement {
        /// The node that took it.
        node: String,
        /// Its id, for the node that took it.
        id: String,
        /// The statements.
        sql: String,
    },
    /// Partitions of a build whose tasks on a node caught up.
    Ready {
        /// The node.
        node: String,
        /// `view@version`.
        version: String,
        /// The partitions caught up (empty: none, or not any more).
        partitions: Vec<u32>,
        /// The input's partition count.
        of: u32,
    },
    /// A change of a view's versions every node makes.
    Operation {
        /// The node that took it.
        node: String,
        /// Its id, for the node that took it.
        id: String,
        /// What to do.
        op: Operation,
    },
    /// A node stopped.
    Leave {
        /// The node.
        node: String,
    },
}

/// A change of a view's versions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operation {
    /// Serve the version being built (`version`).
    Promote {
        /// The view.
        view: String,
        /// The version being built.
        version: u64,
    },
    /// Serve the previous version again.
    Rollback {
        /// The view.
        view: String,
    },
    /// Build a new version from the input's history.
    Replay {
        /// The view.
        view: String,
        /// What `POST /v1/views/{view}/replay` was given.
        request: crate::dto::ReplayRequest,
    },
}

impl ControlRecord {
    /// The record's value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("control records serialize")
    }

    /// A record's value decoded.
    pub fn decode(bytes: &[u8]) -> Result<ControlRecord, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_as_documented() {
        let owns = ControlRecord::decode(
            br#"{"kind":"owns","node":"n1","version":"purchase_stats@1","partitions":[0,1]}"#,
        )
        .unwrap();
        assert!(
            matches!(&owns, ControlRecord::Owns { node, version, partitions }
                if node == "n1" && version == "purchase_stats@1" && partitions == &[0, 1]),
            "{owns:?}"
        );
        let statement = ControlRecord::Statement {
            node: "n1".into(),
            id: "x".into(),
            sql: "DROP TABLE t;".into(),
        };
        let again = ControlRecord::decode(&statement.encode()).unwrap();
        assert_eq!(again.encode(), statement.encode());
        let promote = ControlRecord::decode(
            br#"{"kind":"operation","node":"n1","id":"y","op":{"op":"promote","view":"v","version":2}}"#,
        )
        .unwrap();
        assert!(
            matches!(&promote, ControlRecord::Operation { op: Operation::Promote { view, version: 2 }, .. } if view == "v"),
            "{promote:?}"
        );
        let replay = ControlRecord::decode(
            br#"{"kind":"operation","node":"n1","id":"z","op":{"op":"replay","view":"v","request":{"from":"earliest"}}}"#,
        )
        .unwrap();
        assert!(matches!(
            replay,
            ControlRecord::Operation {
                op: Operation::Replay { .. },
                ..
            }
        ));
        assert!(ControlRecord::decode(br#"{"kind":"gossip"}"#).is_err());
    }
}
