//! Minimum data rates (Apache `mod_reqtimeout` `MinRate`; Kestrel `MinRequestBodyDataRate`
//! and `MinResponseDataRate`): a client that sends its body or reads its response too
//! slowly is cut off instead of holding a connection to an application server.
//!
//! A body must have brought `(t - grace) * rate` bytes once its reads waited `t` for the
//! client (on HTTP/1; on HTTP/2, `t` is the time since the head): the deadline
//! for the next byte moves `1 / rate` seconds later with each byte that arrives. A write
//! of `n` bytes to the client must finish within `max(grace, n / rate)`, and never takes
//! longer than `send_timeout`.

use crate::config::ListenerLimits;
use std::time::Duration;

/// How long the body may still wait for its next bytes: `None` when it has fallen behind
/// the listener's `request_body_min_rate` (answer 408). Each read also gets no longer than
/// `request_body_timeout`.
pub fn body_time_left(
    limits: &ListenerLimits,
    elapsed: Duration,
    received: u64,
) -> Option<Duration> {
    let per_read = limits.request_body_timeout;
    if limits.request_body_min_rate == 0 {
        return Some(per_read);
    }
    let earned = Duration::from_secs_f64(received as f64 / f64::from(limits.request_body_min_rate));
    let deadline = limits.request_body_grace.saturating_add(earned);
    match deadline.checked_sub(elapsed) {
        Some(left) if !left.is_zero() => Some(left.min(per_read)),
        _ => None,
    }
}

/// How long a write of `len` bytes to the client may take.
pub fn write_timeout(limits: &ListenerLimits, len: usize) -> Duration {
    if limits.send_min_rate == 0 {
        return limits.send_timeout;
    }
    let needed = Duration::from_secs_f64(len as f64 / f64::from(limits.send_min_rate));
    needed.max(limits.send_grace).min(limits.send_timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rate: u32) -> ListenerLimits {
        ListenerLimits {
            request_body_min_rate: rate,
            request_body_grace: Duration::from_secs(10),
            request_body_timeout: Duration::from_secs(30),
            send_min_rate: rate,
            send_grace: Duration::from_secs(5),
            send_timeout: Duration::from_secs(60),
            ..ListenerLimits::default()
        }
    }

    #[test]
    fn a_body_earns_time_with_each_byte() {
        let l = limits(500);
        let s = Duration::from_secs;
        // Within the grace: the rest of it.
        assert_eq!(body_time_left(&l, s(4), 0), Some(s(6)));
        // 1,000 bytes earn 2 s more.
        assert_eq!(body_time_left(&l, s(11), 1000), Some(s(1)));
        // One byte a second falls behind once the grace is over.
        assert_eq!(
            body_time_left(&l, s(10), 10),
            Some(Duration::from_millis(20))
        );
        assert_eq!(body_time_left(&l, s(11), 11), None);
        // Fast bodies are bounded by request_body_timeout per read.
        assert_eq!(body_time_left(&l, s(1), 10_000_000), Some(s(30)));
        // Off: request_body_timeout alone.
        assert_eq!(body_time_left(&limits(0), s(1000), 0), Some(s(30)));
    }

    #[test]
    fn a_write_gets_its_size_over_the_rate_within_grace_and_send_timeout() {
        let s = Duration::from_secs;
        assert_eq!(
            write_timeout(&limits(240), 100),
            s(5),
            "small writes get the grace"
        );
        assert_eq!(write_timeout(&limits(1000), 20_000), s(20));
        assert_eq!(
            write_timeout(&limits(240), 65_536),
            s(60),
            "at most send_timeout"
        );
        assert_eq!(write_timeout(&limits(0), 1), s(60));
    }
}
