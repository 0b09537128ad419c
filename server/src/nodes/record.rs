//! The records of a Kappa cluster's control topic
//! (`_kappa-<cluster id>-control`, one partition on the coordination
//! cluster). Each record's key is the writing node's id and its value one
//! JSON object of a `kind`:
//!
//! ```json
//! {"kind":"node","node":"http://127.0.0.1:8081","url":"http://127.0.0.1:8081","at_ms":1733300000000}
//! {"kind":"owns","node":"…","version":"purchase_stats@1","partitions":[0,1]}
//! {"kind":"statement","node":"…","id":"5f0c…","sql":"CREATE TABLE …;"}
//! {"kind":"leave","node":"…"}
//! ```
//!
//! - `node`: a node is up and where its HTTP API is (at start, then every
//!   [`super::HEARTBEAT`]);
//! - `owns`: the partitions of a spread version's input the node owns now
//!   (after every rebalance; an empty list when it owns none);
//! - `statement`: SQL that changes the catalog, run by every node in the
//!   topic's order (`id` lets the node that wrote it find its result);
//! - `leave`: the node stopped.
//!
//! A record of an unknown kind, or that does not decode, is skipped with a
//! warning: a newer node's records do not stop an older one.

use serde::{Deserialize, Serialize};

/// One record of the control topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A node stopped.
    Leave {
        /// The node.
        node: String,
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
        assert_eq!(
            owns,
            ControlRecord::Owns {
                node: "n1".into(),
                version: "purchase_stats@1".into(),
                partitions: vec![0, 1],
            }
        );
        let statement = ControlRecord::Statement {
            node: "n1".into(),
            id: "x".into(),
            sql: "DROP TABLE t;".into(),
        };
        assert_eq!(
            ControlRecord::decode(&statement.encode()).unwrap(),
            statement
        );
        assert!(ControlRecord::decode(br#"{"kind":"gossip"}"#).is_err());
    }
}
