//! Where the standby of a partition runs (`standby_replicas = 1`): on the
//! node that would take the partition over if its owner were lost.
//!
//! The partitions of a view version are split by Kafka's `range` assignor
//! ([`kappa_cluster::GroupAssignment`]): the members in a fixed order, each
//! given the next run of partitions. The current owners therefore say
//! that order (the member owning partition 0 first, and so on), and the
//! assignment without any one member is the same rule over the others in
//! the same order: a partition's standby runs on the node that rule gives
//! it once its owner is gone. So when a node dies, the partitions it owned
//! go (after the group's session timeout) to the nodes already keeping
//! them warm, and those resume from their standby's store instead of a
//! checkpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kappa_processor::spread::Assignment;

use super::{lock, Table};

/// The partitions `node` keeps a standby of, given the owner of each of
/// `partitions`; `None` while some partition has no known owner (moving
/// between nodes).
pub fn standbys_of(
    owners: &BTreeMap<u32, String>,
    partitions: u32,
    node: &str,
) -> Option<Vec<u32>> {
    if partitions == 0 || owners.keys().copied().ne(0..partitions) {
        return None;
    }
    // The members in the assignor's order: by the first partition each owns.
    let mut members: Vec<&str> = Vec::new();
    for owner in owners.values() {
        if !members.contains(&owner.as_str()) {
            members.push(owner);
        }
    }
    let mut standbys = Vec::new();
    for (&partition, owner) in owners {
        if owner == node {
            continue;
        }
        let others: Vec<&str> = members.iter().copied().filter(|m| m != owner).collect();
        if range_owner(&others, partitions, partition) == Some(node) {
            standbys.push(partition);
        }
    }
    Some(standbys)
}

/// The node keeping the standby of `partition` (none while some partition
/// has no known owner, or the owner is alone).
pub fn standby_of(
    owners: &BTreeMap<u32, String>,
    partitions: u32,
    partition: u32,
) -> Option<String> {
    let owner = owners.get(&partition)?;
    let mut nodes: Vec<&String> = owners.values().filter(|o| *o != owner).collect();
    nodes.dedup();
    nodes
        .into_iter()
        .find(|n| standbys_of(owners, partitions, n).is_some_and(|s| s.contains(&partition)))
        .cloned()
}

/// The member Kafka's `range` assignor gives `partition` of `partitions`
/// when `members` (in its order) share them.
fn range_owner<'a>(members: &[&'a str], partitions: u32, partition: u32) -> Option<&'a str> {
    let n = members.len() as u32;
    if n == 0 {
        return None;
    }
    let (each, extra) = (partitions / n, partitions % n);
    (0..n)
        .find(|&j| {
            let start = j * each + j.min(extra);
            let count = each + u32::from(j < extra);
            (start..start + count).contains(&partition)
        })
        .map(|j| members[j as usize])
}

/// A version's assignment on this node: the partitions the group gives it,
/// and the standbys [`standbys_of`] gives it from the owners the control
/// topic names.
#[derive(Debug)]
pub struct WithStandbys {
    /// The group's assignment.
    pub group: Arc<dyn Assignment>,
    /// What the control topic says of the nodes.
    pub(super) table: Arc<Mutex<Table>>,
    /// This node's id.
    pub node: String,
    /// `view@version`.
    pub version: String,
}

impl Assignment for WithStandbys {
    fn owned(&self) -> (u64, Option<Vec<u32>>) {
        self.group.owned()
    }

    fn leave(&self) {
        self.group.leave();
    }

    fn standbys(&self, partitions: u32) -> Option<Vec<u32>> {
        let table = lock(&self.table);
        standbys_of(table.owners.get(&self.version)?, partitions, &self.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(of: &[&str]) -> BTreeMap<u32, String> {
        of.iter()
            .enumerate()
            .map(|(p, o)| (p as u32, o.to_string()))
            .collect()
    }

    #[test]
    fn range_gives_the_first_members_one_more() {
        let m = ["a", "b", "c", "d"];
        let given: Vec<&str> = (0..6).map(|p| range_owner(&m, 6, p).unwrap()).collect();
        assert_eq!(given, ["a", "a", "b", "b", "c", "d"]);
        assert_eq!(range_owner(&[], 6, 0), None);
    }

    #[test]
    fn each_partition_has_its_standby_where_it_would_go() {
        // a: 0 1, b: 2 3, c: 4 5.
        let six = owners(&["a", "a", "b", "b", "c", "c"]);
        // Without a: b 0 1 2, c 3 4 5. Without b: a 0 1 2, c 3 4 5.
        // Without c: a 0 1 2, b 3 4 5.
        assert_eq!(standbys_of(&six, 6, "a"), Some(vec![2]));
        assert_eq!(standbys_of(&six, 6, "b"), Some(vec![0, 1, 4, 5]));
        assert_eq!(standbys_of(&six, 6, "c"), Some(vec![3]));
        let mut all: Vec<u32> = ["a", "b", "c"]
            .iter()
            .flat_map(|n| standbys_of(&six, 6, n).unwrap())
            .collect();
        all.sort();
        assert_eq!(all, (0..6).collect::<Vec<_>>(), "one standby each");
        for p in 0..6 {
            let keeper = standby_of(&six, 6, p).unwrap();
            assert!(standbys_of(&six, 6, &keeper).unwrap().contains(&p), "{p}");
        }
        // Two nodes: each keeps the other's partitions.
        let two = owners(&["a", "a", "b", "b"]);
        assert_eq!(standbys_of(&two, 4, "a"), Some(vec![2, 3]));
        assert_eq!(standbys_of(&two, 4, "b"), Some(vec![0, 1]));
    }

    #[test]
    fn no_standby_alone_and_none_known_with_an_owner_unknown() {
        assert_eq!(standbys_of(&owners(&["a", "a"]), 2, "a"), Some(vec![]));
        let mut gap = owners(&["a", "b", "c"]);
        gap.remove(&1);
        assert_eq!(standbys_of(&gap, 3, "c"), None);
        assert_eq!(standbys_of(&BTreeMap::new(), 3, "c"), None);
        // The last partitions' owners not known yet (a node's partitions
        // revoked in a rebalance): not the layout of fewer partitions.
        let six = owners(&["a", "a", "b", "b", "c", "c"]);
        let mut tail = six.clone();
        tail.remove(&4);
        tail.remove(&5);
        assert_eq!(standbys_of(&tail, 6, "b"), None);
    }
}
