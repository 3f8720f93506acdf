//! The floor every config section's validation stands on: [`Check`], which collects errors
//! with their paths, the bounded field readers (durations, counts, CIDR lists, names) and
//! the units they are written in.

use super::error::ConfigError;
use super::parse_duration;
use std::collections::HashMap;
use std::time::Duration;

/// Collects errors for one config while it is being validated.
pub struct Check<'a>(pub &'a mut Vec<ConfigError>);

impl Check<'_> {
    pub fn err(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError::new(path, message));
    }

    /// A duration field: `default` when absent; an error when it does not parse or lies
    /// outside `range` (every duration is bounded: a huge value would overflow a timer or
    /// keep a process from ever stopping).
    pub fn duration(
        &mut self,
        path: String,
        text: Option<&str>,
        default: Duration,
        range: std::ops::RangeInclusive<Duration>,
    ) -> Duration {
        match text.map(parse_duration) {
            None => default,
            Some(Ok(d)) if range.contains(&d) => d,
            Some(Ok(_)) => {
                self.err(
                    path,
                    format!(
                        "must be between {} and {}",
                        shown(*range.start()),
                        shown(*range.end())
                    ),
                );
                default
            }
            Some(Err(e)) => {
                self.err(path, e);
                default
            }
        }
    }

    /// A count field: an error when outside `range`.
    pub fn count<T: PartialOrd + std::fmt::Display + Copy>(
        &mut self,
        path: impl Into<String>,
        value: T,
        range: std::ops::RangeInclusive<T>,
    ) -> T {
        if !range.contains(&value) {
            self.err(
                path,
                format!("must be between {} and {}", range.start(), range.end()),
            );
        }
        value
    }

    /// Reports a second use of `key` within one scope (names, routes, addresses...).
    pub fn unique<K: std::hash::Hash + Eq>(
        &mut self,
        seen: &mut HashMap<K, String>,
        key: K,
        path: String,
        what: &str,
        shown: &str,
    ) {
        if let Some(first) = seen.get(&key) {
            self.err(
                path,
                format!("duplicate {what} `{shown}` (first at {first})"),
            );
        } else {
            seen.insert(key, path);
        }
    }
}

/// A duration as the config would write it (`500ms`, `10s`, `2m`, `1h`).
fn shown(d: Duration) -> String {
    written_duration(d.as_millis() as u64)
}

/// A duration of `ms` milliseconds as tether writes it: `0s`, `1h`, `2m`, `10s`, `1500ms`.
pub fn written_duration(ms: u64) -> String {
    match ms {
        0 => "0s".into(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

pub const MS: Duration = Duration::from_millis(1);
pub const HOUR: Duration = Duration::from_secs(3600);

/// A list of CIDRs (`10.0.0.0/8`, `2001:db8::/32`) or single addresses at `path`.
pub fn cidrs(raw: &[String], path: &str, check: &mut Check) -> Vec<ipnet::IpNet> {
    let mut out = Vec::new();
    for (i, text) in raw.iter().enumerate() {
        let text = text.trim();
        let parsed = text
            .parse::<ipnet::IpNet>()
            .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from));
        match parsed {
            Ok(net) => out.push(net.trunc()),
            Err(_) => check.err(
                format!("{path}[{i}]"),
                format!("`{text}` is not an address or CIDR (10.0.0.0/8, 2001:db8::/32)"),
            ),
        }
    }
    out
}

/// Names of listeners, clusters and servers appear in file names, logs and metric labels.
pub fn check_name(check: &mut Check, path: String, name: &str) {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !ok {
        check.err(
            path,
            format!("`{name}` must be 1-64 characters of A-Z a-z 0-9 _ - ."),
        );
    }
}
