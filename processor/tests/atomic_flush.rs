//! State and offsets stay consistent when RocksDB's WAL is lost: a commit
//! writes the `.state` column family (input offsets) and the `.view` one
//! (rows) in one batch, and RocksDB flushes them together (atomic flush),
//! so the files on disk never hold rows whose offsets they do not hold —
//! a restart would replay input the rows already counted.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_processor::state::store::{Batch, Scope, Store};

/// Small memtables: the big view column family flushes every few commits,
/// the small state column family never fills its own.
const WRITE_BUFFER_BYTES: usize = 256 << 10;

fn read_u64(store: &Store, cf: &str, key: &[u8]) -> Option<u64> {
    store
        .get(cf, key)
        .unwrap()
        .map(|v| u64::from_le_bytes(v.try_into().unwrap()))
}

#[test]
fn a_lost_wal_never_leaves_view_rows_ahead_of_their_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state");
    let scope = Scope {
        name: "v".into(),
        version: 1,
    };
    {
        let store = Store::open_with_write_buffer(&path, WRITE_BUFFER_BYTES).unwrap();
        store.ensure(&scope).unwrap();
        // Commit i: input offset i in the state, a count of i records in
        // the rows (plus a large row, so the view fills its memtable).
        for i in 1..=40u64 {
            let mut batch = Batch::default();
            batch.put(&scope.state_cf(), b"offset", i.to_le_bytes());
            batch.put(&scope.view_cf(), b"count", i.to_le_bytes());
            batch.put(
                &scope.view_cf(),
                format!("pad/{i:04}"),
                vec![i as u8; 64 << 10],
            );
            store.write(batch).unwrap();
        }
        store.wait_for_background_work().unwrap();
        // The view flushed at least once on its own.
        let ssts = std::fs::read_dir(&path)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "sst")
            })
            .count();
        assert!(ssts > 0, "no flush happened");
        // A crash: nothing more is flushed.
    }
    // The WAL is lost.
    for entry in std::fs::read_dir(&path).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|x| x == "log") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let store = Store::open_with_write_buffer(&path, WRITE_BUFFER_BYTES).unwrap();
    let offset = read_u64(&store, &scope.state_cf(), b"offset");
    let count = read_u64(&store, &scope.view_cf(), b"count");
    assert!(count.is_some(), "the flushed rows survive");
    assert_eq!(
        offset, count,
        "the rows and the offsets on disk are of the same commit"
    );
}
