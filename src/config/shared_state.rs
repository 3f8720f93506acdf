//! The `shared_state:` section: the Redis (or Valkey) a fleet of tethers shares state through.

use super::validate::Check;
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSharedState {
    pub url: String,
    pub username: Option<String>,
    pub password_file: Option<String>,
    pub ca_file: Option<String>,
    pub key_prefix: Option<String>,
    pub instance: Option<String>,
    pub connect_timeout: Option<String>,
    pub command_timeout: Option<String>,
    pub startup_timeout: Option<String>,
}

/// Where and how a fleet shares partition tables and operators' changes (`shared_state:`).
#[derive(Clone, PartialEq)]
pub struct SharedState {
    /// `redis://` or `rediss://` (TLS) URL, without a password.
    pub url: String,
    /// ACL user name.
    pub username: Option<String>,
    /// Read from `password_file` when the config is loaded.
    pub password: Option<String>,
    /// PEM CA certificates for `rediss://` (default: the system's).
    pub ca_pem: Option<Vec<u8>>,
    /// Every key tether uses starts with `{<prefix>}:`; fleets sharing one Redis use
    /// different prefixes.
    pub key_prefix: String,
    /// This instance's name in the fleet (status, who made a change).
    pub instance: String,
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
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The host's name, for the default instance name.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
    // or truncates, and we stop at the first NUL or the end.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name: String = String::from_utf8_lossy(&buf[..end])
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if rc != 0 || name.is_empty() {
        "tether".into()
    } else {
        name
    }
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

pub(super) fn validate(raw: RawSharedState, check: &mut Check) -> SharedState {
    match redis::parse_redis_url(&raw.url) {
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
            format!(
                "`{}` is not a redis:// or rediss:// URL (redis://host:6379/0)",
                raw.url
            ),
        ),
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
    if ca_pem.is_some() && !raw.url.starts_with("rediss") && !raw.url.starts_with("valkeys") {
        check.err("shared_state.ca_file", "is only used with a rediss:// URL");
    }
    let key_prefix = raw.key_prefix.unwrap_or_else(|| "tether".into());
    if !is_name(&key_prefix) {
        check.err(
            "shared_state.key_prefix",
            format!("`{key_prefix}`: use 1 to 64 letters, digits, `.`, `_` or `-`"),
        );
    }
    let instance = raw.instance.unwrap_or_else(host_name);
    if !is_name(&instance) {
        check.err(
            "shared_state.instance",
            format!("`{instance}`: use 1 to 64 letters, digits, `.`, `_` or `-`"),
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
        url: raw.url,
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
