//! The time as of the current poll of a connection's task: the clock is read at most once
//! per poll ([`PollTimed`]), however often the request's steps ask for it, as nginx keeps
//! the time once per turn of its event loop. A poll runs for microseconds, so what it
//! reads for deadlines of seconds and durations of milliseconds is exact enough; outside a
//! [`PollTimed`] poll (background tasks, other threads), [`now`] reads the clock.

use pin_project_lite::pin_project;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
enum Kept {
    /// Not in a [`PollTimed`] poll: every [`now`] reads the clock.
    Off,
    /// In one, the clock not read yet.
    Unread,
    /// In one, read at this instant.
    Read(Instant),
}

thread_local! {
    static KEPT: Cell<Kept> = const { Cell::new(Kept::Off) };
}

/// The time: as first read in the current [`PollTimed`] poll, or read now.
pub fn now() -> Instant {
    KEPT.with(|kept| match kept.get() {
        Kept::Read(t) => t,
        Kept::Unread => {
            let t = Instant::now();
            kept.set(Kept::Read(t));
            t
        }
        Kept::Off => Instant::now(),
    })
}

/// `after` from [`now`], as a tokio deadline (one far in the future when it overflows, as
/// `tokio::time::timeout` makes it).
pub fn deadline(after: Duration) -> tokio::time::Instant {
    let now = now();
    let at = now
        .checked_add(after)
        .unwrap_or_else(|| now + Duration::from_secs(86400 * 365 * 30));
    tokio::time::Instant::from_std(at)
}

/// `tokio::time::timeout` with its deadline from [`now`].
pub fn timeout<F: Future>(after: Duration, future: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout_at(deadline(after), future)
}

pin_project! {
    /// A future whose polls each read the clock at most once for [`now`].
    pub struct PollTimed<F> {
        #[pin]
        inner: F,
    }
}

impl<F> PollTimed<F> {
    pub fn new(inner: F) -> PollTimed<F> {
        PollTimed { inner }
    }
}

/// Puts back what was kept before a poll, however the poll ends.
struct Restore(Kept);

impl Drop for Restore {
    fn drop(&mut self) {
        KEPT.with(|kept| kept.set(self.0));
    }
}

impl<F: Future> Future for PollTimed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = Restore(KEPT.with(|kept| kept.replace(Kept::Unread)));
        self.project().inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn one_poll_reads_the_clock_once_and_the_next_poll_again() {
        let (first, same, after) = block_on(PollTimed::new(async {
            let first = now();
            std::thread::sleep(Duration::from_millis(5));
            let same = now();
            // The next poll (after the sleep's wake) reads the clock again.
            tokio::time::sleep(Duration::from_millis(5)).await;
            (first, same, now())
        }));
        assert_eq!(first, same);
        assert!(
            after >= first + Duration::from_millis(5),
            "{:?}",
            after - first
        );
    }

    #[test]
    fn outside_a_timed_poll_each_call_reads_the_clock() {
        let first = now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(now() >= first + Duration::from_millis(2));
        // Also inside a task that is not timed, and after a timed one ended.
        block_on(PollTimed::new(async { now() }));
        let inner = block_on(async {
            let first = now();
            std::thread::sleep(Duration::from_millis(2));
            now() - first
        });
        assert!(inner >= Duration::from_millis(2));
    }

    #[test]
    fn a_deadline_from_the_kept_time() {
        block_on(PollTimed::new(async {
            let kept = now();
            std::thread::sleep(Duration::from_millis(2));
            let at = deadline(Duration::from_secs(10));
            assert_eq!(at.into_std(), kept + Duration::from_secs(10));
            // One that overflows is far away, not a panic.
            assert!(deadline(Duration::MAX).into_std() > kept + Duration::from_secs(86400));
            // A timeout from the kept time still times out.
            let r = timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
            assert!(r.is_err());
        }));
    }
}
