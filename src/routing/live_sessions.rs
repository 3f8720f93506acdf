//! Live sessions of one cluster: an exact table of hashed session ids, each with
//! the server it was last served by and when, lock-free on the request path.
//!
//! A session is live from the response that created it, or the first request seen carrying
//! it, until `session_timeout` after its last request. The table is an open-addressing array
//! of `AtomicU64` slots, each packing a fingerprint of the id's keyed hash, the server, and
//! the second it was last seen: one probe of neighbouring slots from the start of a cache
//! line (usually ending in that line) per request, no allocation, no lock. Expired slots
//! are free for the taking; the counts per server are read by a scan (status, metrics),
//! never kept on the request path.
//!
//! Error: two live sessions of one probe window with the same 26-bit fingerprint count as
//! one (about 0.25 per million sessions); past capacity, the stalest entry of a full probe
//! window is evicted, which is counted and makes [`LiveSessions::knows_all`] false for a
//! window.

use super::clock::now_ms;
use super::fleet_seen::FleetSeen;
use super::session_sketch::{wall_minute, SessionSketch};
use arc_swap::ArcSwapOption;
use std::sync::Arc;

/// In a fleet, every instance hashes session ids with these seeds (from the fleet's key
/// prefix), so that their sketches of one session agree.
static FLEET_SEEDS: once_cell::sync::OnceCell<[u64; 4]> = once_cell::sync::OnceCell::new();

/// Makes this process a fleet member for session counting: tables made from now on hash
/// alike across the fleet and keep sketches for the fleet's count (at start, before the
/// first snapshot).
pub fn join_fleet(key_prefix: &str) {
    let base = ahash::RandomState::with_seeds(0x7e7e, 0x5e55, 0x1d5, 0xf1ee7).hash_one(key_prefix);
    let seed =
        |i: u64| base.rotate_left(16 * i as u32) ^ 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i + 1);
    let _ = FLEET_SEEDS.set([seed(0), seed(1), seed(2), seed(3)]);
}
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64};

/// Slots probed at most for one key, from the start of its cache line (8 slots of 8
/// bytes): a probe stops at the first slot never used, so most end in the first line.
const PROBE: usize = 32;
/// A slot whose entry expired and was cleared by a scan: free, but not the end of a probe
/// (a slot never goes back to 0, so a probe may stop at the first 0).
const TOMB: u64 = 1;
const SEEN_BITS: u32 = 24;
const SERVER_BITS: u32 = 14;
const FP_BITS: u32 = 26;
/// Seconds wrap at this (194 days); an age is taken modulo it.
const SEEN_MOD: u64 = (1 << SEEN_BITS) - 1;
/// Servers past this index are not tracked.
pub const MAX_SERVERS: usize = 1 << SERVER_BITS;

/// What a request or response did to its session's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// Not live before: a new session (or one seen again after it expired).
    New,
    /// Live, on this server.
    Seen,
    /// Live, on another server: it moved here (a failover).
    Moved { from: usize },
    /// Not tracked (no room, or a server index past [`MAX_SERVERS`]).
    Untracked,
}

/// One server's sessions, as a scan counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerSessions {
    pub live: u64,
    /// Seconds from now until its last live session expires if no request comes (0: none).
    pub empty_in_s: u64,
}

pub struct LiveSessions {
    capacity: usize,
    slots: Box<[AtomicU64]>,
    mask: usize,
    hasher: ahash::RandomState,
    /// When it was made ([`now_ms`]).
    made_ms: u64,
    /// In a fleet: the sessions served per server and minute, for the fleet's count.
    sketch: Option<SessionSketch>,
    timeout_s: u64,
    /// Sessions created, per server (since start).
    created: Box<[AtomicU64]>,
    /// Stale sessions of a draining server balanced as new ones (`drain_rescue`), per server.
    rescued: Box<[AtomicU64]>,
    /// Entries per server stored and not yet taken out (by a scan clearing it once
    /// expired, or its slot's reuse): the live sessions, and those that expired since the
    /// last scan. Kept exact by compare-and-swap; `balance: sessions` reads it.
    live_now: Box<[AtomicI64]>,
    /// Live entries evicted for want of room, and when the last one was (seconds, +1).
    evicted: AtomicU64,
    last_eviction: AtomicU32,
    /// In a fleet with `drain_rescue`: what every instance holds live on draining servers,
    /// as the fleet task last read it.
    fleet_seen: ArcSwapOption<FleetSeen>,
}

