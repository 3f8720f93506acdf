//! The `shared_state:` section: the Redis (or Valkey) a fleet of tethers shares state through.

use super::check::Check;
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSharedState {
    pub url: Option<String>,
    pub sentinel: Option<RawSentinel>,
    pub username: Option<String>,
    pub password_file: Option<String>,
    pub ca_file: Option<String>,
    pub key_prefix: Option<String>,
    pub instance: Option<String>,
    pub connect_timeout: Option<String>,
    pub command_timeout: Option<String>,
    pub startup_timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSentinel {
    pub master: String,
    pub addresses: Vec<String>,
}

/// Redis Sentinel: the master's name and the sentinels to ask for its address.
#[derive(Debug, Clone, PartialEq)]
pub struct Sentinel {
    pub master: String,
    /// `redis://host:port` of each sentinel.
    pub addresses: Vec<String>,
}

/// Where and how a fleet shares partition tables and operators' changes (`shared_state:`).
#[derive(Clone, PartialEq)]
pub struct SharedState {
    /// `redis://` or `rediss://` (TLS) URL, without a password; with `sentinel`, the
    /// sentinels' addresses instead (for logs and status).
    pub url: String,
    /// Ask these sentinels for the master's address at every (re)connect.
    pub sentinel: Option<Sentinel>,
    /// ACL user name.
    pub username: Option<String>,
    /// Read from `password_file` when the config is loaded.
    pub password: Option<String>,
    /// PEM CA certificates for `rediss://` (default: the system's).
    pub ca_pem: Option<Vec<u8>>,
    /// Every key tether uses starts with `{<prefix>}:`; fleets sharing one Redis use
    /// different prefixes.
    pub key_prefix: String,
    /// This instance's name in the fleet (status, who made a change). `None`: a name is
    /// chosen at the first start and kept in `state_dir` (`services/fleet/identity.rs`).
    pub instance: Option<String>,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// How long a start waits for Redis before it uses `state_dir` alone.
    pub startup_timeout: Duration,
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedState")
            .field("url", &self.url)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("key_prefix", &self.key_prefix)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// Names that go into keys and values: no separators, no braces.
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn read_file(check: &mut Check, path: &str, file: &str) -> Option<Vec<u8>> {
    match std::fs::read(file) {
        Ok(b) if !b.iter().all(u8::is_ascii_whitespace) => Some(b),
        Ok(_) => {
            check.err(path, format!("`{file}` is empty"));
            None
        }
        Err(e) => {
            check.err(path, format!("cannot read `{file}`: {e}"));
            None
        }
    }
}

fn sentinel(raw: RawSentinel, check: &mut Check) -> Sentinel {
    if !is_name(&raw.master) {
        check.err(
            "shared_state.sentinel.master",
            format!(
                "`{}`: use 1 to 64 letters, digits, `.`, `_` or `-`",
                raw.master
            ),
        );
    }
    if raw.addresses.is_empty() {
        check.err(
            "shared_state.sentinel.addresses",
            "name at least one sentinel",
        );
    }
    let mut addresses = Vec::new();
    for (i, a) in raw.addresses.iter().enumerate() {
        let url = if a.contains("://") {
            a.clone()
        } else {
            format!("redis://{a}")
        };
        match redis::parse_redis_url(&url) {
            Some(u) if u.scheme() == "redis" && u.host().is_some() && u.port().is_some() => {
                addresses.push(url)
            }
            _ => check.err(
                format!("shared_state.sentinel.addresses[{i}]"),
                format!("`{a}` is not a sentinel's host:port"),
            ),
        }
    }
    Sentinel {
        master: raw.master,
        addresses,
    }
}

pub(super) fn validate(raw: RawSharedState, check: &mut Check) -> SharedState {
    let sentinel = raw.sentinel.map(|s| sentinel(s, check));
    let url = match (raw.url, &sentinel) {
        (Some(url), None) => url,
        (None, Some(s)) => s.addresses.join(","),
        (Some(_), Some(_)) => {
            check.err(
                "shared_state",
                "give either url (one Redis) or sentinel (a Sentinel-managed Redis), not both",
            );
            String::new()
        }
        (None, None) => {
            check.err(
                "shared_state.url",
                "required (redis://host:6379/0), unless sentinel is given",
            );
            String::new()
        }
    };
    // With sentinel, `url` only names the sentinels; an empty one was reported above.
    if sentinel.is_none() && !url.is_empty() {
        match redis::parse_redis_url(&url) {
            Some(u) if matches!(u.scheme(), "redis" | "rediss" | "valkey" | "valkeys") => {
                if u.password().is_some() {
                    check.err(
                        "shared_state.url",
                        "has a password in it: put the password in shared_state.password_file",
                    );
                }
            }
            _ => check.err(
                "shared_state.url",
                format!("`{url}` is not a redis:// or rediss:// URL (redis://host:6379/0)"),
            ),
        }
    }
    let password = raw
        .password_file
        .as_deref()
        .and_then(|f| read_file(check, "shared_state.password_file", f))
        .map(|b| String::from_utf8_lossy(&b).trim().to_string());
    let ca_pem = raw
        .ca_file
        .as_deref()
        .and_then(|f| read_file(check, "shared_state.ca_file", f));
    if ca_pem.is_some() && !url.starts_with("rediss") && !url.starts_with("valkeys") {
        check.err("shared_state.ca_file", "is only used with a rediss:// URL");
    }
    let key_prefix = raw.key_prefix.unwrap_or_else(|| "tether".into());
    if !is_name(&key_prefix) {
        check.err(
            "shared_state.key_prefix",
            format!("`{key_prefix}`: use 1 to 64 letters, digits, `.`, `_` or `-`"),
        );
    }
    let instance = raw.instance;
    if let Some(name) = instance.as_deref().filter(|n| !is_name(n)) {
        check.err(
            "shared_state.instance",
            format!("`{name}`: use 1 to 64 letters, digits, `.`, `_` or `-`"),
        );
    }
    let ms = Duration::from_millis;
    let mut duration = |field: &str, text: Option<String>, default: Duration| {
        check.duration(
            format!("shared_state.{field}"),
            text.as_deref(),
            default,
            ms(10)..=Duration::from_secs(60),
        )
    };
    SharedState {
        url,
        sentinel,
        username: raw.username,
        password,
        ca_pem,
        key_prefix,
        instance,
        connect_timeout: duration("connect_timeout", raw.connect_timeout, ms(1000)),
        command_timeout: duration("command_timeout", raw.command_timeout, ms(1000)),
        startup_timeout: duration("startup_timeout", raw.startup_timeout, ms(2000)),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    const BASE: &str = "listeners:\n  - { name: web, address: \"127.0.0.1:8080\", cluster: c }\n\
        clusters:\n  - name: c\n    servers:\n      - { name: s1, address: \"127.0.0.1:9001\" }\n";

    /// The errors of `BASE` plus `section`, one string.
    fn errors(section: &str) -> String {
        match parse(&format!("{BASE}{section}"), "t.yaml") {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_plain_url_takes_the_defaults() {
        let c = parse(
            &format!("{BASE}shared_state:\n  url: redis://10.0.0.5:6379/2\n"),
            "t",
        )
        .unwrap();
        let s = c.shared_state.unwrap();
        assert_eq!(s.key_prefix, "tether");
        assert_eq!(s.instance, None, "chosen at start, not by the config");
        assert_eq!(s.command_timeout, std::time::Duration::from_secs(1));
        assert_eq!(s.startup_timeout, std::time::Duration::from_secs(2));
        assert!(s.sentinel.is_none() && s.password.is_none());
    }

    #[test]
    fn secrets_stay_out_of_the_file_and_bad_values_are_named() {
        let e = errors("shared_state:\n  url: redis://:hunter2@10.0.0.5:6379\n");
        assert!(
            e.contains("shared_state.url") && e.contains("password_file"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "the password is never echoed: {e}");
        let e = errors("shared_state:\n  url: http://10.0.0.5\n");
        assert!(e.contains("not a redis:// or rediss:// URL"), "{e}");
        let e = errors("shared_state:\n  url: redis://h:1\n  password_file: /nonexistent/pw\n");
        assert!(
            e.contains("shared_state.password_file") && e.contains("/nonexistent/pw"),
            "{e}"
        );
        let e = errors(
            "shared_state:\n  url: redis://h:1\n  key_prefix: \"a{b}\"\n  instance: \"x|y\"\n",
        );
        assert!(
            e.contains("shared_state.key_prefix") && e.contains("shared_state.instance"),
            "{e}"
        );
        let e = errors("shared_state:\n  url: redis://h:1\n  command_timeout: 5m\n");
        assert!(e.contains("shared_state.command_timeout"), "{e}");
        let e = errors("shared_state:\n  instance: a\n");
        assert!(
            e.contains("shared_state.url") && e.contains("required"),
            "{e}"
        );
        let e = errors("shared_state:\n  url: redis://h:1\n  color: blue\n");
        assert!(e.contains("color"), "{e}");
    }

    #[test]
    fn sentinel_instead_of_a_url() {
        let c = parse(
            &format!("{BASE}shared_state:\n  sentinel:\n    master: fleet\n    addresses: [\"10.0.0.1:26379\", \"redis://10.0.0.2:26379\"]\n"),
            "t",
        )
        .unwrap();
        let s = c.shared_state.unwrap().sentinel.unwrap();
        assert_eq!(s.master, "fleet");
        assert_eq!(
            s.addresses,
            ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
        );
        let e = errors(
            "shared_state:\n  url: redis://h:1\n  sentinel: { master: m, addresses: [\"h:2\"] }\n",
        );
        assert!(e.contains("not both"), "{e}");
        let e = errors("shared_state:\n  sentinel: { master: m, addresses: [] }\n");
        assert!(e.contains("shared_state.sentinel.addresses"), "{e}");
        let e = errors("shared_state:\n  sentinel: { master: m, addresses: [\"nohostport\"] }\n");
        assert!(e.contains("shared_state.sentinel.addresses[0]"), "{e}");
    }
}
