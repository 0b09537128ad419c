//! Tests of the offset store: the documented bytes, reopen, damage at
//! every byte of the tail and in the middle, compaction, name limits,
//! injected write and fdatasync failures, and a model-based property test
//! of random operations with reopens.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::damage::aside_path;
use super::frame::{
    encode_frame, find_valid_frame, Entry, Record, ENTRY_FIXED_LEN, HEADER_LEN, KIND_DELETE_GROUP,
    MAGIC_V1, MAX_BODY_LEN,
};
use super::state::{encode_state, replay, State};
use super::store::{BACKUP_FILE_NAME, COMPACT_MIN_FRAMES, FILE_NAME, TMP_FILE_NAME};
use super::*;
use crate::io::FaultInjector;
use crate::topic::MAX_TOPIC_NAME_LEN;

/// Bytes of the start frame, the whole file of a new store.
const START_LEN: u64 = (HEADER_LEN + 2) as u64;

fn log_path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

fn file_len(dir: &Path) -> u64 {
    fs::metadata(log_path(dir)).unwrap().len()
}

/// Everything the store holds, in a comparable form.
fn snapshot(store: &OffsetStore) -> Vec<(String, Vec<CommittedOffset>)> {
    store
        .groups()
        .into_iter()
        .map(|g| {
            let offsets = store.group_offsets(&g);
            (g, offsets)
        })
        .collect()
}

/// Writes `bytes` as the offsets file of a fresh directory.
fn dir_with_file(bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(log_path(dir.path()), bytes).unwrap();
    dir
}

/// The bytes of every `offsets.log.damaged-*` file of `dir`, by name.
fn kept_aside(dir: &Path) -> Vec<Vec<u8>> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("offsets.log.damaged-"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| fs::read(dir.join(n)).unwrap())
        .collect()
}

/// Every file of `dir` with its bytes, sorted by name.
fn dir_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// A store directory whose file and backup hold one commit (g, t, 0) = 4.
fn dir_with_a_commit_and_its_backup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 4)], 0).unwrap();
    drop(store);
    // Every open writes the last good copy.
    drop(OffsetStore::open(dir.path()).unwrap());
    dir
}

/// 100 bytes of a fixed pseudo-random sequence (xorshift).
fn garbage() -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..100)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn frame_bytes_match_the_documented_example() {
    // The worked example of FORMAT.md, "Consumer offsets file".
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 5)], 1000).unwrap();
    let start: [u8; 10] = [0x02, 0x00, 0x00, 0x00, 0xe9, 0x30, 0x55, 0x94, 0xc1, 0x04];
    assert_eq!(encode_frame(&Record::Start), start);
    let commit: [u8; 40] = [
        0x20, 0x00, 0x00, 0x00, 0x35, 0xf6, 0x7f, 0xce, 0xc1, 0x01, 0x01, 0x00, 0x67, 0x01, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x74, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    assert_eq!(
        fs::read(log_path(dir.path())).unwrap(),
        [&start[..], &commit[..]].concat()
    );
    assert_eq!(
        encode_frame(&Record::DeleteTopic("t".into()))[8..],
        [0xc1, 0x02, 0x01, 0x00, 0x74]
    );
    assert_eq!(
        encode_frame(&Record::DeleteGroup("g".into()))[8..],
        [0xc1, 0x03, 0x01, 0x00, 0x67]
    );
}

#[test]
fn commits_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = OffsetStore::open(dir.path()).unwrap();
        store
            .commit("g1", &[("orders", 0, 10), ("orders", 1, 20)], 1_000)
            .unwrap();
        store.commit("g2", &[("payments", 3, 7)], 2_000).unwrap();
    }
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.committed("g1", "orders", 0), Some(10));
    assert_eq!(store.committed("g1", "orders", 1), Some(20));
    assert_eq!(store.committed("g2", "payments", 3), Some(7));
    assert_eq!(store.committed("g2", "orders", 0), None);
    assert_eq!(store.groups(), vec!["g1".to_owned(), "g2".to_owned()]);
    assert_eq!(
        store.group_offsets("g2"),
        vec![CommittedOffset {
            topic: "payments".into(),
            partition: 3,
            offset: 7,
            commit_time_ms: 2_000,
        }]
    );
}