// `AtomicU64` has the size and bit validity of `u64`; the alignment is checked here.
const _: () = assert!(std::mem::align_of::<u64>() == std::mem::align_of::<AtomicU64>());

/// `n` zeroed slots from a zeroed allocation: the system maps the pages only as they are
/// written, so a table for a million sessions costs memory for the sessions it holds.
fn zeroed(n: usize) -> Box<[AtomicU64]> {
    let plain: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    huge_pages(&plain);
    // SAFETY: same size, alignment (checked above) and bit validity; the box owns it.
    unsafe { Box::from_raw(Box::into_raw(plain) as *mut [AtomicU64]) }
}

/// Asks for transparent huge pages under the table (where the system gives them on
/// request): a request's look-up then costs a cache miss, not a TLB miss as well.
fn huge_pages(table: &[u64]) {
    const HUGE: usize = 2 << 20;
    let start = table.as_ptr() as usize;
    let end = start + std::mem::size_of_val(table);
    let (from, to) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if to > from {
        // SAFETY: advice on whole pages inside memory this process owns; it changes no
        // contents and may be refused.
        unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
    }
}

fn pack(fp: u64, server: usize, seen: u64) -> u64 {
    (fp << (SERVER_BITS + SEEN_BITS)) | ((server as u64) << SEEN_BITS) | seen
}

fn fp_of(v: u64) -> u64 {
    v >> (SERVER_BITS + SEEN_BITS)
}

fn server_of(v: u64) -> usize {
    ((v >> SEEN_BITS) & ((1 << SERVER_BITS) - 1)) as usize
}

fn seen_of(v: u64) -> u64 {
    v & ((1 << SEEN_BITS) - 1)
}

impl LiveSessions {
    /// A table for about `capacity` live sessions (twice as many slots, a power of two) of
    /// a cluster of `servers`, each live for `timeout_s` after its last request. The
    /// slots are zeroed pages the system maps only as they are used.
    pub fn new(capacity: usize, servers: usize, timeout_s: u64) -> LiveSessions {
        let slots = (capacity.max(PROBE) * 2).next_power_of_two();
        LiveSessions {
            capacity,
            slots: zeroed(slots),
            mask: slots - 1,
            hasher: match FLEET_SEEDS.get() {
                Some(&[a, b, c, d]) => ahash::RandomState::with_seeds(a, b, c, d),
                None => ahash::RandomState::new(),
            },
            sketch: FLEET_SEEDS.get().map(|_| {
                let s = SessionSketch::new(servers.min(MAX_SERVERS));
                s.prepare(wall_minute(now_ms()));
                s
            }),
            made_ms: now_ms(),
            timeout_s: timeout_s.clamp(1, SEEN_MOD / 2),
            created: (0..servers.min(MAX_SERVERS))
                .map(|_| AtomicU64::new(0))
                .collect(),
            rescued: (0..servers.min(MAX_SERVERS))
                .map(|_| AtomicU64::new(0))
                .collect(),
            live_now: (0..servers.min(MAX_SERVERS))
                .map(|_| AtomicI64::new(0))
                .collect(),
            evicted: AtomicU64::new(0),
            last_eviction: AtomicU32::new(0),
            fleet_seen: ArcSwapOption::empty(),
        }
    }

    /// The key of a session id: its keyed hash (an attacker cannot aim ids at one slot).
    pub fn key(&self, base_id: &[u8]) -> u64 {
        self.hasher.hash_one(base_id)
    }

    /// A session key's fingerprint, as the table and the fleet's filters keep it (never 0).
    pub fn fingerprint(key: u64) -> u32 {
        (key >> (64 - FP_BITS)).max(1) as u32
    }

    /// The time as stored: seconds of [`now_ms`] (never 0).
    pub fn now(&self) -> u64 {
        Self::at(now_ms())
    }

    /// The time as stored for a [`now_ms`] already read (a request's arrival).
    pub fn at(ms: u64) -> u64 {
        (ms / 1000) % SEEN_MOD + 1
    }

    fn age(&self, seen: u64, now: u64) -> u64 {
        (now + SEEN_MOD - seen) % SEEN_MOD
    }

    fn live(&self, v: u64, now: u64) -> bool {
        v > TOMB && self.age(seen_of(v), now) < self.timeout_s
    }

