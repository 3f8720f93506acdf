//! `route_lookup`'s config: parsed and checked when the config is loaded.

use crate::config_error::PluginConfigError;
use crate::duration::parse_duration;
use crate::key::KeySource;
use serde::Deserialize;
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnswer {
    header: Option<String>,
    json: Option<String>,
}

impl TryFrom<RawAnswer> for AnswerSource {
    type Error = String;

    fn try_from(r: RawAnswer) -> Result<Self, String> {
        match (r.header, r.json) {
            (Some(h), None) => Ok(AnswerSource::Header(h)),
            (None, Some(j)) => Ok(AnswerSource::Json(j)),
            _ => Err("give exactly one of header, json".into()),
        }
    }
}

/// Where the answer is in the API's response.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawAnswer")]
pub enum AnswerSource {
    /// A response header, e.g. `X-Route` (nginx: `$upstream_http_x_route`).
    Header(String),
    /// A top-level string field of a small JSON body, e.g. `target`.
    Json(String),
}

/// What to do when the look-up fails, times out or names an unknown target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// Route as if the plugin were not there (the listener's cluster, normal balancing).
    Balance,
    /// Answer 503.
    Reject,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCache {
    ttl: Option<String>,
    negative_ttl: Option<String>,
    error_ttl: Option<String>,
    max_entries: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCircuit {
    failures: Option<u32>,
    cooldown: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[allow(dead_code)]
    name: String,
    key: KeySource,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    answer: AnswerSource,
    timeout: Option<String>,
    cache: Option<RawCache>,
    circuit: Option<RawCircuit>,
    fallback: Option<Fallback>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub key: KeySource,
    /// The look-up service, resolved once.
    pub addr: SocketAddr,
    /// `Host` of the look-up request.
    pub host: String,
    /// Path and query with `{key}` where the (percent-encoded) key goes.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub answer: AnswerSource,
    pub timeout: Duration,
    pub ttl: Duration,
    pub negative_ttl: Duration,
    /// `cache.error_ttl` (default 5 s, 0: off): how long a failed look-up (error, timeout,
    /// rejected answer) is remembered for its key, so a hanging service does not hold every
    /// request for that key for the full timeout again.
    pub error_ttl: Duration,
    pub max_entries: u64,
    /// `circuit.failures` (default 5, 1-1000): look-up calls failing in a row (error, bad
    /// status, timeout) that open the circuit breaker.
    pub circuit_failures: u32,
    /// `circuit.cooldown` (default 5 s, at most 1 h): how long an open breaker keeps the
    /// service from being asked; then one probe call goes through.
    pub circuit_cooldown: Duration,
    pub fallback: Fallback,
}

/// Bounds of `circuit.failures`: past 1000 a breaker would in effect never open.
const CIRCUIT_FAILURES: std::ops::RangeInclusive<u32> = 1..=1000;
/// Longest `circuit.cooldown`: longer would keep routing on the fallback long after the
/// service is back.
const MAX_COOLDOWN: Duration = Duration::from_secs(3600);

fn duration(
    errors: &mut Vec<PluginConfigError>,
    path: &str,
    text: Option<&str>,
    default: Duration,
) -> Duration {
    match text.map(parse_duration) {
        None => default,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            errors.push(PluginConfigError::new(path, e));
            default
        }
    }
}