#[test]
fn open_creates_missing_directories() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("a").join("b");
    let store = OffsetStore::open(&dir).unwrap();
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    drop(store);
    assert_eq!(
        OffsetStore::open(&dir).unwrap().committed("g", "t", 0),
        Some(1)
    );
}

#[test]
fn latest_commit_wins_even_when_it_goes_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 100)], 1).unwrap();
    store.commit("g", &[("t", 0, 150)], 2).unwrap();
    store.commit("g", &[("t", 0, 50)], 3).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(50));
    drop(store);
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(50));
    assert_eq!(store.group_offsets("g")[0].commit_time_ms, 3);
}

#[test]
fn later_duplicate_in_one_commit_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 5), ("t", 0, 9)], 1).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(9));
    drop(store);
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(9));
}

#[test]
fn group_offsets_are_sorted_by_topic_then_partition() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store
        .commit(
            "g",
            &[("b", 2, 1), ("a", 10, 2), ("b", 0, 3), ("a", 9, 4)],
            0,
        )
        .unwrap();
    let keys: Vec<(String, u32)> = store
        .group_offsets("g")
        .into_iter()
        .map(|c| (c.topic, c.partition))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("a".to_owned(), 9),
            ("a".to_owned(), 10),
            ("b".to_owned(), 0),
            ("b".to_owned(), 2)
        ]
    );
    assert!(store.group_offsets("nobody").is_empty());
}

#[test]
fn empty_commit_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    let start = file_len(dir.path());
    store.commit("g", &[], 0).unwrap();
    assert_eq!(file_len(dir.path()), start);
    assert!(store.groups().is_empty());
    assert!(store.commit("bad\n", &[], 0).is_err());
}

#[test]
fn delete_topic_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g1", &[("t", 0, 1), ("u", 0, 2)], 0).unwrap();
        store.commit("g2", &[("t", 1, 3)], 0).unwrap();
        store.delete_topic("t").unwrap();
        assert_eq!(store.committed("g1", "t", 0), None);
        assert_eq!(store.groups(), vec!["g1".to_owned()]);
    }
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.committed("g1", "t", 0), None);
    assert_eq!(store.committed("g2", "t", 1), None);
    assert_eq!(store.committed("g1", "u", 0), Some(2));
    assert_eq!(store.groups(), vec!["g1".to_owned()]);
}

#[test]
fn delete_group_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g1", &[("t", 0, 1)], 0).unwrap();
        store.commit("g2", &[("t", 0, 2)], 0).unwrap();
        store.delete_group("g1").unwrap();
        assert_eq!(store.groups(), vec!["g2".to_owned()]);
    }
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.groups(), vec!["g2".to_owned()]);
    assert_eq!(store.committed("g1", "t", 0), None);
    assert_eq!(store.committed("g2", "t", 0), Some(2));
    // A group can commit again after it was deleted.
    store.commit("g1", &[("t", 0, 5)], 0).unwrap();
    drop(store);
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.committed("g1", "t", 0), Some(5));
}

#[test]
fn deleting_what_is_not_there_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    let len = file_len(dir.path());
    store.delete_topic("other").unwrap();
    store.delete_group("other").unwrap();
    assert_eq!(file_len(dir.path()), len);
}

