//! Noticing another live instance with this instance's name, from the heartbeats.
//!
//! Each heartbeat reads the field under this instance's name before writing it. Between two
//! of its writes, nobody else should have written there; when another process did (an
//! origin that is not ours), it is a sighting. Sightings that go on for longer than a
//! binary upgrade's overlap (the old process keeps running for 5 s after it handed its
//! sockets over, with the name kept in `state_dir`) are a conflict: logged, and shown in
//! `tether_shared_state_name_conflict` and `GET /status`. Entries are never dropped for
//! it: events are told apart by origin, not by name.

use super::keys::Beat;

/// Sightings must go on this long to be a conflict (longer than an upgrade's overlap).
pub const OVERLAP_MS: u64 = 8_000;
/// A conflict ends when no sighting came for this long.
pub const FORGET_MS: u64 = 3_000;

/// The other process last seen writing this instance's heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Other {
    pub origin: String,
    pub pid: u32,
    pub first_ms: u64,
    pub last_ms: u64,
}

/// What changed with one heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A conflict is declared now.
    Began(Other),
    /// The conflict ended (nobody else wrote for [`FORGET_MS`]).
    Ended(Other),
}

#[derive(Debug, Default)]
pub struct Watch {
    other: Option<Other>,
    declared: bool,
}

impl Watch {
    /// One heartbeat: `found` is what this instance's field held just before it writes its
    /// own, `mine` this process's origin, `now_ms` a clock of this process.
    pub fn observe(&mut self, found: Option<&Beat>, mine: &str, now_ms: u64) -> Option<Change> {
        match found.filter(|b| b.origin != mine) {
            Some(beat) => {
                let same = self.other.as_ref().is_some_and(|o| o.origin == beat.origin);
                let o = match &mut self.other {
                    Some(o) if same => o,
                    slot => slot.insert(Other {
                        origin: beat.origin.clone(),
                        pid: beat.pid,
                        first_ms: now_ms,
                        last_ms: now_ms,
                    }),
                };
                o.last_ms = now_ms;
                if !self.declared && o.last_ms - o.first_ms >= OVERLAP_MS {
                    self.declared = true;
                    return Some(Change::Began(o.clone()));
                }
                None
            }
            None => {
                let quiet = self
                    .other
                    .as_ref()
                    .is_some_and(|o| now_ms.saturating_sub(o.last_ms) >= FORGET_MS);
                if !quiet {
                    return None;
                }
                let o = self.other.take()?;
                std::mem::take(&mut self.declared).then_some(Change::Ended(o))
            }
        }
    }

    /// The other process while a conflict is declared.
    pub fn conflict(&self) -> Option<&Other> {
        self.other.as_ref().filter(|_| self.declared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(origin: &str) -> Beat {
        Beat {
            ms: 1,
            partitions: 0,
            pid: 7,
            origin: origin.into(),
        }
    }

    #[test]
    fn another_writer_for_longer_than_an_upgrade_is_a_conflict() {
        let mut w = Watch::default();
        let theirs = beat("bbbb");
        let mut began = None;
        for s in 0..=10 {
            if let Some(c) = w.observe(Some(&theirs), "aaaa", s * 1000) {
                began = Some((s, c));
            }
        }
        let (at, change) = began.expect("declared");
        assert_eq!(at, 8, "after OVERLAP_MS of sightings");
        assert!(matches!(change, Change::Began(ref o) if o.origin == "bbbb" && o.pid == 7));
        assert!(w.conflict().is_some());
        // It stops writing: the conflict ends once FORGET_MS passed without a sighting.
        assert_eq!(w.observe(Some(&beat("aaaa")), "aaaa", 11_000), None);
        assert_eq!(w.observe(Some(&beat("aaaa")), "aaaa", 12_000), None);
        assert!(matches!(
            w.observe(Some(&beat("aaaa")), "aaaa", 13_000),
            Some(Change::Ended(_))
        ));
        assert!(w.conflict().is_none());
    }

    #[test]
    fn an_upgrade_or_a_restart_is_not_a_conflict() {
        let mut w = Watch::default();
        // The predecessor's beat is there at the first read, and for 5 s more.
        for s in 0..=5 {
            assert_eq!(w.observe(Some(&beat("old")), "new", s * 1000), None);
        }
        for s in 6..=20 {
            assert_eq!(w.observe(Some(&beat("new")), "new", s * 1000), None);
        }
        assert!(w.conflict().is_none());
        // An empty field (a fresh fleet) says nothing either.
        assert_eq!(w.observe(None, "new", 21_000), None);
    }

    #[test]
    fn a_writer_that_predates_origins_counts_as_another() {
        let mut w = Watch::default();
        let old = beat("");
        let began = (0..=8).any(|s| w.observe(Some(&old), "aaaa", s * 1000).is_some());
        assert!(began);
    }
}
