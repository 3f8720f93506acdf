//! What a fleet knows of the sessions live on its draining servers, for `drain_rescue` in
//! a fleet: each instance publishes, per server, a Bloom filter of the session
//! fingerprints its session table holds live there; an instance rescues a stale cookie of
//! a draining server only when no instance's filter (its own table included) holds it.
//!
//! A filter is a snapshot of one instance's table, so the last one a process published
//! outlives it in Redis for one `session_timeout`, the longest its sessions may stay live.
//! Its errors all send a request to the draining server, as without `drain_rescue`: a
//! Bloom false positive (about 1 %, ten bits per session), or two sessions of equal
//! 26-bit fingerprints (the table's own, [`super::live_sessions`]).
//!
//! Wire form: `TSF1`, the number of hashes, a flag byte (1: the table evicted a live session
//! within a timeout, so it does not know them all), two zero bytes, then the filter's 64-bit
//! words, little-endian.

use fastbloom::BloomFilter;

const MAGIC: &[u8; 4] = b"TSF1";
const HEADER: usize = 8;
/// Every instance hashes alike (the fingerprints are already the fleet's keyed hash).
const SEED: u128 = 0x7e7e_5e55_d1a1_0001;
/// Bits per session and hashes: about 1 % false positives.
const BITS_PER_SESSION: usize = 10;
const HASHES: u32 = 7;
/// The smallest filter (an empty server's).
const MIN_BITS: usize = 512;

/// One instance's filter of one server's live sessions.
pub struct SeenFilter {
    bloom: BloomFilter,
    /// The instance's table evicted a live session within a timeout.
    incomplete: bool,
}

impl SeenFilter {
    /// A filter of `fingerprints` (as [`super::LiveSessions::fingerprints`] gives them).
    pub fn of(fingerprints: &[u32], incomplete: bool) -> SeenFilter {
        let bits = (fingerprints.len() * BITS_PER_SESSION).max(MIN_BITS);
        let mut bloom = BloomFilter::with_num_bits(bits).seed(&SEED).hashes(HASHES);
        for fp in fingerprints {
            bloom.insert(fp);
        }
        SeenFilter { bloom, incomplete }
    }

    pub fn contains(&self, fingerprint: u32) -> bool {
        self.bloom.contains(&fingerprint)
    }

    pub fn incomplete(&self) -> bool {
        self.incomplete
    }

    pub fn encode(&self) -> Vec<u8> {
        let words = self.bloom.as_slice();
        let mut out = Vec::with_capacity(HEADER + words.len() * 8);
        out.extend_from_slice(MAGIC);
        out.push(self.bloom.num_hashes() as u8);
        out.push(u8::from(self.incomplete));
        out.extend_from_slice(&[0, 0]);
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// A filter as [`Self::encode`] wrote it; `None` for anything else (garbage under a
    /// fleet key, or another version's form).
    pub fn decode(bytes: &[u8]) -> Option<SeenFilter> {
        let (head, body) = bytes.split_at_checked(HEADER)?;
        let hashes = u32::from(head[4]);
        if &head[..4] != MAGIC || !(1..=32).contains(&hashes) || head[5] > 1 {
            return None;
        }
        if body.is_empty() || body.len() % 8 != 0 {
            return None;
        }
        let words = body
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        let bloom = BloomFilter::from_vec(words).seed(&SEED).hashes(hashes);
        Some(SeenFilter {
            bloom,
            incomplete: head[5] == 1,
        })
    }
}

/// The fleet's filters of a cluster's draining servers, as the fleet task last read them.
pub struct FleetSeen {
    /// Per server index: every instance's filter when the fleet's knowledge of the server
    /// is complete, else `None` (not draining, or not long enough, or a filter missing).
    servers: Vec<Option<Vec<SeenFilter>>>,
    /// When it was read ([`super::now_ms`]).
    read_ms: u64,
}

/// Past this age the fleet's view is not trusted (Redis is gone or the task is behind): a
/// stale cookie goes to its draining server, as without `drain_rescue`.
pub const FRESH_MS: u64 = 3_000;

impl FleetSeen {
    pub fn new(servers: Vec<Option<Vec<SeenFilter>>>, read_ms: u64) -> FleetSeen {
        FleetSeen { servers, read_ms }
    }

    /// Is session `fingerprint` known to the fleet to be live on no instance's `server`?
    /// `false` when the fleet's knowledge of `server` is incomplete or old.
    pub fn stale_on(&self, server: usize, fingerprint: u32, now_ms: u64) -> bool {
        self.knows(server, now_ms)
            && self.servers[server]
                .iter()
                .flatten()
                .all(|f| !f.contains(fingerprint))
    }

    /// Does the fleet know `server`'s sessions, as read a moment before `now_ms`?
    pub fn knows(&self, server: usize, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.read_ms) <= FRESH_MS
            && matches!(self.servers.get(server), Some(Some(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_holds_what_it_was_made_of_and_round_trips() {
        let fps: Vec<u32> = (0..10_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let f = SeenFilter::of(&fps, false);
        let back = SeenFilter::decode(&f.encode()).expect("its own form");
        assert!(
            fps.iter().all(|&fp| back.contains(fp)),
            "no false negatives"
        );
        assert!(!back.incomplete());
        // Other fingerprints: about 1 % false positives.
        let made: std::collections::HashSet<u32> = fps.iter().copied().collect();
        let others: Vec<u32> = (0..100_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x8000_0001)
            .filter(|fp| !made.contains(fp))
            .collect();
        let false_pos = others.iter().filter(|&&fp| back.contains(fp)).count();
        println!("{false_pos} false positives in {}", others.len());
        assert!(false_pos * 50 < others.len(), "{false_pos} false positives");
        assert!(SeenFilter::decode(&SeenFilter::of(&[], true).encode())
            .expect("empty")
            .incomplete());
    }

    #[test]
    fn garbage_is_no_filter() {
        let good = SeenFilter::of(&[1, 2, 3], false).encode();
        assert!(SeenFilter::decode(b"").is_none());
        assert!(SeenFilter::decode(b"TSF1").is_none());
        assert!(SeenFilter::decode(&good[..good.len() - 1]).is_none());
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(SeenFilter::decode(&bad).is_none());
        let mut bad = good.clone();
        bad[4] = 0;
        assert!(SeenFilter::decode(&bad).is_none());
        let mut bad = good;
        bad[5] = 7;
        assert!(SeenFilter::decode(&bad).is_none());
    }

    #[test]
    fn stale_only_where_every_filter_is_known_and_fresh() {
        let a = SeenFilter::of(&[10, 11], false);
        let b = SeenFilter::of(&[20], false);
        let seen = FleetSeen::new(vec![Some(vec![a, b]), None], 1_000);
        assert!(!seen.stale_on(0, 10, 1_500), "live on instance a");
        assert!(!seen.stale_on(0, 20, 1_500), "live on instance b");
        assert!(seen.stale_on(0, 30, 1_500));
        assert!(!seen.stale_on(1, 30, 1_500), "server 1 not known");
        assert!(!seen.stale_on(2, 30, 1_500), "no such server");
        assert!(
            !seen.stale_on(0, 30, 1_000 + FRESH_MS + 1),
            "read too long ago"
        );
    }
}