#[test]
fn torn_last_frame_at_every_byte_keeps_earlier_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 1), ("u", 2, 3)], 10).unwrap();
    store.delete_topic("u").unwrap();
    store.commit("h", &[("t", 1, 4)], 11).unwrap();
    let earlier = snapshot(&store);
    let start = file_len(dir.path()) as usize;
    store.commit("g", &[("t", 0, 99), ("v", 7, 8)], 12).unwrap();
    drop(store);
    let full = fs::read(log_path(dir.path())).unwrap();
    assert!(full.len() > start + HEADER_LEN);

    for cut in start..full.len() {
        // Nothing valid follows the cut, so replay logs a warning, not an error.
        assert_eq!(find_valid_frame(&full[..cut], start + 1), None);
        let d = dir_with_file(&full[..cut]);
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(snapshot(&store), earlier, "cut at byte {cut}");
        assert_eq!(file_len(d.path()), start as u64, "cut at byte {cut}");
        // The bytes cut off are kept beside, in the file as it was.
        let kept = if cut == start {
            vec![]
        } else {
            vec![full[..cut].to_vec()]
        };
        assert_eq!(kept_aside(d.path()), kept, "cut at byte {cut}");
        store.commit("g", &[("t", 0, 42)], 13).unwrap();
        drop(store);
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(42), "cut at byte {cut}");
        assert_eq!(store.committed("h", "t", 1), Some(4), "cut at byte {cut}");
        assert_eq!(kept_aside(d.path()).len(), kept.len(), "cut at byte {cut}");
    }
}

#[test]
fn flipped_byte_in_last_frame_drops_only_that_frame() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 1)], 10).unwrap();
    store.commit("h", &[("t", 3, 2)], 10).unwrap();
    let earlier = snapshot(&store);
    let start = file_len(dir.path()) as usize;
    store.commit("g", &[("t", 0, 77), ("w", 1, 5)], 11).unwrap();
    drop(store);
    let full = fs::read(log_path(dir.path())).unwrap();

    for pos in start..full.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut bytes = full.clone();
            bytes[pos] ^= mask;
            assert_eq!(find_valid_frame(&bytes, start + 1), None);
            let d = dir_with_file(&bytes);
            let store = OffsetStore::open(d.path()).unwrap();
            assert_eq!(snapshot(&store), earlier, "byte {pos} ^ {mask:#x}");
            store.commit("g", &[("t", 0, 78)], 12).unwrap();
            drop(store);
            let store = OffsetStore::open(d.path()).unwrap();
            assert_eq!(store.committed("g", "t", 0), Some(78));
            assert_eq!(store.committed("h", "t", 3), Some(2));
        }
    }
}

#[test]
fn corrupt_frame_in_the_middle_is_skipped_and_the_frames_after_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    let first_end = file_len(dir.path()) as usize;
    store.commit("g", &[("t", 1, 2)], 0).unwrap();
    store.commit("g", &[("t", 2, 3)], 0).unwrap();
    store.commit("h", &[("t", 0, 7)], 0).unwrap();
    drop(store);
    let mut bytes = fs::read(log_path(dir.path())).unwrap();
    bytes[first_end + HEADER_LEN + 3] ^= 0x55;
    let d = dir_with_file(&bytes);
    let store = OffsetStore::open(d.path()).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(1));
    assert_eq!(
        store.committed("g", "t", 1),
        None,
        "the damaged frame's commit"
    );
    assert_eq!(store.committed("g", "t", 2), Some(3));
    assert_eq!(store.committed("h", "t", 0), Some(7));
    drop(store);
    // The damaged file is kept aside, the live one rewritten clean.
    let aside: Vec<_> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("offsets.log.damaged-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(fs::read(d.path().join(&aside[0])).unwrap(), bytes);
    let rewritten = fs::read(log_path(d.path())).unwrap();
    assert_eq!(
        replay(&log_path(d.path()), &rewritten)
            .unwrap()
            .skipped_frames,
        0
    );
    let store = OffsetStore::open(d.path()).unwrap();
    assert_eq!(store.committed("g", "t", 2), Some(3));
}

#[test]
fn a_bad_first_commit_frame_loses_only_that_frame() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    let first = file_len(dir.path()) as usize;
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    store.commit("h", &[("t", 0, 5)], 0).unwrap();
    store.commit("g", &[("u", 3, 9)], 0).unwrap();
    drop(store);
    let mut bytes = fs::read(log_path(dir.path())).unwrap();
    bytes[first] ^= 0xFF; // the first commit frame's length
    let d = dir_with_file(&bytes);
    let store = OffsetStore::open(d.path()).unwrap();
    assert_eq!(store.committed("g", "t", 0), None);
    assert_eq!(store.committed("h", "t", 0), Some(5));
    assert_eq!(store.committed("g", "u", 3), Some(9));
}

