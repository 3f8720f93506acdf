//! Validation of a listener's per-client limits (`listeners[].client_limits`).

use super::check::{cidrs, Check, HOUR};
use super::model::{ClientLimits, MAX_CLIENT_CONNECTIONS, MAX_CLIENT_REQUESTS, MAX_CLIENT_TABLE};
use super::raw::RawClientLimits;
use std::time::Duration;

/// The limits as configured; errors name `<path>.client_limits.<field>`.
pub fn client_limits(raw: &RawClientLimits, path: &str, check: &mut Check) -> ClientLimits {
    let p = |f: &str| format!("{path}.client_limits.{f}");
    if raw.connections.is_none() && raw.requests.is_none() {
        check.err(
            p("connections"),
            "set `connections`, `requests` or both (or remove client_limits)",
        );
    }
    if raw.requests.is_none() && raw.per.is_some() {
        check.err(p("per"), "is the window of `requests`, which is not set");
    }
    ClientLimits {
        connections: raw
            .connections
            .map(|n| check.count(p("connections"), n, 1..=MAX_CLIENT_CONNECTIONS)),
        requests: raw
            .requests
            .map(|n| check.count(p("requests"), n, 1..=MAX_CLIENT_REQUESTS)),
        per: check.duration(
            p("per"),
            raw.per.as_deref(),
            Duration::from_secs(1),
            Duration::from_secs(1)..=HOUR,
        ),
        clients: check.count(
            p("clients"),
            raw.clients.unwrap_or(100_000),
            1_000..=MAX_CLIENT_TABLE,
        ),
        allow: cidrs(&raw.allow, &p("allow"), check),
        ipv4_prefix: check.count(p("ipv4_prefix"), raw.ipv4_prefix.unwrap_or(32), 8..=32),
        ipv6_prefix: check.count(p("ipv6_prefix"), raw.ipv6_prefix.unwrap_or(64), 32..=128),
    }
}
