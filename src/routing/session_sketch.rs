//! A fleet's live sessions: each instance keeps, per server and wall-clock
//! minute, a HyperLogLog of the sessions it served, in the register layout of Redis's own
//! (16,384 six-bit registers); the fleet task merges them into Redis (`PFMERGE` of a dense
//! `HYLL` string) and counts the fleet's live sessions with `PFCOUNT` over the minutes of a
//! `session_timeout`. All instances hash session ids alike (a seed from the fleet's key
//! prefix), so a session served by two instances counts once. About 0.8 % error (Redis's
//! HyperLogLog), minute resolution.
//!
//! The request path sets one register with an atomic `fetch_max` (no lock, no
//! allocation). Three minutes are kept: the one being written, the one before (published
//! once more after it ends), and the next, which the fleet task empties before it starts.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};

const P: u32 = 14;
const REGISTERS: usize = 1 << P;
/// Redis's dense HyperLogLog: `HYLL`, encoding 0, three unused bytes, eight bytes of
/// cached cardinality, then 16,384 six-bit registers.
const HEADER: usize = 16;
pub const DENSE_BYTES: usize = HEADER + REGISTERS * 6 / 8;

struct Bucket {
    /// The wall-clock minute it holds (0: none).
    minute: AtomicU64,
    /// Per server, its registers.
    registers: Box<[AtomicU8]>,
    /// Per server: a register grew since it was last published.
    dirty: Box<[AtomicBool]>,
}

pub struct SessionSketch {
    servers: usize,
    buckets: [Bucket; 3],
    /// The fleet's live sessions per server as last counted, and when (ms since the Unix
    /// epoch; 0: never).
    fleet: Box<[AtomicU64]>,
    fleet_at: AtomicU64,
}

impl SessionSketch {
    pub fn new(servers: usize) -> SessionSketch {
        let bucket = || Bucket {
            minute: AtomicU64::new(0),
            registers: (0..servers * REGISTERS).map(|_| AtomicU8::new(0)).collect(),
            dirty: (0..servers).map(|_| AtomicBool::new(false)).collect(),
        };
        SessionSketch {
            servers,
            buckets: [bucket(), bucket(), bucket()],
            fleet: (0..servers).map(|_| AtomicU64::new(0)).collect(),
            fleet_at: AtomicU64::new(0),
        }
    }

    /// Session `key` (the fleet-wide hash) served by `server` in wall minute `minute`.
    pub fn add(&self, server: usize, key: u64, minute: u64) {
        if server >= self.servers {
            return;
        }
        let b = &self.buckets[(minute % 3) as usize];
        if b.minute.load(Relaxed) != minute {
            // Not prepared yet (the fleet task is behind): this one is not counted.
            return;
        }
        let index = (key as usize) & (REGISTERS - 1);
        let rank = ((key >> P) | (1 << (64 - P))).trailing_zeros() as u8 + 1;
        if b.registers[server * REGISTERS + index].fetch_max(rank, Relaxed) < rank {
            b.dirty[server].store(true, Relaxed);
        }
    }

    /// Makes `minute` and the one after ready to be written (the fleet task, each tick):
    /// a bucket holding an older minute is emptied and given the new one.
    pub fn prepare(&self, minute: u64) {
        for m in [minute, minute + 1] {
            let b = &self.buckets[(m % 3) as usize];
            if b.minute.load(Relaxed) != m {
                b.registers.iter().for_each(|r| r.store(0, Relaxed));
                b.dirty.iter().for_each(|d| d.store(false, Relaxed));
                b.minute.store(m, Relaxed);
            }
        }
    }

    /// `server`'s sessions of `minute` as Redis's dense HyperLogLog, if that minute is
    /// held and a register grew since the last time (which this one clears).
    pub fn take_dense(&self, server: usize, minute: u64) -> Option<Vec<u8>> {
        let b = &self.buckets[(minute % 3) as usize];
        if server >= self.servers || b.minute.load(Relaxed) != minute {
            return None;
        }
        if !b.dirty[server].swap(false, Relaxed) {
            return None;
        }
        self.dense(server, minute)
    }

