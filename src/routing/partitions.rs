//! WebSphere partition table: PartitionID → CloneID, learned from `$WSPT`, read lock-free.
//!
//! A fixed-size open-addressing table of atomics, sized once for `partition_table_max`
//! entries at half load. Keys are 64-bit hashes of the partition id and values 32-bit
//! tags of the clone id, so the table never allocates after it is built and a look-up is
//! a hash and a few atomic loads. Entries are never removed, only replaced: a partition
//! that moved to another clone is reported by its new owner. When the table is full, new
//! partitions are refused (and counted) while known ones keep being updated.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

/// What [`PartitionTable::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    Added,
    Updated,
    Unchanged,
    /// The table holds `max` entries already; the new partition was not added.
    Full,
}

pub struct PartitionTable {
    keys: Box<[AtomicU64]>,
    /// Clone tag of the entry; 0 while an insert is between its two stores.
    values: Box<[AtomicU32]>,
    mask: usize,
    len: AtomicUsize,
    max: usize,
    /// Bumped on every change; the persister saves when it moved.
    generation: AtomicU64,
    /// `$WSPT` entries that added or changed a partition.
    learned: AtomicU64,
    /// `$WSPT` values or entries refused (malformed, oversized, unknown clone, table full).
    rejected: AtomicU64,
}

/// FNV-1a then a 64-bit finaliser (murmur3's), never 0. Stable: it is persisted.
pub fn partition_key(partition: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in partition {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h.max(1)
}

/// A 32-bit tag for a clone id, never 0. Clone ids of one cluster must have distinct tags
/// (config validation checks it).
pub fn clone_tag(clone_id: &[u8]) -> u32 {
    let h = partition_key(clone_id);
    ((h >> 32) as u32 ^ h as u32).max(1)
}

impl PartitionTable {
    /// A table for at most `max` partitions.
    pub fn new(max: usize) -> PartitionTable {
        let slots = (max.max(1) * 2).next_power_of_two();
        PartitionTable {
            keys: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            values: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            mask: slots - 1,
            len: AtomicUsize::new(0),
            max,
            generation: AtomicU64::new(0),
            learned: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn max(&self) -> usize {
        self.max
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Acquire)
    }

    pub fn count_learned(&self, n: u64) {
        self.learned.fetch_add(n, Relaxed);
    }

    pub fn count_rejected(&self, n: u64) {
        self.rejected.fetch_add(n, Relaxed);
    }

    /// `$WSPT` entries that changed the table, since start.
    pub fn learned(&self) -> u64 {
        self.learned.load(Relaxed)
    }

    /// `$WSPT` values and entries refused, since start.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Relaxed)
    }

    /// The clone tag for `partition`, if known.
    pub fn get(&self, partition: &[u8]) -> Option<u32> {
        self.get_key(partition_key(partition))
    }

    /// The clone tag for a partition key (see [`partition_key`]).
    pub fn get_key(&self, key: u64) -> Option<u32> {
        let mut i = key as usize & self.mask;
        loop {
            match self.keys[i].load(Acquire) {
                0 => return None,
                k if k == key => {
                    let v = self.values[i].load(Acquire);
                    return (v != 0).then_some(v);
                }
                _ => i = (i + 1) & self.mask,
            }
        }
    }

    /// Maps `partition` to the clone with tag `clone` (non-zero).
    pub fn insert(&self, partition: &[u8], clone: u32) -> Insert {
        self.insert_key(partition_key(partition), clone)
    }

    pub fn insert_key(&self, key: u64, clone: u32) -> Insert {
        debug_assert!(clone != 0);
        let mut i = key as usize & self.mask;
        loop {
            let k = self.keys[i].load(Acquire);
            if k == key {
                let old = self.values[i].swap(clone, AcqRel);
                if old == clone {
                    return Insert::Unchanged;
                }
                self.generation.fetch_add(1, Release);
                return Insert::Updated;
            }
            if k == 0 {
                // Reserve room first so that concurrent inserts never exceed `max`.
                if self.len.fetch_add(1, AcqRel) >= self.max {
                    self.len.fetch_sub(1, AcqRel);
                    return Insert::Full;
                }
                match self.keys[i].compare_exchange(0, key, AcqRel, Acquire) {
                    Ok(_) => {
                        self.values[i].store(clone, Release);
                        self.generation.fetch_add(1, Release);
                        return Insert::Added;
                    }
                    Err(_) => {
                        // Another insert took this slot; give the room back and look again.
                        self.len.fetch_sub(1, AcqRel);
                        continue;
                    }
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Every complete entry as (partition key, clone tag), for persistence.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.keys
            .iter()
            .zip(self.values.iter())
            .filter_map(|(k, v)| {
                let (k, v) = (k.load(Acquire), v.load(Acquire));
                (k != 0 && v != 0).then_some((k, v))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(t.entries().count(), 2);
    }

    #[test]
    fn a_full_table_refuses_new_partitions_but_updates_known_ones() {
        let t = PartitionTable::new(3);
        for p in [&b"1"[..], b"2", b"3"] {
            assert_eq!(t.insert(p, 7), Insert::Added);
        }
        assert_eq!(t.insert(b"4", 7), Insert::Full);
        assert_eq!(t.get(b"4"), None);
        assert_eq!(t.insert(b"2", 9), Insert::Updated);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn concurrent_inserts_never_exceed_max_and_lose_nothing() {
        let t = std::sync::Arc::new(PartitionTable::new(10_000));
        let threads: Vec<_> = (0..4u32)
            .map(|n| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..6_000u32 {
                        t.insert((i * 4 + n).to_string().as_bytes(), n + 1);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(t.len(), 10_000);
        assert_eq!(t.entries().count(), 10_000);
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
}
