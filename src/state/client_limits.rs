//! Per-client limits of a listener (`client_limits:`): open connections and a request rate
//! per client address or network, in memory fixed when the listener's limits are built
//! (6 MiB with both on, however many clients come), refusals counted and logged at most
//! once every 10 s. DESIGN section 9 says why these structures.

mod connections;
mod key;
mod window;

pub use connections::Open;

use crate::base::every::Every;
use crate::config::{in_cidrs, ClientLimits};
use connections::Connections;
use log::warn;
use pingora_prometheus::prometheus::IntCounter;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use window::Window;

// The most `requests` the config allows fits the window's counts.
const _: () = assert!(crate::config::MAX_CLIENT_REQUESTS <= window::MOST);

/// The limits of one listener and their counts (carried over a reload that keeps them).
pub struct ClientLimiter {
    limits: ClientLimits,
    listener: Box<str>,
    connections: Option<Arc<Connections>>,
    requests: Option<Arc<Window>>,
    refused_connections: IntCounter,
    refused_requests: IntCounter,
    connection_log: Every,
    request_log: Every,
}

/// What a connection from a client is allowed.
pub enum Connection {
    /// Not counted (no connection limit, an allowed client, a trusted proxy).
    Free,
    /// Counted until the guard drops.
    Counted(Open),
    /// Over the client's limit: close it.
    Refused,
}

impl ClientLimiter {
    /// The limiter of `listener`, keeping `previous`'s counts where the new limits still
    /// count the same thing (connections always; requests when the window is the same).
    /// `max_connections` (the listener's) sizes the connection counts.
    pub fn new(
        listener: &str,
        limits: &ClientLimits,
        max_connections: usize,
        previous: Option<&ClientLimiter>,
    ) -> Self {
        let same_keys = previous.is_some_and(|p| {
            p.limits.ipv4_prefix == limits.ipv4_prefix && p.limits.ipv6_prefix == limits.ipv6_prefix
        });
        let kept = previous.filter(|_| same_keys);
        let connections = limits.connections.map(|_| {
            // A kept table is reused without building a new one to compare with.
            kept.and_then(|p| p.connections.clone())
                .filter(|c| c.slots() == Connections::slots_for(max_connections))
                .unwrap_or_else(|| Arc::new(Connections::new(max_connections)))
        });
        let requests = limits.requests.map(|_| {
            kept.filter(|p| p.limits.per == limits.per && p.limits.clients == limits.clients)
                .and_then(|p| p.requests.clone())
                .unwrap_or_else(|| Arc::new(Window::new(limits.per, limits.clients as usize)))
        });
        ClientLimiter {
            limits: limits.clone(),
            listener: listener.into(),
            connections,
            requests,
            refused_connections: crate::metrics::client_limit_refusals(listener, "connections"),
            refused_requests: crate::metrics::client_limit_refusals(listener, "requests"),
            connection_log: Every::new(10_000),
            request_log: Every::new(10_000),
        }
    }

    /// The listener these limits belong to.
    pub fn listener(&self) -> &str {
        &self.listener
    }

    fn key(&self, ip: IpAddr) -> u128 {
        key::of(ip, self.limits.ipv4_prefix, self.limits.ipv6_prefix)
    }

    fn allowed(&self, ip: IpAddr) -> bool {
        !self.limits.allow.is_empty() && in_cidrs(ip, &self.limits.allow)
    }

    /// Counts a request of `client` at `now_ms`; `Err` carries the `Retry-After` of a
    /// refusal (whole seconds, at least one).
    pub fn admit_request(&self, client: IpAddr, now_ms: u64) -> Result<(), Duration> {
        let (Some(window), Some(limit)) = (&self.requests, self.limits.requests) else {
            return Ok(());
        };
        if self.allowed(client) {
            return Ok(());
        }
        window
            .admit(self.key(client), limit, now_ms)
            .inspect_err(|_| {
                self.refused_requests.inc();
                if let Some(n) = self.request_log.due(now_ms) {
                    warn!(
                        "listener {}: client {client} over {limit} requests per {:?} \
                         (client_limits.requests); {n} answered 429 since the last line",
                        self.listener, self.limits.per
                    );
                }
            })
    }