    /// `server`'s sessions of `minute` as Redis's dense HyperLogLog, if that minute is
    /// held and any session was seen.
    pub fn dense(&self, server: usize, minute: u64) -> Option<Vec<u8>> {
        let b = &self.buckets[(minute % 3) as usize];
        if server >= self.servers || b.minute.load(Relaxed) != minute {
            return None;
        }
        let regs = &b.registers[server * REGISTERS..(server + 1) * REGISTERS];
        if regs.iter().all(|r| r.load(Relaxed) == 0) {
            return None;
        }
        let mut out = vec![0u8; DENSE_BYTES];
        out[..4].copy_from_slice(b"HYLL");
        // The cached cardinality is marked stale: Redis computes it.
        out[15] = 0x80;
        for (i, r) in regs.iter().enumerate() {
            let v = r.load(Relaxed).min(63) as u16;
            let bit = i * 6;
            let (byte, shift) = (HEADER + bit / 8, bit % 8);
            let spread = v << shift;
            out[byte] |= spread as u8;
            if shift > 2 {
                out[byte + 1] |= (spread >> 8) as u8;
            }
        }
        Some(out)
    }

    /// Records the fleet's count of `server`'s live sessions, counted at `at_ms`.
    pub fn set_fleet(&self, server: usize, live: u64, at_ms: u64) {
        if let Some(f) = self.fleet.get(server) {
            f.store(live, Relaxed);
            self.fleet_at.store(at_ms, Relaxed);
        }
    }

    /// The fleet's live sessions on `server`, and when they were counted (Unix ms).
    pub fn fleet(&self, server: usize) -> Option<(u64, u64)> {
        let at = self.fleet_at.load(Relaxed);
        (at != 0).then(|| (self.fleet.get(server).map_or(0, |f| f.load(Relaxed)), at))
    }

    /// Bytes the registers take.
    pub fn bytes(&self) -> usize {
        3 * self.servers * REGISTERS
    }
}

/// The wall-clock minute of a [`super::now_ms`] reading, without reading the wall clock.
pub fn wall_minute(now_ms: u64) -> u64 {
    static WALL_AT_START: once_cell::sync::Lazy<u64> = once_cell::sync::Lazy::new(|| {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        wall.saturating_sub(super::now_ms())
    });
    (*WALL_AT_START + now_ms) / 60_000
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's dense register read-back (`HLL_DENSE_GET_REGISTER`).
    fn register(dense: &[u8], i: usize) -> u8 {
        let bit = i * 6;
        let (b0, fb) = (HEADER + bit / 8, bit % 8);
        let b1 = dense.get(b0 + 1).copied().unwrap_or(0) as u16;
        (((dense[b0] as u16 >> fb) | (b1 << (8 - fb))) & 63) as u8
    }

    #[test]
    fn registers_pack_as_redis_reads_them() {
        let s = SessionSketch::new(2);
        s.prepare(100);
        assert_eq!(s.dense(0, 100), None, "nothing seen");
        for k in 0..5000u64 {
            s.add(1, k.wrapping_mul(0x9E37_79B9_7F4A_7C15), 100);
        }
        s.add(0, 0, 101);
        let d = s.take_dense(1, 100).unwrap();
        assert_eq!(s.take_dense(1, 100), None, "published: nothing new");
        assert_eq!(d.len(), DENSE_BYTES);
        assert_eq!(&d[..4], b"HYLL");
        let b = &s.buckets[1];
        for i in 0..REGISTERS {
            assert_eq!(
                register(&d, i),
                b.registers[REGISTERS + i].load(Relaxed),
                "register {i}"
            );
        }
        assert_eq!(s.dense(1, 99), None, "a minute not held");
        assert!(s.dense(0, 101).is_some(), "the next minute was prepared");
        s.prepare(102);
        assert_eq!(s.dense(1, 100), None, "emptied for 103");
    }
}
