//! Facts read from a request head before it is routed (its host and port, the size of its
//! head) and the log line of a refusal.

use crate::routing::{now_ms, ClusterRouter, Reject};
use log::warn;
use pingora_http::RequestHeader;
use pingora_proxy::Session;

/// The request's host (without port) and port: from `Host` (or the URI's authority, as
/// HTTP/2 sends it), the port defaulting to the listener's.
pub fn request_host(req: &RequestHeader, listener_port: u16) -> (&[u8], u16) {
    let host = req
        .headers
        .get(http::header::HOST)
        .map(|h| h.as_bytes())
        .or_else(|| req.uri.authority().map(|a| a.as_str().as_bytes()))
        .unwrap_or_default();
    host_and_port(host, listener_port)
}

/// A `Host` value's host and port, the port defaulting to `listener_port`.
pub fn host_and_port(host: &[u8], listener_port: u16) -> (&[u8], u16) {
    if host.starts_with(b"[") {
        if let Some(end) = host.iter().position(|&b| b == b']') {
            let port = host[end + 1..]
                .strip_prefix(b":")
                .and_then(|p| std::str::from_utf8(p).ok()?.parse().ok());
            return (&host[..=end], port.unwrap_or(listener_port));
        }
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(colon) => {
            let port = std::str::from_utf8(&host[colon + 1..])
                .ok()
                .and_then(|p| p.parse().ok());
            (&host[..colon], port.unwrap_or(listener_port))
        }
        None => (host, listener_port),
    }
}

/// A refusal tether decides (no server left, `sticky_force`) is an expected outcome:
/// counted (`tether_routing_decisions_total{outcome="rejected"}`) and logged at warning
/// level, at most once a second with the count.
pub fn log_refusal(router: &ClusterRouter, reason: Reject) {
    static EVERY: crate::logging::Every = crate::logging::Every::new(1000);
    if let Some(n) = EVERY.due(now_ms()) {
        let why = match reason {
            Reject::StickyForce => {
                "the session's server cannot take it and sticky_force forbids failover"
            }
            Reject::NoServer => "no server can take it",
        };
        warn!(
            "cluster {}: request refused with 503: {why} ({n} refused since the last such line)",
            router.name
        );
    }
}

/// Bytes of the request head as it arrived (0 when Pingora does not keep them).
pub fn head_size(session: &Session) -> usize {
    raw_head(session).map_or(0, |h| h.len())
}

/// The request head as it arrived, on HTTP/1 (a slice of the read buffer, not a copy).
pub fn raw_head(session: &Session) -> Option<bytes::Bytes> {
    session
        .as_downstream()
        .as_http1()
        .map(|h| h.get_headers_raw_bytes())
}
