//! WebSphere partition table: PartitionID → CloneID, learned from `$WSPT`, read lock-free.
//!
//! A fixed-size open-addressing table of atomics, sized once for `partition_table_max`
//! entries at half load. Keys are 64-bit hashes of the partition id; each slot's value packs
//! the 32-bit tag of the clone id with a 32-bit use stamp. The table never allocates after
//! it is built, and a look-up is a hash and a few atomic loads.
//!
//! A server that floods `$WSPT` with partitions nobody uses must not lock real ones out
//! (`$WSPT` poisoning). So a full table makes room instead of refusing: it evicts entries
//! no request has used first, oldest first, then the least recently used ([`evict`]).
//! The stamp is what tells them apart: a look-up that hits marks its entry used, with one
//! relaxed compare-and-swap only when the stamp changes, which is once per 64 partitions
//! learned, not once per request.
//!
//! Learning is rare (responses that change the table), so writers take a mutex; readers
//! never wait for it. A removal shifts the rest of its run back instead of leaving a
//! tombstone, so runs never fill up with dead slots; readers check a sequence counter that
//! removals make odd, and look again if a removal moved entries under them.

mod evict;
mod feed;
mod journal;
#[cfg(test)]
mod tests;

pub use crate::base::stable_hash::{clone_tag, partition_key};
pub use feed::Feed;
pub use journal::{wall_ms, Change};

use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// What [`PartitionTable::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    Added,
    /// Added in place of an evicted entry: the table was full.
    Evicted,
    Updated,
    Unchanged,
    /// The partition is new and was not added: [`PartitionTable::update_key`] (a
    /// response's quota is spent), or a load into a full table.
    Refused,
}

/// An entry worth saving (see [`PartitionTable::entries_to_save`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub key: u64,
    pub clone: u32,
    /// A request looked the partition up (in this process, or before the table was saved).
    pub used: bool,
}

/// Stamp bit of an entry that a request looked up.
const USED: u32 = 1 << 31;
/// Stamp bits holding the tick of the last use (used entries), or of the `$WSPT` that added
/// or last changed the entry (unused ones). Tick 0: loaded from a saved table and not named
/// by any `$WSPT` since.
const TICK: u32 = USED - 1;
/// New partitions per tick: the clock that stamps count in. Coarse, so that a hot entry's
/// stamp (and cache line) is written at most once per 64 partitions learned.
const TICK_ADDS: u64 = 64;
/// Attempts of a look-up that removals keep overlapping before it reports a miss.
const READ_TRIES: usize = 32;

fn pack(clone: u32, stamp: u32) -> u64 {
    (stamp as u64) << 32 | clone as u64
}

fn tag_of(slot: u64) -> u32 {
    slot as u32
}

fn stamp_of(slot: u64) -> u32 {
    (slot >> 32) as u32
}

pub struct PartitionTable {
    keys: Box<[AtomicU64]>,
    /// Clone tag (low half; 0: empty) and use stamp (high half) of each slot.
    slots: Box<[AtomicU64]>,
    mask: usize,
    max: usize,
    /// Odd while a removal moves entries; a look-up it overlapped is repeated.
    seq: AtomicU64,
    /// The current tick (never 0), advanced every [`TICK_ADDS`] new partitions.
    tick: AtomicU32,
    /// What writers change, on its own cache lines so that look-ups never miss on it.
    w: WriteSide,
    /// What a fleet feeds the table ([`Feed`]).
    feed: Feed,
}

#[repr(align(64))]
struct WriteSide {
    lock: Mutex<Writer>,
    len: AtomicUsize,
    /// Bumped on every change; the persister saves when it moved.
    generation: AtomicU64,
    /// `$WSPT` entries that added or changed a partition.
    learned: AtomicU64,
    /// `$WSPT` values or entries refused (malformed, oversized, unknown clone, over quota).
    rejected: AtomicU64,
    /// Entries evicted to make room for new partitions.
    evicted: AtomicU64,
}

/// State of the one writer at a time.
struct Writer {
    /// Where the next eviction starts looking ([`evict`]).
    hand: usize,
    /// Partitions added since start, for the tick.
    added: u64,
    /// What `$WSPT` changed, for a fleet to publish (`journal.rs`); off without one.
    journal: journal::Journal,
}