    /// Records that session `key` was served by `server` at `now` ([`Self::now`]).
    pub fn touch(&self, key: u64, server: usize, now: u64) -> Touch {
        if server >= self.created.len() {
            return Touch::Untracked;
        }
        let fp = u64::from(Self::fingerprint(key));
        let entry = pack(fp, server, now);
        let start = key as usize & self.mask;
        // The first free (never used, cleared or expired) slot, else the stalest one.
        let mut free = None;
        let mut stalest = (start, 0u64);
        for i in 0..PROBE {
            let at = (start + i) & self.mask;
            let slot = &self.slots[at];
            let v = slot.load(Relaxed);
            if v == 0 {
                // Never used: the session is not further on.
                free.get_or_insert((at, v));
                break;
            }
            if fp_of(v) == fp {
                // Each change is one compare-and-swap, so that the running counts move
                // once per change whatever other threads do to the slot meanwhile.
                if !self.live(v, now) {
                    if slot.compare_exchange(v, entry, Relaxed, Relaxed).is_err() {
                        return Touch::Seen;
                    }
                    self.gone(v);
                    return self.created(server);
                }
                let from = server_of(v);
                if v != entry
                    && slot.compare_exchange(v, entry, Relaxed, Relaxed).is_ok()
                    && from != server
                {
                    self.live_now[from].fetch_sub(1, Relaxed);
                    self.live_now[server].fetch_add(1, Relaxed);
                }
                return match from == server {
                    true => Touch::Seen,
                    false => Touch::Moved { from },
                };
            }
            if !self.live(v, now) {
                free.get_or_insert((at, v));
            } else {
                let age = self.age(seen_of(v), now);
                if age >= stalest.1 {
                    stalest = (at, age);
                }
            }
        }
        let (at, v) = match free {
            Some(f) => f,
            None => {
                self.evicted.fetch_add(1, Relaxed);
                self.last_eviction.store(now as u32, Relaxed);
                (stalest.0, self.slots[stalest.0].load(Relaxed))
            }
        };
        if self.slots[at]
            .compare_exchange(v, entry, Relaxed, Relaxed)
            .is_err()
        {
            // Another thread took the slot: this session is not kept, nor counted.
            return Touch::Untracked;
        }
        // What was there (an expired or an evicted session) is gone from its server.
        self.gone(v);
        self.created(server)
    }

    /// The entry `v`, which was live or not, left its slot: its server counts one fewer if
    /// it was counted (every entry stored was, until a scan or a reuse took it out).
    fn gone(&self, v: u64) {
        if v > TOMB {
            if let Some(c) = self.live_now.get(server_of(v)) {
                c.fetch_sub(1, Relaxed);
            }
        }
    }

    fn created(&self, server: usize) -> Touch {
        self.created[server].fetch_add(1, Relaxed);
        self.live_now[server].fetch_add(1, Relaxed);
        Touch::New
    }

    /// `server`'s live sessions (and those expired since the last scan); in a fleet, the
    /// fleet's count when it is larger.
    pub fn live_count(&self, server: usize) -> u64 {
        let here = self
            .live_now
            .get(server)
            .map_or(0, |c| c.load(Relaxed).max(0) as u64);
        let fleet = self
            .sketch
            .as_ref()
            .and_then(|s| s.fleet(server))
            .map_or(0, |f| f.0);
        here.max(fleet)
    }

    /// In a fleet: session `key` was served by `server` at `now_ms` ([`now_ms`]).
    pub fn seen_in_fleet(&self, key: u64, server: usize, now_ms: u64) {
        if let Some(s) = &self.sketch {
            s.add(server, key, wall_minute(now_ms));
        }
    }

    /// The fleet's sketches, in a fleet.
    pub fn sketch(&self) -> Option<&SessionSketch> {
        self.sketch.as_ref()
    }

    /// Is session `key` live on `server`?
    pub fn is_live_on(&self, key: u64, server: usize, now: u64) -> bool {
        let fp = u64::from(Self::fingerprint(key));
        let start = key as usize & self.mask;
        for i in 0..PROBE {
            let v = self.slots[(start + i) & self.mask].load(Relaxed);
            if v == 0 {
                return false;
            }
            if fp_of(v) == fp {
                return server_of(v) == server && self.live(v, now);
            }
        }
        false
    }

    /// Does the table know every live session: it has watched for a whole timeout, and
    /// evicted no live entry within one?
    pub fn knows_all(&self, now: u64) -> bool {
        let watched = now_ms().saturating_sub(self.made_ms) / 1000 >= self.timeout_s;
        watched && !self.evicted_within(now)
    }

