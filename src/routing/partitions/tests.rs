//! The partition table alone: look-ups, updates, eviction order, removal, concurrency.

use super::*;
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn p(i: u32) -> String {
    format!("p{i}")
}

/// Every entry is found where probing looks, with its tag, once; the count is right.
fn assert_consistent(t: &PartitionTable) {
    let entries = t.entries_to_save(true);
    assert_eq!(entries.len(), t.len());
    let mut seen = HashSet::new();
    for e in &entries {
        assert!(seen.insert(e.key), "key {:x} twice", e.key);
        assert_eq!(t.probe(e.key).map(|(_, s)| tag_of(s)), Some(e.clone));
    }
}

#[test]
fn insert_update_and_lookup() {
    let t = PartitionTable::new(4);
    let (a, b) = (clone_tag(b"clone1a"), clone_tag(b"clone1b"));
    assert_eq!(t.get(b"7329011"), None);
    assert_eq!(t.insert(b"7329011", a), Insert::Added);
    assert_eq!(t.insert(b"-184020", a), Insert::Added);
    assert_eq!(t.insert(b"7329011", a), Insert::Unchanged);
    assert_eq!(t.get(b"7329011"), Some(a));
    let g = t.generation();
    assert_eq!(
        t.insert(b"7329011", b),
        Insert::Updated,
        "a later entry replaces"
    );
    assert!(t.generation() > g);
    assert_eq!(t.get(b"7329011"), Some(b));
    assert_eq!(t.len(), 2);
    assert_eq!(t.entries_to_save(true).len(), 2);
}

#[test]
fn only_lookups_mark_an_entry_used() {
    let t = PartitionTable::new(4);
    t.insert(b"1", 7);
    assert_eq!(t.peek(b"1"), Some(7));
    assert_eq!(t.insert(b"1", 7), Insert::Unchanged);
    assert!(!t.is_used(b"1"), "peeking and repeating are not uses");
    t.get(b"1");
    assert!(t.is_used(b"1"));
    assert_eq!(t.insert(b"1", 9), Insert::Updated);
    assert!(t.is_used(b"1"), "a new owner keeps the mark");
}

#[test]
fn a_full_table_evicts_entries_no_request_used() {
    let t = PartitionTable::new(4);
    for i in 0..4 {
        assert_eq!(t.insert(p(i).as_bytes(), 7), Insert::Added);
    }
    t.get(b"p1");
    t.get(b"p3");
    assert_eq!(
        t.insert(b"new", 7),
        Insert::Evicted,
        "room is made, not refused"
    );
    assert_eq!((t.len(), t.evicted()), (4, 1));
    assert_eq!(t.get(b"new"), Some(7));
    // A flood of junk churns through unused entries and never touches used ones.
    for i in 0..1_000 {
        assert_eq!(t.insert(format!("junk{i}").as_bytes(), 9), Insert::Evicted);
        assert_eq!((t.peek(b"p1"), t.peek(b"p3")), (Some(7), Some(7)), "{i}");
    }
    assert_eq!(t.peek(b"p0").or(t.peek(b"p2")), None);
    assert_eq!(t.update_key(partition_key(b"gone"), 7), Insert::Refused);
    assert_eq!(t.len(), 4);
    assert_consistent(&t);
}

#[test]
fn a_table_of_used_entries_evicts_the_least_recently_used() {
    let t = PartitionTable::new(8);
    for i in 0..8 {
        t.insert(p(i).as_bytes(), 7);
        t.get(p(i).as_bytes());
    }
    t.tick.store(t.tick.load(Relaxed) + 1, Relaxed);
    for i in 0..4 {
        t.get(p(i).as_bytes());
    }
    assert_eq!(t.insert(b"new", 7), Insert::Evicted);
    let kept = |r: std::ops::Range<u32>| r.filter(|&i| t.peek(p(i).as_bytes()).is_some());
    assert_eq!(kept(0..4).count(), 4, "recently used");
    assert_eq!(kept(4..8).count(), 3, "one of the least recently used went");
}

