//! The changes `$WSPT` made to a partition table, kept for a fleet to publish.
//!
//! Off by default: a table whose cluster is not shared never records anything. Writers
//! already hold the table's lock when they change it (learning is rare), so recording is a
//! push onto a vector under that lock; the fleet's sync task takes the whole vector every
//! tick. The vector is bounded: past [`MAX_PENDING`] changes not yet taken, further ones
//! are dropped and counted, and the sync task republishes the whole table instead.

use super::PartitionTable;
use std::time::{SystemTime, UNIX_EPOCH};

/// Changes kept between two takes, at most.
pub const MAX_PENDING: usize = 1 << 20;

/// One change: partition key, clone tag, and when it was learned (ms since the Unix epoch:
/// it travels to other instances, which order changes by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub key: u64,
    pub clone: u32,
    pub at_ms: u64,
}

#[derive(Default)]
pub(super) struct Journal {
    on: bool,
    changes: Vec<Change>,
    /// Changes dropped because `changes` was full, since the last take.
    dropped: u64,
}

pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Journal {
    pub(super) fn push(&mut self, key: u64, clone: u32) {
        if !self.on {
            return;
        }
        if self.changes.len() >= MAX_PENDING {
            self.dropped += 1;
            return;
        }
        self.changes.push(Change {
            key,
            clone,
            at_ms: wall_ms(),
        });
    }
}

impl PartitionTable {
    /// Starts recording changes `$WSPT` makes (a fleet shares this table).
    pub fn record_changes(&self) {
        self.lock().journal.on = true;
    }

    /// The changes recorded since the last call, and how many were dropped (the journal was
    /// full: the caller should republish the whole table).
    pub fn take_changes(&self) -> (Vec<Change>, u64) {
        let mut w = self.lock();
        let dropped = std::mem::take(&mut w.journal.dropped);
        (std::mem::take(&mut w.journal.changes), dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::Insert;

    #[test]
    fn only_changes_learned_here_are_recorded_and_only_when_asked() {
        let t = PartitionTable::new(16);
        assert_eq!(t.insert_key(1, 7), Insert::Added);
        assert!(t.take_changes().0.is_empty(), "off by default");
        t.record_changes();
        assert_eq!(t.insert_key(2, 7), Insert::Added);
        assert_eq!(t.insert_key(2, 7), Insert::Unchanged);
        assert_eq!(t.update_key(1, 8), Insert::Updated);
        assert_eq!(t.apply_key(3, 9), Insert::Added);
        assert_eq!(t.apply_key(1, 9), Insert::Updated);
        let (changes, dropped) = t.take_changes();
        let got: Vec<(u64, u32)> = changes.iter().map(|c| (c.key, c.clone)).collect();
        assert_eq!(
            got,
            vec![(2, 7), (1, 8)],
            "applied entries are not recorded"
        );
        assert_eq!(dropped, 0);
        assert!(changes.iter().all(|c| c.at_ms > 0));
        assert!(t.take_changes().0.is_empty(), "taken once");
    }
}