    fn evicted_within(&self, now: u64) -> bool {
        let evicted = self.last_eviction.load(Relaxed) as u64;
        evicted != 0 && self.age(evicted, now) < self.timeout_s
    }

    /// Was a live entry evicted for want of room within a timeout (so that the table does
    /// not know every live session)?
    pub fn evicted_within_timeout(&self) -> bool {
        self.evicted_within(self.now())
    }

    /// Is session `key`, which names `server`, known to be live nowhere there (a stale
    /// cookie), at `now_ms` ([`now_ms`])? On one instance: the table, which has watched for
    /// a whole timeout, has not seen it; in a fleet: no instance's table holds it (the
    /// fleet's filters, read a moment ago). `false` whenever that is not known.
    pub fn is_stale_on(&self, key: u64, server: usize, now_ms: u64) -> bool {
        let now = Self::at(now_ms);
        if self.is_live_on(key, server, now) {
            return false;
        }
        match &self.sketch {
            None => self.knows_all(now),
            Some(_) => self
                .fleet_seen
                .load()
                .as_ref()
                .is_some_and(|f| f.stale_on(server, Self::fingerprint(key), now_ms)),
        }
    }

    /// Would a stale cookie of `server` be balanced as a new session now (`drain_rescue`)?
    pub fn rescue_ready(&self, server: usize) -> bool {
        match &self.sketch {
            None => self.knows_all(self.now()),
            Some(_) => self
                .fleet_seen
                .load()
                .as_ref()
                .is_some_and(|f| f.knows(server, now_ms())),
        }
    }

    /// In a fleet: what every instance holds live on draining servers (the fleet task).
    pub fn set_fleet_seen(&self, seen: Option<FleetSeen>) {
        self.fleet_seen.store(seen.map(Arc::new));
    }

    /// The fingerprints of the sessions live on each server now (a scan), for the fleet's
    /// filters.
    pub fn fingerprints(&self) -> Vec<Vec<u32>> {
        let now = self.now();
        let mut out = vec![Vec::new(); self.created.len()];
        for slot in self.slots.iter() {
            let v = slot.load(Relaxed);
            if self.live(v, now) {
                if let Some(fps) = out.get_mut(server_of(v)) {
                    fps.push(fp_of(v) as u32);
                }
            }
        }
        out
    }

    /// Which table this is within its process (when it was made, [`now_ms`]).
    pub fn id(&self) -> u64 {
        self.made_ms
    }

    /// Live sessions per server now, clearing expired slots on the way (which takes them
    /// out of [`Self::live_count`]).
    pub fn scan(&self) -> Vec<ServerSessions> {
        let now = self.now();
        let mut out = vec![ServerSessions::default(); self.created.len()];
        for slot in self.slots.iter() {
            let v = slot.load(Relaxed);
            if v <= TOMB {
                continue;
            }
            if !self.live(v, now) {
                // Cleared, so that its time cannot look fresh again when the clock wraps.
                if slot.compare_exchange(v, TOMB, Relaxed, Relaxed).is_ok() {
                    self.gone(v);
                }
                continue;
            }
            if let Some(s) = out.get_mut(server_of(v)) {
                s.live += 1;
                let left = self.timeout_s - self.age(seen_of(v), now);
                s.empty_in_s = s.empty_in_s.max(left);
            }
        }
        out
    }

    /// Sessions created on `server` since start.
    pub fn created_total(&self, server: usize) -> u64 {
        self.created.get(server).map_or(0, |c| c.load(Relaxed))
    }

    /// Counts a stale session of draining `server` balanced as a new one.
    pub fn count_rescue(&self, server: usize) {
        if let Some(c) = self.rescued.get(server) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Stale sessions of `server` balanced as new ones since start.
    pub fn rescued_total(&self, server: usize) -> u64 {
        self.rescued.get(server).map_or(0, |c| c.load(Relaxed))
    }

    /// Live entries evicted for want of room since start.
    pub fn evicted_total(&self) -> u64 {
        self.evicted.load(Relaxed)
    }

    /// Was it made for `capacity` sessions living `timeout_s`?
    pub fn fits(&self, capacity: usize, timeout_s: u64) -> bool {
        self.capacity == capacity && self.timeout_s == timeout_s.clamp(1, SEEN_MOD / 2)
    }

    pub fn timeout_s(&self) -> u64 {
        self.timeout_s
    }

    /// Bytes the table may use (its slots).
    pub fn bytes(&self) -> usize {
        self.slots.len() * 8
    }
}

#[cfg(test)]
mod tests;
