//! A server's bound on the requests this instance has in flight to it (`max_inflight`, as
//! mod_jk's `connection_pool_size`, HAProxy's `maxconn`, nginx's `max_conns`), with the
//! queues of requests waiting for a slot: the server's own (requests bound to it) and its
//! cluster's (requests free to go to any server, waiting for the first slot any hands
//! back). Taking a free slot and handing it back are an atomic operation each, with no
//! lock; a waiting request is woken when a slot is handed back, no polling (first come,
//! first served: while requests wait, a new one may not take a slot before them; the
//! server's own queue before its cluster's). A slot is a guard: it is handed back when
//! dropped, whatever ended the request.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;

/// Instances of the fleet alive now, as their heartbeats say (1 without a fleet): the
/// share of a `max_inflight_per: fleet` bound each instance takes.
static FLEET_SIZE: AtomicU32 = AtomicU32::new(1);

/// Sets the instances alive; whether the number changed.
pub fn set_fleet_size(n: u32) -> bool {
    FLEET_SIZE.swap(n.max(1), SeqCst) != n.max(1)
}

/// This instance's bound for a server's `max_inflight` (0: none): the whole of it, or its
/// share of the fleet's (rounded up, so the fleet never has less than it was given).
pub fn share(max_inflight: u32, per: crate::config::MaxInflightPer) -> u32 {
    match per {
        crate::config::MaxInflightPer::Fleet if max_inflight > 0 => {
            max_inflight.div_ceil(FLEET_SIZE.load(SeqCst).max(1))
        }
        _ => max_inflight,
    }
}

#[derive(Debug)]
pub struct Slots {
    /// `max_inflight`; 0: no bound.
    limit: AtomicU32,
    /// Slots taken now.
    taken: AtomicU32,
    /// Requests bound to this server, waiting for one of its slots.
    queue: Waiters,
    /// The queue of the server's cluster, woken when this server hands a slot back and
    /// nobody waits in its own.
    cluster: OnceLock<Arc<Waiters>>,
}

/// Requests waiting for a slot, and what wakes them.
#[derive(Debug, Default)]
pub struct Waiters {
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

impl Waiters {
    /// Requests waiting now.
    pub fn queued(&self) -> u32 {
        self.queued.load(SeqCst)
    }

    /// A slot from `claim`, tried now and again each time a slot is handed back, waiting
    /// in this queue (at most `length` requests) for at most `timeout`.
    pub async fn wait(
        &self,
        length: u32,
        timeout: Duration,
        mut claim: impl FnMut() -> Option<Slot>,
    ) -> Result<Slot, Full> {
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
            if let Some(slot) = claim() {
                break Ok(slot);
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                break Err(Full::Timeout);
            }
        };
        self.queued.fetch_sub(1, SeqCst);
        if got.is_err() && self.queued() > 0 {
            // A wake this wait took as it timed out goes on to the next waiter (one
            // without a slot for it looks and waits again).
            self.handed_back.notify_one();
        }
        got
    }

    /// A slot was handed back: the longest waiter looks.
    fn wake_one(&self) -> bool {
        let someone = self.queued() > 0;
        if someone {
            self.handed_back.notify_one();
        }
        someone
    }
}

impl Slots {
    pub fn new(limit: u32) -> Arc<Slots> {
        Arc::new(Slots {
            limit: AtomicU32::new(limit),
            taken: AtomicU32::new(0),
            queue: Waiters::default(),
            cluster: OnceLock::new(),
        })
    }

    /// The server's cluster's queue. A server keeps its first: a reload carries a
    /// cluster's queue over with the servers it keeps.
    pub fn join(&self, cluster: &Arc<Waiters>) {
        let _ = self.cluster.set(cluster.clone());
    }

    /// The bound after a reload: a lower one holds once enough slots came back; a higher
    /// one wakes waiters for the slots it adds. A bound newly set counts only the
    /// requests that take a slot from now on.
    pub fn set_limit(&self, limit: u32) {
        let old = self.limit.swap(limit, SeqCst);
        if limit == 0 || limit > old {
            self.queue.handed_back.notify_waiters();
            if let Some(cluster) = self.cluster.get() {
                cluster.handed_back.notify_waiters();
            }
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit.load(SeqCst)
    }

    /// Requests waiting for a slot of this server now.
    pub fn queued(&self) -> u32 {
        self.queue.queued()
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

    /// A slot, waiting in the server's queue (at most `length` requests) for at most
    /// `timeout`.
    pub async fn take(self: &Arc<Self>, length: u32, timeout: Duration) -> Result<Slot, Full> {
        if let Some(slot) = self.try_take() {
            return Ok(slot);
        }
        self.queue.wait(length, timeout, || self.claim()).await
    }

    fn give_back(&self) {
        self.taken.fetch_sub(1, SeqCst);
        if !self.queue.wake_one() {
            if let Some(cluster) = self.cluster.get() {
                cluster.wake_one();
            }
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

    #[tokio::test]
    async fn a_cluster_waiter_gets_the_first_slot_any_server_hands_back_after_its_own_queue() {
        let cluster = Arc::new(Waiters::default());
        let (a, b) = (Slots::new(1), Slots::new(1));
        a.join(&cluster);
        b.join(&cluster);
        let (held_a, held_b) = (a.try_take().unwrap(), b.try_take().unwrap());
        // One waits for either server; one more for a alone.
        let any = tokio::spawn({
            let (cluster, a, b) = (cluster.clone(), a.clone(), b.clone());
            async move {
                let mut which = "";
                let slot = cluster
                    .wait(10, Duration::from_secs(5), || {
                        let (name, slot) = [("a", &a), ("b", &b)]
                            .into_iter()
                            .find_map(|(n, s)| Some((n, s.try_take()?)))?;
                        which = name;
                        Some(slot)
                    })
                    .await;
                (which, slot.is_ok())
            }
        });
        tokio::task::yield_now().await;
        let own = tokio::spawn({
            let a = a.clone();
            async move { a.take(10, Duration::from_secs(5)).await }
        });
        tokio::task::yield_now().await;
        assert_eq!((cluster.queued(), a.queued()), (1, 1));
        // a's slot goes to a's own waiter; b's, to the cluster's.
        drop(held_a);
        let owns = own.await.unwrap();
        assert!(owns.is_ok());
        assert_eq!(cluster.queued(), 1, "still waiting");
        drop(held_b);
        assert_eq!(any.await.unwrap(), ("b", true));
        // Nothing comes back in time: a timeout.
        let none = cluster.wait(10, Duration::from_millis(50), || None).await;
        assert_eq!(none.err(), Some(Full::Timeout));
        assert_eq!(cluster.queued(), 0);
        drop(owns);
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