    /// Counts a new connection from `peer` (the PROXY protocol's client, when it is on);
    /// peers among `trusted` (proxies sending `X-Forwarded-For`) carry many clients and
    /// are not counted.
    pub fn open_connection(&self, peer: IpAddr, trusted: &[ipnet::IpNet]) -> Connection {
        let (Some(counts), Some(limit)) = (&self.connections, self.limits.connections) else {
            return Connection::Free;
        };
        if self.allowed(peer) || (!trusted.is_empty() && in_cidrs(peer, trusted)) {
            return Connection::Free;
        }
        match counts.open(self.key(peer), limit) {
            Some(open) => Connection::Counted(open),
            None => {
                self.refused_connections.inc();
                if let Some(n) = self.connection_log.due(crate::routing::now_ms()) {
                    warn!(
                        "listener {}: client {peer} over {limit} open connections \
                         (client_limits.connections); {n} closed since the last line",
                        self.listener
                    );
                }
                Connection::Refused
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(connections: Option<u32>, requests: Option<u32>) -> ClientLimits {
        ClientLimits {
            connections,
            requests,
            per: Duration::from_secs(1),
            clients: 1_000,
            allow: vec!["10.9.0.0/16".parse().unwrap()],
            ipv4_prefix: 32,
            ipv6_prefix: 64,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_client_over_its_rate_is_refused_and_others_are_not() {
        let l = ClientLimiter::new("t", &limits(None, Some(3)), 100, None);
        let now = 50_000;
        for _ in 0..3 {
            assert!(l.admit_request(ip("192.0.2.1"), now).is_ok());
        }
        let retry = l.admit_request(ip("192.0.2.1"), now).unwrap_err();
        assert!(retry >= Duration::from_secs(1), "{retry:?}");
        assert!(l.admit_request(ip("192.0.2.2"), now).is_ok());
        // An allowed network is never limited.
        for _ in 0..10 {
            assert!(l.admit_request(ip("10.9.3.4"), now).is_ok());
        }
    }

    #[test]
    fn one_ipv6_host_cannot_rotate_through_its_64() {
        let l = ClientLimiter::new("t", &limits(None, Some(2)), 100, None);
        let now = 50_000;
        assert!(l.admit_request(ip("2001:db8:1:2::1"), now).is_ok());
        assert!(l.admit_request(ip("2001:db8:1:2::ffff:2"), now).is_ok());
        assert!(l.admit_request(ip("2001:db8:1:2:aaaa::3"), now).is_err());
        assert!(l.admit_request(ip("2001:db8:1:3::1"), now).is_ok());
    }

    #[test]
    fn connections_count_until_closed_and_trusted_proxies_are_free() {
        let l = ClientLimiter::new("t", &limits(Some(2), None), 100, None);
        let peer = ip("192.0.2.7");
        let a = l.open_connection(peer, &[]);
        let b = l.open_connection(peer, &[]);
        assert!(matches!(a, Connection::Counted(_)));
        assert!(matches!(b, Connection::Counted(_)));
        assert!(matches!(l.open_connection(peer, &[]), Connection::Refused));
        drop(a);
        assert!(matches!(
            l.open_connection(peer, &[]),
            Connection::Counted(_)
        ));
        let cdn = ["192.0.2.0/24".parse().unwrap()];
        assert!(matches!(l.open_connection(peer, &cdn), Connection::Free));
    }

    #[test]
    fn a_reload_keeps_the_counts_it_still_means() {
        let first = ClientLimiter::new("t", &limits(Some(1), Some(2)), 100, None);
        let held = first.open_connection(ip("192.0.2.9"), &[]);
        assert!(first.admit_request(ip("192.0.2.9"), 50_000).is_ok());
        assert!(first.admit_request(ip("192.0.2.9"), 50_000).is_ok());
        let second = ClientLimiter::new("t", &limits(Some(1), Some(2)), 100, Some(&first));
        assert!(matches!(
            second.open_connection(ip("192.0.2.9"), &[]),
            Connection::Refused
        ));
        assert!(second.admit_request(ip("192.0.2.9"), 50_000).is_err());
        // A new window starts counting afresh; the connections are still open.
        let mut other = limits(Some(1), Some(2));
        other.per = Duration::from_secs(2);
        let third = ClientLimiter::new("t", &other, 100, Some(&second));
        assert!(third.admit_request(ip("192.0.2.9"), 50_000).is_ok());
        assert!(matches!(
            third.open_connection(ip("192.0.2.9"), &[]),
            Connection::Refused
        ));
        drop(held);
        assert!(matches!(
            third.open_connection(ip("192.0.2.9"), &[]),
            Connection::Counted(_)
        ));
    }
}
