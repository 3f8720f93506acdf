//! The `script` plugin's config, checked when the config is loaded: where the Luau source
//! is, the `config` it is given, its limits and what a failure does. `load.rs` then
//! compiles the source and runs it once.

use super::io::HttpSettings;
use super::phase::Phase;
use crate::config_error::PluginConfigError;
use crate::duration::parse_duration;
use serde::Deserialize;
use serde_yaml::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Memory one script's VM may hold, per worker thread, unless `memory_limit` says otherwise.
pub const DEFAULT_MEMORY: usize = 16 << 20;
/// Time one phase call may take, unless `time_budget` says otherwise.
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(5);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[allow(dead_code)]
    name: String,
    file: Option<PathBuf>,
    source: Option<String>,
    /// The name in metrics and logs (default: the file's stem, or `inline`).
    label: Option<String>,
    config: Option<Value>,
    on_error: Option<OnError>,
    time_budget: Option<String>,
    memory_limit: Option<String>,
    shared: Option<RawShared>,
    http: Option<RawHttp>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    allow: Vec<String>,
    timeout: Option<String>,
}

/// How long an HTTP call of a script may take unless `http.timeout` says otherwise.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_millis(500);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShared {
    name: String,
    max_size: Option<String>,
}

/// Bytes a shared dictionary holds unless `shared.max_size` says otherwise.
pub const DEFAULT_SHARED: usize = 16 << 20;

/// What a failed call (an error, the time budget, the memory limit) does to its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Go on as if the phase had not run (the failure is counted and logged).
    #[default]
    Continue,
    /// Answer 503 (in the `request` and `route` phases, which may still answer).
    Reject,
}

/// A validated script.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub label: String,
    /// Where the source came from, for messages (`file.luau`, or `inline`).
    pub origin: String,
    pub source: Arc<str>,
    /// Luau bytecode, compiled once.
    pub bytecode: Arc<[u8]>,
    pub config: Value,
    pub on_error: OnError,
    pub time_budget: Duration,
    pub memory_limit: usize,
    /// The phases the script defines.
    pub phases: Vec<Phase>,
    /// The shared dictionary it names (`shared:` in the script), and its size in bytes.
    pub shared: Option<(String, usize)>,
    /// Where its HTTP calls may go.
    pub http: Option<HttpSettings>,
}

