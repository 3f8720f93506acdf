//! A rate limit for log lines that may come once per request.

/// A log line that may come once per request (a refusal, a refused admin call) is written
/// at most once per `period_ms`, saying how many happened since: a flood must not flood
/// the log. Lock-free: two atomics.
pub struct Every {
    period_ms: u64,
    last: std::sync::atomic::AtomicU64,
    since: std::sync::atomic::AtomicU64,
}

impl Every {
    pub const fn new(period_ms: u64) -> Every {
        Every {
            period_ms,
            last: std::sync::atomic::AtomicU64::new(0),
            since: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// `Some(n)` (events since the last line, this one included) when a line is due.
    pub fn due(&self, now_ms: u64) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        let n = self.since.fetch_add(1, Relaxed) + 1;
        let last = self.last.load(Relaxed);
        let due = (last == 0 || now_ms.saturating_sub(last) >= self.period_ms)
            && self
                .last
                .compare_exchange(last, now_ms.max(1), Relaxed, Relaxed)
                .is_ok();
        if due {
            self.since.store(0, Relaxed);
            Some(n)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Every;

    #[test]
    fn at_most_one_line_per_period_with_the_count() {
        let e = Every::new(1000);
        assert_eq!(e.due(5_000), Some(1));
        assert_eq!(e.due(5_100), None);
        assert_eq!(e.due(5_900), None);
        assert_eq!(e.due(6_000), Some(3));
    }
}