impl PartitionTable {
    /// A table for at most `max` partitions.
    pub fn new(max: usize) -> PartitionTable {
        let slots = (max.max(1) * 2).next_power_of_two();
        PartitionTable {
            keys: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            slots: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            mask: slots - 1,
            max,
            seq: AtomicU64::new(0),
            tick: AtomicU32::new(1),
            w: WriteSide {
                lock: Mutex::new(Writer {
                    hand: 0,
                    added: 0,
                    journal: Default::default(),
                }),
                len: AtomicUsize::new(0),
                generation: AtomicU64::new(0),
                learned: AtomicU64::new(0),
                rejected: AtomicU64::new(0),
                evicted: AtomicU64::new(0),
            },
            feed: Feed::default(),
        }
    }

    /// What a fleet feeds the table, and the requests waiting for it.
    pub fn feed(&self) -> &Feed {
        &self.feed
    }

    pub fn len(&self) -> usize {
        self.w.len.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn max(&self) -> usize {
        self.max
    }

    pub fn generation(&self) -> u64 {
        self.w.generation.load(Acquire)
    }

    pub fn count_learned(&self, n: u64) {
        self.w.learned.fetch_add(n, Relaxed);
    }

    pub fn count_rejected(&self, n: u64) {
        self.w.rejected.fetch_add(n, Relaxed);
    }

    /// `$WSPT` entries that changed the table, since start.
    pub fn learned(&self) -> u64 {
        self.w.learned.load(Relaxed)
    }

    /// `$WSPT` values and entries refused, since start.
    pub fn rejected(&self) -> u64 {
        self.w.rejected.load(Relaxed)
    }

    /// Entries evicted to make room for new partitions, since start.
    pub fn evicted(&self) -> u64 {
        self.w.evicted.load(Relaxed)
    }

    /// The clone tag for `partition`, if known; marks the entry used (the request path).
    pub fn get(&self, partition: &[u8]) -> Option<u32> {
        self.get_key(partition_key(partition))
    }

    /// The clone tag for a partition key (see [`partition_key`]); marks the entry used.
    pub fn get_key(&self, key: u64) -> Option<u32> {
        let (i, slot) = self.find(key)?;
        let now = USED | self.tick.load(Relaxed);
        if stamp_of(slot) != now {
            // Fails, harmlessly, when a writer changed the slot meanwhile.
            let new = pack(tag_of(slot), now);
            let _ = self.slots[i].compare_exchange(slot, new, Relaxed, Relaxed);
        }
        Some(tag_of(slot))
    }

    /// The clone tag for `partition`, without marking it used (status pages, tests).
    pub fn peek(&self, partition: &[u8]) -> Option<u32> {
        self.find(partition_key(partition)).map(|(_, s)| tag_of(s))
    }

    /// Whether a request has looked `partition` up.
    pub fn is_used(&self, partition: &[u8]) -> bool {
        let found = self.find(partition_key(partition));
        found.is_some_and(|(_, s)| stamp_of(s) & USED != 0)
    }

    /// The slot and value of `key`, consistent with some moment of the look-up.
    fn find(&self, key: u64) -> Option<(usize, u64)> {
        for _ in 0..READ_TRIES {
            let seq = self.seq.load(Acquire);
            if seq & 1 == 0 {
                let found = self.probe(key);
                fence(Acquire);
                if self.seq.load(Relaxed) == seq {
                    return found;
                }
            }
            std::hint::spin_loop();
        }
        // A writer stalled in a removal: a miss now is better than waiting for it.
        None
    }

    /// Linear probing from the key's home slot; exact under the writers' lock.
    fn probe(&self, key: u64) -> Option<(usize, u64)> {
        let mut i = key as usize & self.mask;
        // Bounded, so that a look-up racing writers cannot loop.
        for _ in 0..=self.mask {
            match self.keys[i].load(Acquire) {
                0 => return None,
                k if k == key => {
                    let slot = self.slots[i].load(Acquire);
                    return (tag_of(slot) != 0).then_some((i, slot));
                }
                _ => i = (i + 1) & self.mask,
            }
        }
        None
    }

    /// Maps `partition` to the clone with tag `clone` (non-zero), evicting when full.
    pub fn insert(&self, partition: &[u8], clone: u32) -> Insert {
        self.insert_key(partition_key(partition), clone)
    }

    /// Maps a partition key to `clone`; when the key is new and the table full, evicts an
    /// entry (`partitions/evict.rs`) to make room.
    pub fn insert_key(&self, key: u64, clone: u32) -> Insert {
        self.learn(key, clone, true, true)
    }

    /// Like [`insert_key`](Self::insert_key) for a known partition; refuses a new one.
    pub fn update_key(&self, key: u64, clone: u32) -> Insert {
        self.learn(key, clone, false, true)
    }

    /// Like [`insert_key`](Self::insert_key), for an entry another fleet instance learned:
    /// not written to the journal, so it is never published back.
    pub fn apply_key(&self, key: u64, clone: u32) -> Insert {
        self.learn(key, clone, true, false)
    }

    fn learn(&self, key: u64, clone: u32, may_add: bool, journal: bool) -> Insert {
        debug_assert!(clone != 0);
        // The steady state: a server repeats what the table holds. No lock, no store.
        match self.find(key) {
            Some((_, slot)) if tag_of(slot) == clone && stamp_of(slot) != 0 => {
                return Insert::Unchanged
            }
            // Over a response's quota: junk past it costs no lock.
            None if !may_add => return Insert::Refused,
            _ => {}
        }
        let mut w = self.lock();
        let tick = self.tick.load(Relaxed);
        if let Some((i, _)) = self.probe(key) {
            // Named by a server now: an unused entry counts as fresh from this tick.
            let restamp = |s: u32| if s & USED != 0 { s } else { tick };
            let old = self.slots[i].fetch_update(Release, Relaxed, |s| {
                Some(pack(clone, restamp(stamp_of(s))))
            });
            let old = old.unwrap_or_else(|s| s);
            if tag_of(old) == clone {
                return Insert::Unchanged;
            }
            self.w.generation.fetch_add(1, Release);
            if journal {
                w.journal.push(key, clone);
            }
            self.feed.changed();
            return Insert::Updated;
        }
        if !may_add {
            return Insert::Refused;
        }
        let evicted = self.len() >= self.max;
        if evicted && !self.evict(&mut w) {
            return Insert::Refused;
        }
        self.add(&mut w, key, pack(clone, tick));
        if journal {
            w.journal.push(key, clone);
        }
        self.feed.changed();
        if evicted {
            Insert::Evicted
        } else {
            Insert::Added
        }
    }

    /// Loads an entry of a saved table: never evicts (the table keeps what it has), and
    /// stamps it as loaded, `used` or not.
    pub fn load_key(&self, key: u64, clone: u32, used: bool) -> Insert {
        debug_assert!(clone != 0);
        let mut w = self.lock();
        let stamp = if used { USED } else { 0 };
        if let Some((i, _)) = self.probe(key) {
            let old = self.slots[i]
                .fetch_update(Release, Relaxed, |s| Some(pack(clone, stamp_of(s) | stamp)));
            let old = old.unwrap_or_else(|s| s);
            if tag_of(old) == clone {
                return Insert::Unchanged;
            }
            self.w.generation.fetch_add(1, Release);
            return Insert::Updated;
        }
        if self.len() >= self.max {
            return Insert::Refused;
        }
        self.add(&mut w, key, pack(clone, stamp));
        Insert::Added
    }

    /// Puts a new key in the first empty slot of its run (the writers' lock is held, there
    /// is room). Value first: a reader that sees the key sees its value.
    fn add(&self, w: &mut Writer, key: u64, slot: u64) {
        let mut i = key as usize & self.mask;
        while self.keys[i].load(Relaxed) != 0 {
            i = (i + 1) & self.mask;
        }
        self.slots[i].store(slot, Relaxed);
        self.keys[i].store(key, Release);
        self.w.len.fetch_add(1, Relaxed);
        self.w.generation.fetch_add(1, Release);
        w.added += 1;
        if w.added.is_multiple_of(TICK_ADDS) {
            let next = (self.tick.load(Relaxed) + 1) & TICK;
            self.tick.store(next.max(1), Relaxed);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.w.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entries a saved table should hold: those requests used, those servers named
    /// since this process started, and, with `loaded`, also those only loaded from a saved
    /// table and neither used nor named since. Dropping the last kind once a process has
    /// run a while is what keeps junk no request ever used from living on forever.
    pub fn entries_to_save(&self, loaded: bool) -> Vec<Entry> {
        let scan = || {
            let mut out = Vec::with_capacity(self.len());
            for (k, s) in self.keys.iter().zip(self.slots.iter()) {
                let (key, slot) = (k.load(Acquire), s.load(Acquire));
                let stamp = stamp_of(slot);
                if key != 0 && tag_of(slot) != 0 && (loaded || stamp != 0) {
                    let (clone, used) = (tag_of(slot), stamp & USED != 0);
                    out.push(Entry { key, clone, used });
                }
            }
            out
        };
        // A removal during the scan can move an entry past it: scan again, at worst under
        // the writers' lock.
        for _ in 0..3 {
            let seq = self.seq.load(Acquire);
            if seq & 1 == 0 {
                let out = scan();
                fence(Acquire);
                if self.seq.load(Relaxed) == seq {
                    return out;
                }
            }
        }
        let _w = self.lock();
        scan()
    }
}
