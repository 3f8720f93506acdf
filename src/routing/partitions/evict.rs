//! Making room in a full partition table: which entry goes, and removing it.
//!
//! A hand sweeps the slots, as in the CLOCK page-replacement algorithm. Each eviction looks
//! at the next [`WINDOW`] slots and takes the entry least worth keeping: one no request has
//! used before any used one, then the oldest stamp. Only when the window holds used entries
//! alone does it look further, up to [`MAX_SCAN`] slots, for an unused one. So an eviction
//! costs a bounded, sequential scan however the table is filled, and a table that a server
//! filled with junk gives up junk, not the partitions requests use.

use super::{stamp_of, PartitionTable, Writer, TICK, USED};
use std::sync::atomic::{fence, Ordering::*};

/// Slots an eviction always looks at.
const WINDOW: usize = 64;
/// Slots an eviction looks at, at most, for an entry no request has used.
const MAX_SCAN: usize = 1024;
/// Rank bit of an entry no request has used.
const UNUSED: u64 = 1 << 32;

/// How little an entry with `stamp` is worth keeping: unused above used, then by age.
fn loss_rank(stamp: u32, now: u32) -> u64 {
    let age = now.wrapping_sub(stamp & TICK) & TICK;
    let unused = if stamp & USED == 0 { UNUSED } else { 0 };
    unused | age as u64
}

impl PartitionTable {
    /// Evicts one entry (the writers' lock is held); false if the table holds none.
    pub(super) fn evict(&self, w: &mut Writer) -> bool {
        let now = self.tick.load(Relaxed);
        let mut best: Option<(u64, usize)> = None;
        let mut i = w.hand & self.mask;
        for scanned in 1..=self.mask + 1 {
            if self.keys[i].load(Relaxed) != 0 {
                let rank = loss_rank(stamp_of(self.slots[i].load(Relaxed)), now);
                if best.is_none_or(|(b, _)| rank > b) {
                    best = Some((rank, i));
                }
            }
            i = (i + 1) & self.mask;
            match best {
                Some((b, _)) if scanned >= WINDOW && b >= UNUSED => break,
                Some(_) if scanned >= MAX_SCAN => break,
                _ => {}
            }
        }
        let Some((_, victim)) = best else {
            return false;
        };
        self.remove(victim);
        // The slot may now hold an entry shifted back into it: look at it next time.
        w.hand = victim;
        self.w.evicted.fetch_add(1, Relaxed);
        true
    }

    /// Empties slot `hole` (the writers' lock is held). Later entries of its run move back
    /// into the hole when it lies on their probe path, so that no look-up ever stops short
    /// of them at an empty slot; no tombstone is left behind.
    fn remove(&self, mut hole: usize) {
        // Readers that overlap the moves see `seq` change and look again.
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq + 1, Relaxed);
        fence(Release);
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let key = self.keys[j].load(Relaxed);
            if key == 0 {
                break;
            }
            let home = key as usize & self.mask;
            // Distances back to its home and to the hole: the hole is on its path if the
            // home is not between the hole and the entry.
            if j.wrapping_sub(home) & self.mask >= j.wrapping_sub(hole) & self.mask {
                self.slots[hole].store(self.slots[j].load(Relaxed), Relaxed);
                self.keys[hole].store(key, Relaxed);
                hole = j;
            }
        }
        self.keys[hole].store(0, Relaxed);
        self.slots[hole].store(0, Relaxed);
        self.seq.store(seq + 2, Release);
        self.w.len.fetch_sub(1, Relaxed);
        self.w.generation.fetch_add(1, Release);
    }
}
