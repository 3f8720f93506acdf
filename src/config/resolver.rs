//! `resolver:`: how servers named by DNS are resolved again while tether runs.

use super::check::Check;
use super::model::Resolver;
use super::raw::RawResolver;
use std::net::SocketAddr;
use std::time::Duration;

/// How often names are resolved again by default (HAProxy's usual `hold valid`; nginx
/// follows each answer's TTL, which the nameservers' answers are cached for here too).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn resolver(raw: Option<&RawResolver>, check: &mut Check) -> Resolver {
    let nameservers = raw
        .map(|r| r.nameservers.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            // A bare address is port 53.
            let parsed = n.parse::<SocketAddr>().or_else(|_| {
                n.parse::<std::net::IpAddr>()
                    .map(|ip| SocketAddr::new(ip, 53))
            });
            if parsed.is_err() {
                check.err(
                    format!("resolver.nameservers[{i}]"),
                    format!("`{n}` is not an IP address (with an optional :port)"),
                );
            }
            parsed.ok()
        })
        .collect();
    Resolver {
        nameservers,
        interval: check.duration(
            "resolver.interval".into(),
            raw.and_then(|r| r.interval.as_deref()),
            DEFAULT_INTERVAL,
            Duration::from_millis(100)..=Duration::from_secs(86_400),
        ),
        timeout: check.duration(
            "resolver.timeout".into(),
            raw.and_then(|r| r.timeout.as_deref()),
            DEFAULT_TIMEOUT,
            Duration::from_millis(10)..=Duration::from_secs(60),
        ),
    }
}
