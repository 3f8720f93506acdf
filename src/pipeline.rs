//! The steps of a request that every front end runs (tether's HTTP/1 engine, Pingora's
//! proxy for HTTP/2 and what the engine hands over), written once over what a front end
//! gives ([`Front`]): the client's address, the per-client rate, the HTTPS redirect, the
//! host and path routes (`admit.rs`), the cluster bound and the routing decision with the
//! fleet's wait (`decide.rs`), what the server's answer head does (`heard.rs`: interim
//! answers, `fail_on_status`, `$WSPT`, session tracking, marking up and down), and the
//! answers tether writes itself, as one type ([`Answer`]), which each front end puts on
//! its own wire; and the tries of servers (`tries.rs`) for the front ends that carry out
//! the exchange with the server themselves ([`Tries`]).
//!
//! Beside the steps, in this layer: the exchange with a server ([`upstream`], over HTTP/1 or
//! AJP), files from a directory ([`files`]), compression ([`compress`]), the access log
//! ([`access_log`]) and why a server failed, in words ([`reason`]).

pub mod access_log;
pub mod compress;
pub mod files;
pub mod reason;
pub mod upstream;

mod admit;
mod answer;
mod client;
mod ctx;
mod decide;
mod fleet_wait;
mod forwarded;
mod front;
mod heard;
mod lens;
mod peer;
pub mod plugins;
mod secure;
mod slot;
mod tries;
mod upstream_fields;
pub mod websphere;

pub use admit::{admit, compress_for, pages, Admitted, ErrorPages3, TOO_LARGE};
pub use answer::{error_body, https_host, Answer, ALLOWED, NO_HOST};
pub use client::client_of;
pub use ctx::RequestCtx;
pub use decide::{decide, log_refusal, settled};
pub use fleet_wait::{settle as await_fleet, waits as waits_for_fleet};
pub use forwarded::{set_forwarded, write_on_stack};
pub use front::Front;
pub use heard::{connect_failed, dropped, heard, Heard, FAILED_STATUS, MAX_INFORMATIONAL};
pub use peer::{http_peer, why_failed};
pub use secure::{set_ssl_headers, Secure};
pub use slot::{take as take_slot, take_now};
pub use tries::{idempotent, Ended, Failure, Relayed, Stop, Tries, DROPPED};
pub use upstream_fields::UpstreamFields;
pub use websphere::tag_request;

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