impl Settings {
    /// The settings as written, their source not compiled yet (`bytecode` and `phases`
    /// empty): with the field a compile error is reported at, and the errors found so far
    /// (`Err`: none of the rest could be checked).
    pub fn read(entry: &Value) -> Result<Read, Vec<PluginConfigError>> {
        let raw: Raw = serde_yaml::from_value(entry.clone())
            .map_err(|e| vec![PluginConfigError::new("", e.to_string())])?;
        let mut errors = Vec::new();
        let (origin, source, at) = match (&raw.file, raw.source) {
            (Some(file), None) => match std::fs::read_to_string(file) {
                Ok(text) => (file.display().to_string(), text, "file"),
                Err(e) => {
                    let message = format!("cannot read {}: {e}", file.display());
                    return Err(vec![PluginConfigError::new("file", message)]);
                }
            },
            (None, Some(text)) => ("inline".to_string(), text, "source"),
            _ => {
                let message = "give exactly one of file, source";
                return Err(vec![PluginConfigError::new("", message)]);
            }
        };
        let label = raw.label.unwrap_or_else(|| match &raw.file {
            Some(f) => f
                .file_stem()
                .map_or("script".into(), |s| s.to_string_lossy().into_owned()),
            None => "inline".into(),
        });
        let time_budget = match raw.time_budget.as_deref().map(parse_duration) {
            None => DEFAULT_BUDGET,
            Some(Ok(d)) if d >= Duration::from_millis(1) && d <= Duration::from_secs(10) => d,
            Some(Ok(_)) => {
                errors.push(PluginConfigError::new(
                    "time_budget",
                    "must be from 1ms to 10s",
                ));
                DEFAULT_BUDGET
            }
            Some(Err(e)) => {
                errors.push(PluginConfigError::new("time_budget", e));
                DEFAULT_BUDGET
            }
        };
        let memory_limit = match raw.memory_limit.as_deref().map(parse_size) {
            None => DEFAULT_MEMORY,
            Some(Ok(n)) if (1 << 20..=1 << 30).contains(&n) => n,
            Some(Ok(_)) => {
                let message = "must be from 1MiB to 1GiB";
                errors.push(PluginConfigError::new("memory_limit", message));
                DEFAULT_MEMORY
            }
            Some(Err(e)) => {
                errors.push(PluginConfigError::new("memory_limit", e));
                DEFAULT_MEMORY
            }
        };
        let shared = raw.shared.map(|sh| {
            let size = match sh.max_size.as_deref().map(parse_size) {
                None => DEFAULT_SHARED,
                Some(Ok(n)) if (64 << 10..=1 << 32).contains(&n) => n,
                Some(Ok(_)) => {
                    let message = "must be from 64KiB to 4GiB";
                    errors.push(PluginConfigError::new("shared.max_size", message));
                    DEFAULT_SHARED
                }
                Some(Err(e)) => {
                    errors.push(PluginConfigError::new("shared.max_size", e));
                    DEFAULT_SHARED
                }
            };
            let ok = !sh.name.is_empty()
                && sh.name.len() <= 64
                && sh
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok {
                let message = "a name of 1 to 64 letters, digits, `_` or `-`";
                errors.push(PluginConfigError::new("shared.name", message));
            }
            (sh.name, size)
        });
        let http = raw.http.map(|h| {
            let timeout = match h.timeout.as_deref().map(parse_duration) {
                None => DEFAULT_HTTP_TIMEOUT,
                Some(Ok(d)) if d >= Duration::from_millis(1) && d <= Duration::from_secs(60) => d,
                Some(Ok(_)) => {
                    errors.push(PluginConfigError::new(
                        "http.timeout",
                        "must be from 1ms to 60s",
                    ));
                    DEFAULT_HTTP_TIMEOUT
                }
                Some(Err(e)) => {
                    errors.push(PluginConfigError::new("http.timeout", e));
                    DEFAULT_HTTP_TIMEOUT
                }
            };
            let mut allow = Vec::new();
            for (i, a) in h.allow.iter().enumerate() {
                match destination(a) {
                    Ok(d) => allow.push(d),
                    Err(e) => errors.push(PluginConfigError::new(format!("http.allow[{i}]"), e)),
                }
            }
            HttpSettings { allow, timeout }
        });
        let config = raw.config.unwrap_or(Value::Mapping(Default::default()));
        let settings = Settings {
            label,
            origin,
            source: source.into(),
            bytecode: Arc::from(&[][..]),
            config,
            on_error: raw.on_error.unwrap_or_default(),
            time_budget,
            memory_limit,
            phases: Vec::new(),
            shared,
            http,
        };
        Ok(Read {
            settings,
            at,
            errors,
        })
    }
}

/// What [`Settings::read`] gives.
pub struct Read {
    pub settings: Settings,
    /// The field a compile error is reported at (`file` or `source`).
    pub at: &'static str,
    pub errors: Vec<PluginConfigError>,
}

/// An allowed destination, `host:port` (port 80 when left out), resolved now.
fn destination(text: &str) -> Result<(String, SocketAddr), String> {
    let text = text.trim();
    if text.contains('/') || text.is_empty() {
        return Err(format!("`{text}` is not host:port"));
    }
    let with_port = match text.rsplit_once(':') {
        Some((_, p)) if p.parse::<u16>().is_ok() => text.to_string(),
        _ => format!("{text}:80"),
    };
    let addr = crate::resolve(&with_port, text)?;
    Ok((with_port, addr))
}

/// `512KiB`, `16MiB`, `1GiB` (or a number of bytes).
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as `16MiB`"))?;
    let scale = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("unknown unit `{other}` (use KiB, MiB or GiB)")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("16MB").is_err());
        assert!(parse_size("MiB").is_err());
    }
}
