//! A cheap monotonic millisecond clock shared by health marks and recovery timers.

use once_cell::sync::Lazy;
use std::time::Instant;

static EPOCH: Lazy<Instant> = Lazy::new(Instant::now);

/// Milliseconds since the first call in this process; never 0 after the first millisecond.
pub fn now_ms() -> u64 {
    ms_at(crate::base::poll_time::now())
}

/// [`now_ms`] at an instant already read (a request's arrival), without reading the clock.
pub fn ms_at(t: Instant) -> u64 {
    t.saturating_duration_since(*EPOCH).as_millis() as u64
}
