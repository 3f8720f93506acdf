//! The circuit breaker of `route_lookup`: after `failures` look-up calls in a row fail, the
//! service is not asked for `cooldown`; then one probe call goes through, and its result
//! closes the breaker or opens it for another cool-down.
//!
//! Lock-free (a few atomics), and only requests that miss the cache touch it. Times are
//! milliseconds since the breaker was made, passed in so the tests need no clock.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A state change the caller reports (one log line, the gauge): each change from closed to
/// open and back is returned exactly once, to the call that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    None,
    Opened,
    Closed,
}

pub struct Breaker {
    threshold: u32,
    cooldown_ms: u64,
    born: Instant,
    /// Calls failed in a row.
    failures: AtomicU32,
    /// 0 while closed; while open, the time from which a probe may go. (Every change of
    /// state goes through one swap or compare-exchange of this, so it is seen once.)
    probe_at: AtomicU64,
    /// A probe call is under way: the others keep using the fallback.
    probing: AtomicBool,
}

/// Leave to ask the service once. A probe's permit dropped without a result (its request
/// was cancelled) frees the probe slot, so the breaker cannot stay open for good.
pub struct Permit<'a> {
    breaker: &'a Breaker,
    probe: bool,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            // At least 1 ms, so an open breaker's `probe_at` is never 0 (closed).
            cooldown_ms: (cooldown.as_millis() as u64).max(1),
            born: Instant::now(),
            failures: AtomicU32::new(0),
            probe_at: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// Milliseconds since the breaker was made.
    pub fn now(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }

    pub fn is_open(&self) -> bool {
        self.probe_at.load(Ordering::Acquire) != 0
    }

    /// A permit to ask the service, or `None` while the breaker is open (and during its
    /// probe).
    pub fn permit(&self, now: u64) -> Option<Permit<'_>> {
        let probe_at = self.probe_at.load(Ordering::Acquire);
        if probe_at == 0 {
            return Some(Permit {
                breaker: self,
                probe: false,
            });
        }
        if now < probe_at {
            return None;
        }
        // The cool-down is over: one request probes, the others still use the fallback.
        self.probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| Permit {
                breaker: self,
                probe: true,
            })
    }
}

impl Permit<'_> {
    /// The service answered (any answer it can give, even a rejected one: it is up).
    pub fn success(self) -> Change {
        let b = self.breaker;
        b.failures.store(0, Ordering::Relaxed);
        // Load first: while closed (nearly always) no write to the shared line.
        let closed =
            b.probe_at.load(Ordering::Acquire) != 0 && b.probe_at.swap(0, Ordering::AcqRel) != 0;
        // `self` drops here and frees the probe slot.
        if closed {
            Change::Closed
        } else {
            Change::None
        }
    }

    /// The call failed or timed out at `now`.
    pub fn failure(self, now: u64) -> Change {
        let b = self.breaker;
        let until = now + b.cooldown_ms;
        if self.probe {
            // The probe failed: another cool-down. (A swap, not a store: a call that began
            // before the breaker opened may have closed it meanwhile.)
            return if b.probe_at.swap(until, Ordering::AcqRel) == 0 {
                Change::Opened
            } else {
                Change::None
            };
        }
        let failed = b.failures.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if failed >= b.threshold
            && b.probe_at
                .compare_exchange(0, until, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            Change::Opened
        } else {
            Change::None
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.probe {
            self.breaker.probing.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asks(b: &Breaker, now: u64) -> bool {
        b.permit(now).is_some()
    }

    #[test]
    fn opens_after_failures_in_a_row_and_one_probe_closes_it() {
        let b = Breaker::new(3, Duration::from_millis(1000));
        // Two failures, then a success: the count starts again.
        for _ in 0..2 {
            assert_eq!(b.permit(0).unwrap().failure(0), Change::None);
        }
        assert_eq!(b.permit(0).unwrap().success(), Change::None);
        assert_eq!(b.permit(0).unwrap().failure(0), Change::None);
        assert_eq!(b.permit(0).unwrap().failure(0), Change::None);
        // The third in a row opens it, once.
        let late = b.permit(0).unwrap(); // a call already under way when it opens
        assert_eq!(b.permit(10).unwrap().failure(10), Change::Opened);
        assert_eq!(late.failure(20), Change::None, "opening is reported once");
        assert!(b.is_open());
        assert!(!asks(&b, 11) && !asks(&b, 1009), "open: nobody asks");
        // After the cool-down, one probe; the others still use the fallback.
        let probe = b.permit(1010).unwrap();
        assert!(!asks(&b, 1010) && !asks(&b, 1500));
        // The probe fails: another cool-down, from the probe's failure.
        assert_eq!(probe.failure(1100), Change::None);
        assert!(!asks(&b, 2099));
        let probe = b.permit(2100).unwrap();
        assert_eq!(probe.success(), Change::Closed);
        assert!(!b.is_open());
        assert!(asks(&b, 2100) && asks(&b, 2100), "closed: everyone asks");
        // Closed again, the count starts from 0.
        assert_eq!(b.permit(2200).unwrap().failure(2200), Change::None);
    }

    #[test]
    fn a_cancelled_probe_frees_the_probe_slot() {
        let b = Breaker::new(1, Duration::from_millis(100));
        assert_eq!(b.permit(0).unwrap().failure(0), Change::Opened);
        drop(b.permit(100).expect("a probe"));
        assert!(asks(&b, 100), "the next request probes");
    }
}