#[test]
fn a_missing_file_beside_its_backup_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 4)], 0).unwrap();
    drop(store);
    // Every open leaves the last good copy.
    let store = OffsetStore::open(dir.path()).unwrap();
    drop(store);
    let backup = dir.path().join(BACKUP_FILE_NAME);
    assert!(backup.exists());
    fs::remove_file(log_path(dir.path())).unwrap();
    match OffsetStore::open(dir.path()) {
        Err(LogError::Metadata { path, recovery, .. }) => {
            assert_eq!(path, log_path(dir.path()));
            assert!(recovery.contains("offsets.log.bak"), "{recovery}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!log_path(dir.path()).exists(), "nothing was created");
    // The recovery it names works.
    fs::copy(&backup, log_path(dir.path())).unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(4));
}

#[test]
fn an_empty_file_refuses_to_open_and_changes_nothing() {
    let dir = dir_with_a_commit_and_its_backup();
    let backup = dir.path().join(BACKUP_FILE_NAME);
    fs::write(log_path(dir.path()), b"").unwrap();
    // Beside a good backup, an empty one (the probe's case) and none.
    for beside in ["a good backup", "an empty backup", "no backup"] {
        match beside {
            "an empty backup" => fs::write(&backup, b"").unwrap(),
            "no backup" => fs::remove_file(&backup).unwrap(),
            _ => {}
        }
        let before = dir_files(dir.path());
        match OffsetStore::open(dir.path()) {
            Err(LogError::Metadata {
                path,
                problem,
                recovery,
            }) => {
                assert_eq!(path, log_path(dir.path()), "{beside}");
                assert!(problem.contains("empty (0 bytes)"), "{beside}: {problem}");
                let restore = format!("cp {} {}", backup.display(), path.display());
                assert_eq!(
                    recovery.contains(&restore),
                    beside == "a good backup",
                    "{beside}: {recovery}"
                );
                assert!(recovery.contains("no committed offsets"), "{recovery}");
            }
            other => panic!("{beside}: expected a refusal, got {other:?}"),
        }
        assert_eq!(dir_files(dir.path()), before, "{beside}: nothing changed");
    }
}

#[test]
fn a_file_without_one_valid_frame_refuses_to_open_and_keeps_its_bytes() {
    let commit = Record::Commit {
        group: "g".into(),
        entries: vec![(
            "t".into(),
            0,
            Entry {
                offset: 9,
                commit_time_ms: 0,
            },
        )],
    };
    let first_frame_torn = encode_frame(&commit)[..19].to_vec();
    for bytes in [garbage(), vec![0u8; 4096], first_frame_torn] {
        let dir = dir_with_a_commit_and_its_backup();
        let path = log_path(dir.path());
        fs::write(&path, &bytes).unwrap();
        let before = dir_files(dir.path());
        match OffsetStore::open(dir.path()) {
            Err(LogError::Metadata {
                path: named,
                problem,
                recovery,
            }) => {
                assert_eq!(named, path);
                assert!(problem.contains("not one valid frame"), "{problem}");
                let keep = format!("mv {} {}.damaged-", path.display(), path.display());
                assert!(recovery.contains(&keep), "{recovery}");
                let backup = dir.path().join(BACKUP_FILE_NAME);
                let restore = format!("cp {} {}", backup.display(), path.display());
                assert!(recovery.contains(&restore), "{recovery}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(dir_files(dir.path()), before, "nothing changed");
        // The recovery it names works.
        fs::rename(&path, dir.path().join("offsets.log.damaged-1")).unwrap();
        fs::copy(dir.path().join(BACKUP_FILE_NAME), &path).unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(4));
    }
}

#[test]
fn a_new_file_opens_with_the_start_frame_and_its_backup_too() {
    let dir = tempfile::tempdir().unwrap();
    drop(OffsetStore::open(dir.path()).unwrap());
    let start = encode_frame(&Record::Start);
    assert_eq!(fs::read(log_path(dir.path())).unwrap(), start);
    assert_eq!(fs::read(dir.path().join(BACKUP_FILE_NAME)).unwrap(), start);
    assert!(!dir.path().join(TMP_FILE_NAME).exists());
    // A store of no commits reopens as one.
    let store = OffsetStore::open(dir.path()).unwrap();
    assert!(store.groups().is_empty());
    assert_eq!(file_len(dir.path()), START_LEN);
}

#[test]
fn a_file_without_a_start_frame_from_before_is_read_and_given_one() {
    let commit = |offset| {
        encode_frame(&Record::Commit {
            group: "g".into(),
            entries: vec![(
                "t".into(),
                0,
                Entry {
                    offset,
                    commit_time_ms: 0,
                },
            )],
        })
    };
    let old = [commit(4), commit(5)].concat();
    // As written before the start frame existed, and the same with a torn
    // last frame.
    for (bytes, kept) in [(old.clone(), 0), ([&old[..], &commit(6)[..9]].concat(), 1)] {
        let d = dir_with_file(&bytes);
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(5));
        drop(store);
        let rewritten = fs::read(log_path(d.path())).unwrap();
        assert_eq!(
            rewritten[..START_LEN as usize],
            encode_frame(&Record::Start)
        );
        assert_eq!(kept_aside(d.path()).len(), kept);
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(5));
        assert_eq!(fs::read(log_path(d.path())).unwrap(), rewritten);
    }
}

#[test]
fn a_damaged_start_frame_loses_nothing_and_is_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    store.commit("h", &[("t", 0, 5)], 0).unwrap();
    let before = snapshot(&store);
    drop(store);
    let mut bytes = fs::read(log_path(dir.path())).unwrap();
    bytes[9] ^= 0x10; // the start frame's kind
    let d = dir_with_file(&bytes);
    let store = OffsetStore::open(d.path()).unwrap();
    assert_eq!(snapshot(&store), before);
    assert_eq!(kept_aside(d.path()), vec![bytes]);
    let rewritten = fs::read(log_path(d.path())).unwrap();
    assert_eq!(
        rewritten[..START_LEN as usize],
        encode_frame(&Record::Start)
    );
}

