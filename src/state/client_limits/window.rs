//! Requests per client in a sliding window, in memory fixed at creation: a count-min sketch
//! with conservative update whose cells hold the current and the previous window's counts.
//!
//! The estimate is Cloudflare's sliding window, `prev × (1 − f) + cur` with `f` the part of
//! the current window gone by (pingora-limits' `PROPORTIONAL_RATE_ESTIMATE_CALC_FN`). Each
//! cell is one `u64`: a 24-bit window tag and two 20-bit counts, rolled forward lazily by
//! whoever touches it, so no window ever clears the table (pingora-limits' `Rate` clears a
//! whole estimator in the request that crosses an interval, milliseconds at this size, and
//! asserts on thread timing). A count-min estimate never undercounts: a client is never
//! refused below its limit by a collision with others' counts being too low, only, rarely,
//! a little early (the error is measured in `tests` below and stated in DESIGN section 9).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Rows of the sketch (independent hash positions per key).
const ROWS: usize = 4;
/// The fewest cells per row.
const FEWEST: usize = 1 << 10;
const COUNT_BITS: u32 = 20;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const TAG_MASK: u64 = (1 << 24) - 1;
/// The most requests a window may allow (a count saturates above it).
pub const MOST: u32 = COUNT_MAX as u32 - 1;

pub struct Window {
    cells: Box<[AtomicU64]>,
    /// Cells per row, less one (a power of two, less one).
    mask: usize,
    window_ms: u64,
    hasher: ahash::RandomState,
}

/// One cell's counts, as of window `w`.
fn counts(cell: u64, w: u64) -> (u64, u64) {
    let tag = cell >> (2 * COUNT_BITS);
    let prev = (cell >> COUNT_BITS) & COUNT_MAX;
    let cur = cell & COUNT_MAX;
    if tag == w & TAG_MASK {
        (prev, cur)
    } else if tag == w.wrapping_sub(1) & TAG_MASK {
        (cur, 0)
    } else {
        (0, 0)
    }
}

fn cell(w: u64, prev: u64, cur: u64) -> u64 {
    (w & TAG_MASK) << (2 * COUNT_BITS) | prev << COUNT_BITS | cur.min(COUNT_MAX)
}

impl Window {
    /// A window sized for `clients` distinct clients in one window: `clients` rounded up
    /// to a power of two cells per row, 32 bytes per client (4 MiB for 100,000).
    pub fn new(window: Duration, clients: usize) -> Self {
        let slots = clients.next_power_of_two().max(FEWEST);
        Window {
            cells: (0..ROWS * slots).map(|_| AtomicU64::new(0)).collect(),
            mask: slots - 1,
            window_ms: (window.as_millis() as u64).max(1),
            hasher: ahash::RandomState::new(),
        }
    }

    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }

    /// The bytes its cells take.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.cells.len() * std::mem::size_of::<AtomicU64>()
    }

    /// The cell of `key` in each row (double hashing from one 64-bit hash).
    fn cells_of(&self, key: u128) -> [usize; ROWS] {
        let h = self.hasher.hash_one(key);
        let (a, b) = (h as u32 as usize, (h >> 32) as u32 as usize | 1);
        let slots = self.mask + 1;
        std::array::from_fn(|r| r * slots + (a.wrapping_add(r.wrapping_mul(b)) & self.mask))
    }

    /// Counts a request of `key` at `now_ms` when the estimate stays within `limit`;
    /// otherwise it is not counted, and the answer is how long until one would be allowed.
    pub fn admit(&self, key: u128, limit: u32, now_ms: u64) -> Result<(), Duration> {
        let w = now_ms / self.window_ms;
        let f = (now_ms % self.window_ms) as f64 / self.window_ms as f64;
        let at = self.cells_of(key);
        // A lost race on a cell starts over; a few rounds bound the work under contention
        // (the request is then let through, uncounted).
        for _ in 0..4 {
            let seen: [u64; ROWS] = std::array::from_fn(|r| self.cells[at[r]].load(Relaxed));
            let rows: [(u64, u64); ROWS] = std::array::from_fn(|r| counts(seen[r], w));
            let prev = rows.iter().map(|c| c.0).min().unwrap_or(0);
            let cur = rows.iter().map(|c| c.1).min().unwrap_or(0);
            if prev as f64 * (1.0 - f) + cur as f64 + 1.0 > f64::from(limit) {
                return Err(retry_after(prev, cur, f, limit, self.window()));
            }
            // Conservative update: only the rows at the minimum grow.
            let raced = (0..ROWS).any(|r| {
                rows[r].1 == cur
                    && self.cells[at[r]]
                        .compare_exchange(seen[r], cell(w, rows[r].0, cur + 1), Relaxed, Relaxed)
                        .is_err()
            });
            if !raced {
                return Ok(());
            }
        }
        Ok(())
    }

    #[cfg(test)]
    /// The sliding-window estimate of `key`'s requests at `now_ms`.
    pub fn estimate(&self, key: u128, now_ms: u64) -> f64 {
        let w = now_ms / self.window_ms;
        let f = (now_ms % self.window_ms) as f64 / self.window_ms as f64;
        let rows = self
            .cells_of(key)
            .map(|i| counts(self.cells[i].load(Relaxed), w));
        let prev = rows.iter().map(|c| c.0).min().unwrap_or(0);
        let cur = rows.iter().map(|c| c.1).min().unwrap_or(0);
        prev as f64 * (1.0 - f) + cur as f64
    }
}

