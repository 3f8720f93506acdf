//! A listener's HTTP/3 fields: `http3` itself (TLS listeners only, and no PROXY header),
//! the `Alt-Svc` that advertises it, and from how many connections a client proves its
//! address first.

use super::check::Check;
use super::raw::RawListener;
use std::time::Duration;

/// `http3: true` needs the listener's TLS (QUIC is TLS 1.3), and takes no PROXY header
/// (a QUIC datagram carries none).
pub fn on(l: &RawListener, path: &str, check: &mut Check) -> bool {
    let on = l.http3.unwrap_or(false);
    if on && l.tls.is_none() {
        check.err(
            format!("{path}.http3"),
            "HTTP/3 needs the listener's `tls:` (QUIC is TLS 1.3)",
        );
    }
    if on && l.proxy_protocol.is_some() {
        check.err(
            format!("{path}.http3"),
            "HTTP/3 takes no PROXY header (QUIC datagrams carry none): leave out `proxy_protocol` or `http3`",
        );
    }
    on
}

/// `http3_retry_above`: 1,000 connections unless set (0–1,000,000).
pub fn retry_above(l: &RawListener, path: &str, check: &mut Check) -> u64 {
    check.count(
        format!("{path}.http3_retry_above"),
        l.http3_retry_above.unwrap_or(1000),
        0..=1_000_000,
    )
}

/// `alt_svc_max_age`: a day unless set (zero to a year; zero says nothing).
pub fn alt_svc_max_age(l: &RawListener, path: &str, check: &mut Check) -> Duration {
    check.duration(
        format!("{path}.alt_svc_max_age"),
        l.alt_svc_max_age.as_deref(),
        Duration::from_secs(24 * 3600),
        Duration::ZERO..=Duration::from_secs(365 * 24 * 3600),
    )
}