#[test]
fn a_copy_kept_aside_never_takes_the_name_of_another() {
    let dir = tempfile::tempdir().unwrap();
    let first = aside_path(dir.path(), 5);
    assert_eq!(first, dir.path().join("offsets.log.damaged-5"));
    fs::write(&first, b"one").unwrap();
    let second = aside_path(dir.path(), 5);
    assert_eq!(second, dir.path().join("offsets.log.damaged-5.1"));
    fs::write(&second, b"two").unwrap();
    assert_eq!(
        aside_path(dir.path(), 5),
        dir.path().join("offsets.log.damaged-5.2")
    );
}

#[test]
fn zero_filled_tail_is_cut_and_kept_aside() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    drop(store);
    let mut bytes = fs::read(log_path(dir.path())).unwrap();
    let len = bytes.len();
    bytes.resize(len + 4096, 0);
    let d = dir_with_file(&bytes);
    let store = OffsetStore::open(d.path()).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(1));
    assert_eq!(file_len(d.path()), len as u64);
    assert!(
        kept_aside(d.path()) == vec![bytes],
        "the file as it was is kept"
    );
}

#[test]
fn crc_valid_but_undecodable_frame_fails_open_and_keeps_file() {
    for body in [
        vec![MAGIC_V1, 9, 0, 0],                          // unknown kind
        vec![0xC2, KIND_DELETE_GROUP, 1, 0, b'g'],        // unknown version
        vec![MAGIC_V1, KIND_DELETE_GROUP, 1, 0, b'g', 0], // trailing byte
        vec![MAGIC_V1, KIND_DELETE_GROUP, 0, 0],          // empty group name
    ] {
        let mut bytes = encode_frame(&Record::DeleteGroup("x".into()));
        let position = bytes.len() as u64;
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        let d = dir_with_file(&bytes);
        let err = OffsetStore::open(d.path()).unwrap_err();
        assert!(
            matches!(err, LogError::Corrupt { position: p, .. } if p == position),
            "{err:?}"
        );
        assert_eq!(fs::read(log_path(d.path())).unwrap(), bytes);
    }
}