/// `http://host[:port]/path?query` → (address, host header, path).
fn split_url(url: &str) -> Result<(SocketAddr, String, String), String> {
    if url.starts_with("https://") {
        return Err(
            "https look-up services are not supported (tether is built without TLS)".into(),
        );
    }
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{url}` must start with http://"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if !path.contains("{key}") {
        return Err(format!("`{url}` has no {{key}} where the key goes"));
    }
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let addr = crate::resolve(&with_port, authority)?;
    if http::uri::PathAndQuery::try_from(path.replace("{key}", "k")).is_err() {
        return Err(format!("`{path}` is not a request path"));
    }
    Ok((addr, authority.to_string(), path.to_string()))
}

impl Settings {
    pub fn parse(entry: &Value) -> Result<Settings, Vec<PluginConfigError>> {
        let raw: Raw = serde_yaml::from_value(entry.clone())
            .map_err(|e| vec![PluginConfigError::new("", e.to_string())])?;
        let mut errors = Vec::new();
        let (addr, host, path) = split_url(&raw.url).unwrap_or_else(|e| {
            errors.push(PluginConfigError::new("url", e));
            (
                SocketAddr::from(([127, 0, 0, 1], 0)),
                String::new(),
                String::new(),
            )
        });
        for name in raw.headers.keys() {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                errors.push(PluginConfigError::new(
                    format!("headers.{name}"),
                    "not a header name",
                ));
            }
        }
        let timeout = duration(
            &mut errors,
            "timeout",
            raw.timeout.as_deref(),
            Duration::from_millis(200),
        );
        if timeout.is_zero() {
            errors.push(PluginConfigError::new("timeout", "must be more than 0"));
        }
        let cache = raw.cache.unwrap_or(RawCache {
            ttl: None,
            negative_ttl: None,
            error_ttl: None,
            max_entries: None,
        });
        let ttl = duration(
            &mut errors,
            "cache.ttl",
            cache.ttl.as_deref(),
            Duration::from_secs(60),
        );
        let negative_ttl = duration(
            &mut errors,
            "cache.negative_ttl",
            cache.negative_ttl.as_deref(),
            Duration::from_secs(10),
        );
        // 0 is allowed: failures are then not remembered (the breaker still applies).
        let error_ttl = duration(
            &mut errors,
            "cache.error_ttl",
            cache.error_ttl.as_deref(),
            Duration::from_secs(5),
        );
        let max_entries = cache.max_entries.unwrap_or(100_000);
        if max_entries == 0 {
            errors.push(PluginConfigError::new(
                "cache.max_entries",
                "must be at least 1",
            ));
        }
        let circuit = raw.circuit.unwrap_or_default();
        let circuit_failures = circuit.failures.unwrap_or(5);
        if !CIRCUIT_FAILURES.contains(&circuit_failures) {
            errors.push(PluginConfigError::new(
                "circuit.failures",
                format!(
                    "must be {}-{}",
                    CIRCUIT_FAILURES.start(),
                    CIRCUIT_FAILURES.end()
                ),
            ));
        }
        let circuit_cooldown = duration(
            &mut errors,
            "circuit.cooldown",
            circuit.cooldown.as_deref(),
            Duration::from_secs(5),
        );
        if circuit_cooldown.is_zero() || circuit_cooldown > MAX_COOLDOWN {
            errors.push(PluginConfigError::new(
                "circuit.cooldown",
                "must be more than 0 and at most 1h",
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            key: raw.key,
            addr,
            host,
            path,
            headers: raw.headers.into_iter().collect(),
            answer: raw.answer,
            timeout,
            ttl,
            negative_ttl,
            error_ttl,
            max_entries,
            circuit_failures,
            circuit_cooldown,
            fallback: raw.fallback.unwrap_or(Fallback::Balance),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Settings, Vec<PluginConfigError>> {
        Settings::parse(&serde_yaml::from_str(yaml).unwrap())
    }

    #[test]
    fn defaults_and_errors() {
        let s = parse("{ name: route_lookup, key: { header: X-User }, url: \"http://127.0.0.1:9000/route?user={key}\", answer: { header: X-Route } }").unwrap();
        assert_eq!(s.addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(s.path, "/route?user={key}");
        assert_eq!(
            (s.timeout, s.ttl, s.negative_ttl, s.max_entries),
            (
                Duration::from_millis(200),
                Duration::from_secs(60),
                Duration::from_secs(10),
                100_000
            )
        );
        assert_eq!(s.fallback, Fallback::Balance);
        assert_eq!(
            (s.error_ttl, s.circuit_failures, s.circuit_cooldown),
            (Duration::from_secs(5), 5, Duration::from_secs(5))
        );

        let errs = parse("{ name: route_lookup, key: { header: X }, url: \"https://x/{key}\", answer: { json: t }, timeout: 0s, cache: { ttl: soon } }").unwrap_err();
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["url", "timeout", "cache.ttl"], "{errs:?}");
        let errs = parse("{ name: route_lookup, key: { header: X }, url: \"http://127.0.0.1:1/none\", answer: { json: t } }").unwrap_err();
        assert!(errs[0].message.contains("{key}"), "{errs:?}");
        let errs = parse("{ name: route_lookup, key: { header: X }, url: \"http://127.0.0.1:1/{key}\", answer: { json: t }, bogus: 1 }").unwrap_err();
        assert!(
            errs[0].message.contains("unknown field `bogus`"),
            "{errs:?}"
        );
    }

    #[test]
    fn error_ttl_and_circuit_settings_are_read_and_bounded() {
        let s = parse("{ name: route_lookup, key: { header: X }, url: \"http://127.0.0.1:1/{key}\", answer: { json: t }, cache: { error_ttl: 0s }, circuit: { failures: 3, cooldown: 30s } }").unwrap();
        assert_eq!(
            (s.error_ttl, s.circuit_failures, s.circuit_cooldown),
            (Duration::ZERO, 3, Duration::from_secs(30))
        );
        for (circuit, path) in [
            ("{ failures: 0 }", "circuit.failures"),
            ("{ failures: 1001 }", "circuit.failures"),
            ("{ cooldown: 0s }", "circuit.cooldown"),
            ("{ cooldown: 2h }", "circuit.cooldown"),
            ("{ cooldown: later }", "circuit.cooldown"),
        ] {
            let errs = parse(&format!("{{ name: route_lookup, key: {{ header: X }}, url: \"http://127.0.0.1:1/{{key}}\", answer: {{ json: t }}, circuit: {circuit} }}")).unwrap_err();
            assert_eq!(errs[0].path, path, "{circuit}: {errs:?}");
        }
        let errs = parse("{ name: route_lookup, key: { header: X }, url: \"http://127.0.0.1:1/{key}\", answer: { json: t }, cache: { error_ttl: soon } }").unwrap_err();
        assert_eq!(errs[0].path, "cache.error_ttl", "{errs:?}");
    }
}