/// How long a client with `prev` and `cur` requests, `f` into the window, waits before one
/// more request fits `limit`, sending nothing meanwhile: within this window when `cur` leaves
/// room, else in the next (where `cur` becomes the previous window's count). At least 1 s,
/// in whole seconds (as `Retry-After` says it).
pub fn retry_after(prev: u64, cur: u64, f: f64, limit: u32, window: Duration) -> Duration {
    let limit = f64::from(limit);
    let (prev, cur) = (prev as f64, cur as f64);
    let windows = if cur + 1.0 <= limit {
        // prev × (1 − g) + cur + 1 ≤ limit, for g in (f, 1].
        let g = if prev > 0.0 {
            1.0 - (limit - cur - 1.0) / prev
        } else {
            0.0
        };
        (g - f).max(0.0)
    } else {
        // In the next window: cur × (1 − g) + 1 ≤ limit.
        (1.0 - f) + (1.0 - (limit - 1.0) / cur).max(0.0)
    };
    let secs = (windows * window.as_secs_f64()).ceil().max(1.0);
    Duration::from_secs(secs as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_client_gets_its_limit_per_window_then_waits() {
        let w = Window::new(SEC * 10, 1000);
        let t = 100_000; // the start of a window
        for i in 0..5 {
            assert_eq!(w.admit(7, 5, t + i), Ok(()), "request {i}");
        }
        // The sixth, early in the window: wait for the rest of it and then until the five
        // have slid out far enough: 10 s − 0 s + 10 s × (1 − 4/5) = 12 s.
        assert_eq!(w.admit(7, 5, t + 5), Err(SEC * 12));
        // Refused requests are not counted; another client is not limited.
        assert_eq!(w.estimate(7, t + 5), 5.0);
        assert_eq!(w.admit(8, 5, t + 5), Ok(()));
        // Half into the next window the estimate is 5 × 0.5 = 2.5: two more fit, not three.
        let half = t + 15_000;
        assert_eq!(w.admit(7, 5, half), Ok(()));
        assert_eq!(w.admit(7, 5, half), Ok(()));
        assert!(w.admit(7, 5, half).is_err());
        // Two windows later, nothing is left.
        assert_eq!(w.estimate(7, t + 30_000), 0.0);
        assert_eq!(w.admit(7, 5, t + 30_000), Ok(()));
    }

    #[test]
    fn retry_after_is_when_one_more_fits() {
        // When one more fits already (10 × 0.75 + 1 ≤ 10), the floor of a second.
        assert_eq!(retry_after(10, 0, 0.25, 10, SEC * 10), SEC);
        // 10 previous, 5 current, a quarter in: 10 × (1 − g) + 6 ≤ 10 at g = 0.6: 3.5 s.
        assert_eq!(retry_after(10, 5, 0.25, 10, SEC * 10), SEC * 4);
        // The current window is full: its rest, then until 1 more fits in the next.
        assert_eq!(retry_after(0, 10, 0.5, 10, SEC * 10), SEC * 6);
        // Never less than a second.
        assert_eq!(retry_after(1, 0, 0.999, 1, SEC), SEC);
    }

    #[test]
    fn tags_roll_and_saturate() {
        let c = cell(5, 3, 9);
        assert_eq!(counts(c, 5), (3, 9));
        assert_eq!(counts(c, 6), (9, 0));
        assert_eq!(counts(c, 7), (0, 0));
        // The tag wraps after 2^24 windows; a count saturates instead of spilling over.
        assert_eq!(counts(cell(TAG_MASK, 1, 2), TAG_MASK + 1), (2, 0));
        assert_eq!(counts(cell(1, 0, u64::MAX), 1), (0, COUNT_MAX));
    }

    /// How far the sketch over-counts a client it never saw, after `seen` distinct
    /// clients sent a request each in one window: the median, p99, p99.9 and most.
    fn over_count(clients: usize, seen: u128) -> (usize, [f64; 4]) {
        let w = Window::new(SEC, clients);
        let t = 50_000;
        for client in 0..seen {
            let _ = w.admit(client, 1_000, t);
        }
        let mut over: Vec<f64> = (1 << 64..(1 << 64) + 100_000u128)
            .map(|c| w.estimate(c, t))
            .collect();
        over.sort_by(f64::total_cmp);
        let p = |q: f64| over[((over.len() - 1) as f64 * q) as usize];
        (w.bytes(), [p(0.5), p(0.99), p(0.999), p(1.0)])
    }

    /// The error DESIGN section 9 states: a window sized for as many clients as come,
    /// and one that sees eight times more.
    #[test]
    fn a_million_clients_cost_others_little() {
        for (clients, seen) in [
            (1_000_000, 1_000_000),
            (100_000, 100_000),
            (100_000, 1_000_000),
        ] {
            let (bytes, [median, p99, p999, most]) = over_count(clients, seen);
            println!(
                "sized for {clients} clients ({} MiB), {seen} seen in one window: an unseen \
                 client's count, median {median}, p99 {p99}, p99.9 {p999}, max {most}",
                bytes >> 20
            );
            if seen as usize <= clients {
                assert!(p99 <= 1.0, "p99 over-count {p99}");
            }
        }
    }
}