#[test]
fn compaction_keeps_state_identical_and_shrinks_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open_with(dir.path(), 64, None).unwrap();
    let mut max_len = 0;
    for i in 0..300u64 {
        let group = format!("g{}", i % 3);
        let topic = format!("t{}", i % 2);
        store
            .commit(&group, &[(&topic, (i % 4) as u32, i)], i as i64)
            .unwrap();
        max_len = max_len.max(file_len(dir.path()));
    }
    let before = snapshot(&store);
    let inner = store.lock();
    assert!(inner.frames <= 64, "frames {}", inner.frames);
    assert_eq!(inner.len, file_len(dir.path()));
    drop(inner);
    drop(store);
    // Without compaction the file would hold 300 single-entry frames.
    let one_frame = encode_frame(&Record::Commit {
        group: "g0".into(),
        entries: vec![(
            "t0".into(),
            0,
            Entry {
                offset: 0,
                commit_time_ms: 0,
            },
        )],
    })
    .len() as u64;
    assert!(
        max_len < 300 * one_frame / 3,
        "max {max_len}, frame {one_frame}"
    );
    assert!(file_len(dir.path()) < max_len);
    assert!(!dir.path().join(TMP_FILE_NAME).exists());
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(snapshot(&store), before);
}

#[test]
fn compaction_triggers_at_the_default_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    let entries: Vec<(String, u32)> = (0..4).map(|p| ("topic".to_owned(), p)).collect();
    let mut lens = Vec::new();
    for i in 0..COMPACT_MIN_FRAMES {
        let (topic, partition) = &entries[(i % 4) as usize];
        store.commit("group", &[(topic, *partition, i)], 7).unwrap();
        lens.push(file_len(dir.path()));
    }
    let before = snapshot(&store);
    drop(store);
    // The 1024th commit made the 1025th frame (after the start frame),
    // past max(1024, 4 × 4): the file compacted to the start frame and
    // one commit.
    assert!(lens[lens.len() - 1] < lens[lens.len() - 2] / 100);
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(snapshot(&store), before);
    assert_eq!(store.lock().frames, 2, "the start frame and one commit");
}

#[test]
fn compaction_splits_huge_groups_into_several_frames() {
    let mut state = State::default();
    let topic = "t".repeat(MAX_TOPIC_NAME_LEN);
    let per_entry = ENTRY_FIXED_LEN + topic.len();
    let n = MAX_BODY_LEN / per_entry + 10;
    let offsets = state.groups.entry("g".into()).or_default();
    for p in 0..n as u32 {
        offsets.insert(
            (topic.clone(), p),
            Entry {
                offset: p as u64,
                commit_time_ms: 1,
            },
        );
    }
    let (data, frames) = encode_state(&state);
    assert_eq!(frames, 3, "the start frame and two commits");
    let replayed = replay(Path::new("mem"), &data).unwrap();
    assert_eq!(replayed.frames, 3);
    assert_eq!(replayed.valid_len, data.len() as u64);
    assert_eq!(replayed.state, state);
}

#[test]
fn leftover_tmp_file_is_deleted_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 1)], 0).unwrap();
    }
    fs::write(dir.path().join(TMP_FILE_NAME), b"half a compaction").unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    assert!(!dir.path().join(TMP_FILE_NAME).exists());
    assert_eq!(store.committed("g", "t", 0), Some(1));
}

#[test]
fn invalid_group_names_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    let long = "g".repeat(256);
    for bad in ["", "a\nb", "tab\there", "del\u{7f}", long.as_str()] {
        let err = store.commit(bad, &[("t", 0, 1)], 0).unwrap_err();
        assert!(
            matches!(&err, LogError::InvalidGroupName { .. } if err.to_string().contains(&format!("{bad:?}"))),
            "{err:?}"
        );
        assert!(matches!(
            store.delete_group(bad),
            Err(LogError::InvalidGroupName { .. })
        ));
    }
    store.commit(&"g".repeat(255), &[("t", 0, 1)], 0).unwrap();
    store.commit("ünïcode group", &[("t", 0, 1)], 0).unwrap();
    assert_eq!(store.groups().len(), 2);
}

