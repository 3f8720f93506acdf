//! The grace of a kept-alive connection: how many connections of a worker thread wait for
//! their next request with their buffers (about 12 KiB each), so that it takes no
//! allocation. Past `server.idle_buffers_per_thread` of them, a connection that must wait
//! gives its buffers back at once, as nginx does, and takes new ones with its next request:
//! many connections idle at once then cost their records, not their buffers (10,000 of
//! them, one request each: 0.55–0.62 KiB of RSS each after 15 s, nginx's 0.65–0.68,
//! against 1.0–1.3 KiB when all kept theirs; docs/performance.md).
//!
//! A count per thread, an atomic of its own (a task that moves to another thread, with
//! `work_stealing`, gives its place back where it took it); threads past the 64th share.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

const SLOTS: usize = 64;

/// One thread's count, on a cache line of its own.
#[repr(align(128))]
struct Slot(AtomicUsize);

static WAITING: [Slot; SLOTS] = [const { Slot(AtomicUsize::new(0)) }; SLOTS];
static THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MINE: &'static AtomicUsize = &WAITING[THREADS.fetch_add(1, Relaxed) % SLOTS].0;
}

/// A place in the grace of this thread: the connection keeps its buffers while it holds
/// it.
pub struct Place(&'static AtomicUsize);

impl Place {
    /// One of this thread's `most` places, if one is free.
    pub fn take(most: usize) -> Option<Place> {
        MINE.with(|count| {
            if count.fetch_add(1, Relaxed) < most {
                Some(Place(count))
            } else {
                count.fetch_sub(1, Relaxed);
                None
            }
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Connections waiting with their buffers now, over all threads.
pub fn waiting() -> usize {
    WAITING.iter().map(|s| s.0.load(Relaxed)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_given_back() {
        // A thread of its own: its count starts at zero (unless 64 threads share).
        std::thread::spawn(|| {
            let a = Place::take(2).expect("a first place");
            let b = Place::take(2).expect("a second place");
            assert!(Place::take(2).is_none(), "a third past two");
            drop(a);
            let c = Place::take(2).expect("the place given back");
            assert!(Place::take(0).is_none(), "none when there are none");
            drop((b, c));
            assert!(Place::take(1).is_some());
        })
        .join()
        .unwrap();
    }
}
