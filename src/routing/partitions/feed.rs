//! What a fleet feeds one partition table: whether it is in sync with the fleet now, a
//! wake-up for requests waiting for a partition another instance may have just learned,
//! and which sessions waited in vain lately (they do not wait again).
//!
//! Another instance publishes what it learns every 100 ms. Until this one applies it, a
//! session made there a moment ago names a partition unknown here, and the hash fallback
//! would send it with `$WSFO` to a server that then takes the partition over from its
//! owner, which is up: IBM PK48101 across a fleet. Likewise, a moment after another
//! instance failed a dead clone's partition over, a failover here would send a second
//! `$WSFO`, to the new owner whose affinity holds: IBM PM30968 across a fleet. So such
//! requests wait for the fleet first (`pipeline/fleet_wait.rs`), while the table is fed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Sessions remembered as having waited in vain (by their key's low bits).
const MISSES: usize = 256;
/// A request without a session key does not wait within this long of one that waited in
/// vain.
const KEYLESS_QUIET_MS: u64 = 10_000;

pub struct Feed {
    fed: AtomicBool,
    changed: Notify,
    missed: Box<[AtomicU64]>,
    /// When a request without a session key last waited in vain (ms, `routing::now_ms`).
    keyless_missed_ms: AtomicU64,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            fed: AtomicBool::new(false),
            changed: Notify::new(),
            missed: (0..MISSES).map(|_| AtomicU64::new(0)).collect(),
            keyless_missed_ms: AtomicU64::new(0),
        }
    }
}

impl Feed {
    /// The fleet is in sync (or no longer is).
    pub fn set_fed(&self, fed: bool) {
        self.fed.store(fed, Relaxed);
    }

    pub fn is_fed(&self) -> bool {
        self.fed.load(Relaxed)
    }

    /// The table changed: requests waiting for a partition look again.
    pub(super) fn changed(&self) {
        self.changed.notify_waiters();
    }

    /// Resolves at the table's next change (enable it before looking, so none is missed).
    pub fn next_change(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// Should a request of the session `key` wait for the fleet (`now`: ms)?
    pub fn may_wait(&self, key: Option<u64>, now: u64) -> bool {
        if !self.is_fed() {
            return false;
        }
        match key {
            Some(k) => self.missed[k as usize % MISSES].load(Relaxed) != k,
            None => now.saturating_sub(self.keyless_missed_ms.load(Relaxed)) >= KEYLESS_QUIET_MS,
        }
    }

    /// A request of the session `key` waited and the fleet did not know its partition.
    pub fn waited_in_vain(&self, key: Option<u64>, now: u64) {
        match key {
            Some(k) => self.missed[k as usize % MISSES].store(k, Relaxed),
            None => self.keyless_missed_ms.store(now, Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_only_while_fed_and_once_per_session_in_vain() {
        let f = Feed::default();
        assert!(!f.may_wait(Some(7), 0), "not fed: no fleet to wait for");
        f.set_fed(true);
        assert!(f.may_wait(Some(7), 0));
        f.waited_in_vain(Some(7), 0);
        assert!(!f.may_wait(Some(7), 0), "waited in vain: not again");
        assert!(f.may_wait(Some(8), 0), "another session still waits");
        assert!(f.may_wait(None, 20_000));
        f.waited_in_vain(None, 20_000);
        assert!(!f.may_wait(None, 25_000));
        assert!(f.may_wait(None, 30_000));
    }
}