#[test]
fn invalid_topic_names_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    let long = "t".repeat(250);
    for bad in ["", long.as_str()] {
        assert!(matches!(
            store.commit("g", &[("ok", 0, 1), (bad, 0, 1)], 0),
            Err(LogError::InvalidTopicName { .. })
        ));
        assert!(matches!(
            store.delete_topic(bad),
            Err(LogError::InvalidTopicName { .. })
        ));
    }
    // A rejected call applies nothing, not even its valid entries.
    assert!(store.groups().is_empty());
    assert_eq!(file_len(dir.path()), START_LEN);
    store.commit("g", &[(&"t".repeat(249), 0, 1)], 0).unwrap();
}

#[test]
fn oversized_commit_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let store = OffsetStore::open(dir.path()).unwrap();
    let topic = "t".repeat(MAX_TOPIC_NAME_LEN);
    let n = MAX_BODY_LEN / (ENTRY_FIXED_LEN + topic.len()) + 1;
    let commits: Vec<(&str, u32, u64)> = (0..n as u32).map(|p| (topic.as_str(), p, 0)).collect();
    assert!(matches!(
        store.commit("g", &commits, 0),
        Err(LogError::InvalidArgument(_))
    ));
    assert_eq!(file_len(dir.path()), START_LEN);
}

#[test]
fn concurrent_commits_from_threads_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(OffsetStore::open(dir.path()).unwrap());
    let handles: Vec<_> = (0..4u32)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..10u64 {
                    store.commit("g", &[("t", t, i)], 0).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    drop(store);
    let store = OffsetStore::open(dir.path()).unwrap();
    for t in 0..4 {
        assert_eq!(store.committed("g", "t", t), Some(9));
    }
}

#[test]
fn a_failed_fdatasync_stops_the_store_until_it_is_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(FaultInjector::new());
    let store = OffsetStore::open_with_faults(dir.path(), Some(faults.clone())).unwrap();
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    faults.fail_next_sync.store(true, Ordering::SeqCst);
    let err = store.commit("g", &[("t", 0, 2)], 0).unwrap_err();
    assert!(err.to_string().contains("injected: fsync failed"), "{err}");
    // Not applied, and no silent retry: every later mutation is refused,
    // naming why, until the store is reopened.
    assert_eq!(store.committed("g", "t", 0), Some(1));
    for refused in [
        store.commit("g", &[("t", 0, 3)], 0),
        store.delete_group("g"),
        store.delete_topic("t"),
    ] {
        let err = refused.unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("refuses writes until it is reopened")
                && message.contains("fdatasync failed"),
            "{message}"
        );
    }
    assert_eq!(store.committed("g", "t", 0), Some(1));
    drop(store);
    // Reopened, the store holds the acknowledged commit, or the one whose
    // fdatasync failed (its bytes were written): never anything else.
    let store = OffsetStore::open(dir.path()).unwrap();
    let committed = store.committed("g", "t", 0);
    assert!(matches!(committed, Some(1) | Some(2)), "{committed:?}");
    store.commit("g", &[("t", 0, 4)], 0).unwrap();
    drop(store);
    assert_eq!(
        OffsetStore::open(dir.path())
            .unwrap()
            .committed("g", "t", 0),
        Some(4)
    );
}

