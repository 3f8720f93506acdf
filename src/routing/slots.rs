//! A server's bound on the requests this instance has in flight to it (`max_inflight`, as
//! mod_jk's `connection_pool_size`, HAProxy's `maxconn`, nginx's `max_conns`), with the
//! queue of requests waiting for one of its slots. Taking a free slot and handing it back
//! are an atomic operation each, with no lock; a waiting request is woken when a slot is
//! handed back (first come, first served: while requests wait, a new one may not take a
//! slot before them). A slot is a guard: it is handed back when dropped, whatever ended
//! the request.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Debug)]
pub struct Slots {
    /// `max_inflight`; 0: no bound.
    limit: AtomicU32,
    /// Slots taken now.
    taken: AtomicU32,
    /// Requests waiting now.
    queued: AtomicU32,
    /// Wakes the longest waiter when a slot is handed back.
    handed_back: Notify,
}

/// A taken slot (or none, for a server without a bound), handed back when dropped.
pub struct Slot(Option<Arc<Slots>>);

/// Why no slot came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The queue already holds its `queue_length` requests.
    QueueFull,
    /// No slot came within `queue_timeout`.
    Timeout,
}

impl Slots {
    pub fn new(limit: u32) -> Arc<Slots> {
        Arc::new(Slots {
            limit: AtomicU32::new(limit),
            taken: AtomicU32::new(0),
            queued: AtomicU32::new(0),
            handed_back: Notify::new(),
        })
    }

    /// The bound after a reload: a lower one holds once enough slots came back; a higher
    /// one wakes waiters for the slots it adds. A bound newly set counts only the
    /// requests that take a slot from now on.
    pub fn set_limit(&self, limit: u32) {
        let old = self.limit.swap(limit, SeqCst);
        if limit == 0 || limit > old {
            self.handed_back.notify_waiters();
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit.load(SeqCst)
    }

    /// Requests waiting for a slot now.
    pub fn queued(&self) -> u32 {
        self.queued.load(SeqCst)
    }

    /// A free slot, if there is one and nobody waits for it (always, without a bound).
    pub fn try_take(self: &Arc<Self>) -> Option<Slot> {
        if self.limit() == 0 {
            return Some(Slot(None));
        }
        if self.queued() > 0 {
            return None;
        }
        self.claim()
    }

    /// A slot under the bound, waiters or not.
    fn claim(self: &Arc<Self>) -> Option<Slot> {
        let limit = self.limit();
        if limit == 0 {
            return Some(Slot(None));
        }
        let mut taken = self.taken.load(SeqCst);
        loop {
            if taken >= limit {
                return None;
            }
            match self
                .taken
                .compare_exchange_weak(taken, taken + 1, SeqCst, SeqCst)
            {
                Ok(_) => return Some(Slot(Some(self.clone()))),
                Err(now) => taken = now,
            }
        }
    }

    /// A slot, waiting in the queue (at most `length` requests) for at most `timeout`.
    pub async fn take(self: &Arc<Self>, length: u32, timeout: Duration) -> Result<Slot, Full> {
        if let Some(slot) = self.try_take() {
            return Ok(slot);
        }
        if self.queued.fetch_add(1, SeqCst) >= length {
            self.queued.fetch_sub(1, SeqCst);
            return Err(Full::QueueFull);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let got = loop {
            // Registered before the slots are looked at: a slot handed back after the
            // look wakes this wait.
            let woken = self.handed_back.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if let Some(slot) = self.claim() {
                break Ok(slot);
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                break Err(Full::Timeout);
            }
        };
        self.queued.fetch_sub(1, SeqCst);
        if got.is_err() && self.queued() > 0 && self.taken.load(SeqCst) < self.limit() {
            // A wake this wait took as it timed out goes on to the next waiter.
            self.handed_back.notify_one();
        }
        got
    }

    fn give_back(&self) {
        self.taken.fetch_sub(1, SeqCst);
        if self.queued() > 0 {
            self.handed_back.notify_one();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(slots) = self.0.take() {
            slots.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_are_bounded_queued_in_order_and_never_lost() {
        let slots = Slots::new(2);
        let (a, b) = (slots.try_take().unwrap(), slots.try_take().unwrap());
        assert!(slots.try_take().is_none(), "two of two taken");
        // The queue: one waits, the second is one too many.
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.take(1, Duration::from_secs(5)).await }
        });
        tokio::task::yield_now().await;
        assert_eq!(slots.queued(), 1);
        let full = slots.take(1, Duration::from_secs(5)).await;
        assert_eq!(full.err(), Some(Full::QueueFull));
        // A slot handed back goes to the waiter, not to whoever asks first.
        drop(a);
        assert!(slots.try_take().is_none(), "the waiter's");
        let theirs = waiting.await.unwrap().expect("the waiter's slot");
        // Nobody hands one back: the wait ends at its timeout.
        let late = slots.take(1, Duration::from_millis(100)).await;
        assert_eq!(late.err(), Some(Full::Timeout));
        drop((b, theirs));
        let both = (slots.try_take(), slots.try_take());
        assert!(both.0.is_some() && both.1.is_some(), "both back");
    }

    #[test]
    fn a_reload_moves_the_bound_without_losing_slots() {
        let slots = Slots::new(3);
        let taken: Vec<_> = (0..3).map(|_| slots.try_take().unwrap()).collect();
        slots.set_limit(1);
        drop(taken);
        let one = slots.try_take().unwrap();
        assert!(
            slots.try_take().is_none(),
            "the lower bound holds once all came back"
        );
        slots.set_limit(4);
        let more: Vec<_> = (0..3).map(|_| slots.try_take().unwrap()).collect();
        assert!(slots.try_take().is_none(), "four in all");
        drop((one, more));
        let four: Vec<_> = (0..4).map(|_| slots.try_take().unwrap()).collect();
        assert!(slots.try_take().is_none(), "all four came back");
        drop(four);
        slots.set_limit(0);
        assert!(slots.try_take().is_some(), "no bound");
    }
}