#[test]
fn unused_entries_go_oldest_first() {
    let t = PartitionTable::new(8);
    for i in 0..8 {
        t.insert(p(i).as_bytes(), 7);
    }
    t.tick.store(t.tick.load(Relaxed) + 1, Relaxed);
    for i in 0..8 {
        t.insert(format!("late{i}").as_bytes(), 7);
    }
    assert!(
        (0..8).all(|i| t.peek(p(i).as_bytes()).is_none()),
        "the older ones made room"
    );
    assert_eq!(t.evicted(), 8);
}

#[test]
fn removal_keeps_every_other_entry_reachable() {
    // Small and crowded, so that runs are long and wrap around the end of the slots.
    for max in [1, 2, 3, 16, 100] {
        let t = PartitionTable::new(max);
        for i in 0..5_000u32 {
            t.insert(p(i).as_bytes(), i % 7 + 1);
            if i % 3 == 0 {
                t.get(p(i / 2).as_bytes());
            }
            if i % 97 == 0 {
                assert_consistent(&t);
            }
        }
        assert_eq!(t.len(), max);
        assert_consistent(&t);
    }
}

#[test]
fn saving_leaves_out_loaded_entries_nothing_used_or_named() {
    let t = PartitionTable::new(8);
    t.load_key(1, 7, false);
    t.load_key(2, 7, true);
    t.load_key(3, 7, false);
    t.insert_key(4, 7);
    assert_eq!(t.insert_key(3, 7), Insert::Unchanged, "named again");
    let keys = |loaded| -> Vec<(u64, bool)> {
        let mut v: Vec<_> = t
            .entries_to_save(loaded)
            .iter()
            .map(|e| (e.key, e.used))
            .collect();
        v.sort();
        v
    };
    assert_eq!(keys(false), [(2, true), (3, false), (4, false)]);
    assert_eq!(keys(true).len(), 4);
    // Loading never evicts: a full table keeps what it has.
    let small = PartitionTable::new(1);
    assert_eq!(small.load_key(1, 7, true), Insert::Added);
    assert_eq!(small.load_key(2, 7, true), Insert::Refused);
}

#[test]
fn concurrent_writers_never_exceed_max_and_readers_never_see_a_wrong_owner() {
    let t = Arc::new(PartitionTable::new(1_000));
    // Each partition's owner follows from its key, so a reader can check any answer.
    let owner = |key: u64| (key as u32 >> 1) | 1;
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|n| {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut hits, mut i) = (0u64, n);
                while !stop.load(Relaxed) {
                    let key = partition_key(p(i % 3_000).as_bytes());
                    if let Some(tag) = t.get_key(key) {
                        assert_eq!(tag, owner(key));
                        hits += 1;
                    }
                    i = i.wrapping_add(7);
                }
                hits
            })
        })
        .collect();
    let writers: Vec<_> = (0..2u32)
        .map(|n| {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..60_000u32 {
                    let key = partition_key(p((i * 2 + n) % 3_000).as_bytes());
                    t.insert_key(key, owner(key));
                    assert!(t.len() <= 1_000);
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|h| h.join().unwrap());
    stop.store(true, Relaxed);
    let hits: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(hits > 0);
    assert_eq!(t.len(), 1_000);
    assert_consistent(&t);
}

#[test]
fn keys_and_tags_are_stable_and_nonzero() {
    // Persisted files depend on these values never changing.
    assert_eq!(partition_key(b"7329011"), partition_key(b"7329011"));
    assert_ne!(partition_key(b"7329011"), partition_key(b"7329012"));
    assert_ne!(partition_key(b""), 0);
    assert_ne!(clone_tag(b""), 0);
    // Golden values: changing the hash would orphan every saved table.
    assert_eq!(partition_key(b"7329011"), 0x3a35_1bc2_f90a_873d);
    assert_eq!(clone_tag(b"clone1a"), 0x5424_2dd2);
}