#[test]
fn a_failed_write_is_cut_back_and_the_store_continues() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(FaultInjector::new());
    let store = OffsetStore::open_with_faults(dir.path(), Some(faults.clone())).unwrap();
    store.commit("g", &[("t", 0, 1)], 0).unwrap();
    let len = file_len(dir.path());
    // Half a frame reaches the file, then the disk is full.
    faults.fail_next_write_after.store(11, Ordering::SeqCst);
    let err = store
        .commit("g", &[("t", 0, 2), ("u", 1, 3)], 0)
        .unwrap_err();
    assert!(
        matches!(&err, LogError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
        "{err:?}"
    );
    assert_eq!(file_len(dir.path()), len, "the partial frame was cut back");
    assert_eq!(store.committed("g", "t", 0), Some(1));
    assert_eq!(store.committed("g", "u", 1), None);
    // A failed write is not a failed fsync: the store goes on.
    store.commit("g", &[("t", 0, 5)], 0).unwrap();
    drop(store);
    let store = OffsetStore::open(dir.path()).unwrap();
    assert_eq!(store.committed("g", "t", 0), Some(5));
    assert_eq!(store.committed("g", "u", 1), None);
}

#[derive(Debug, Clone)]
enum Op {
    Commit(usize, Vec<(usize, u32, u64)>, i64),
    DeleteTopic(usize),
    DeleteGroup(usize),
    Reopen,
}

const GROUPS: [&str; 3] = ["alpha", "beta", "gamma"];
const TOPICS: [&str; 3] = ["orders", "payments", "t"];

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (
            0..GROUPS.len(),
            proptest::collection::vec((0..TOPICS.len(), 0..3u32, any::<u64>()), 0..4),
            any::<i64>()
        )
            .prop_map(|(g, c, t)| Op::Commit(g, c, t)),
        1 => (0..TOPICS.len()).prop_map(Op::DeleteTopic),
        1 => (0..GROUPS.len()).prop_map(Op::DeleteGroup),
        1 => Just(Op::Reopen),
    ]
}

type Model = HashMap<(String, String, u32), (u64, i64)>;

fn check_against_model(store: &OffsetStore, model: &Model) {
    let mut groups: Vec<String> = model.keys().map(|(g, _, _)| g.clone()).collect();
    groups.sort();
    groups.dedup();
    assert_eq!(store.groups(), groups);
    for g in GROUPS {
        let mut expected: Vec<CommittedOffset> = model
            .iter()
            .filter(|((mg, _, _), _)| mg == g)
            .map(|((_, t, p), (o, ts))| CommittedOffset {
                topic: t.clone(),
                partition: *p,
                offset: *o,
                commit_time_ms: *ts,
            })
            .collect();
        expected.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        assert_eq!(store.group_offsets(g), expected);
        for t in TOPICS {
            for p in 0..3 {
                let key = (g.to_owned(), t.to_owned(), p);
                assert_eq!(store.committed(g, t, p), model.get(&key).map(|v| v.0));
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config {
        cases: 32,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    })]

    #[test]
    fn random_ops_match_a_hashmap_model(
        ops in proptest::collection::vec(op_strategy(), 1..40),
    ) {
        let dir = tempfile::tempdir().unwrap();
        // A low compaction floor makes compactions happen within a case.
        let mut store = OffsetStore::open_with(dir.path(), 4, None).unwrap();
        let mut model = Model::new();
        for op in ops {
            match op {
                Op::Commit(g, commits, time) => {
                    let commits: Vec<(&str, u32, u64)> =
                        commits.iter().map(|&(t, p, o)| (TOPICS[t], p, o)).collect();
                    store.commit(GROUPS[g], &commits, time).unwrap();
                    for (t, p, o) in commits {
                        model.insert((GROUPS[g].to_owned(), t.to_owned(), p), (o, time));
                    }
                }
                Op::DeleteTopic(t) => {
                    store.delete_topic(TOPICS[t]).unwrap();
                    model.retain(|(_, mt, _), _| mt != TOPICS[t]);
                }
                Op::DeleteGroup(g) => {
                    store.delete_group(GROUPS[g]).unwrap();
                    model.retain(|(mg, _, _), _| mg != GROUPS[g]);
                }
                Op::Reopen => {
                    drop(store);
                    store = OffsetStore::open_with(dir.path(), 4, None).unwrap();
                }
            }
            check_against_model(&store, &model);
        }
        drop(store);
        let store = OffsetStore::open(dir.path()).unwrap();
        check_against_model(&store, &model);
    }
}
