//! `clusters[].retry_on`, `retry_non_idempotent` and `retry_timeout`: which failures of a
//! try send the request to the next server (HAProxy's `retry-on`, nginx's
//! `proxy_next_upstream`, the WebSphere plug-in's `ServerIOTimeoutRetry`), for which
//! requests, and for how long after the request began.

use super::check::Check;
use super::model::Retry;
use serde_yaml::Value;
use std::time::Duration;

/// The conditions by name, as `retry_on` lists them.
const NAMES: &str =
    "connect_failure, empty_response, junk_response, response_timeout, or a 4xx/5xx status";

pub(super) fn retry(
    on: Option<&[Value]>,
    non_idempotent: Option<bool>,
    timeout: Option<&str>,
    path: &str,
    check: &mut Check,
) -> Retry {
    let mut r = Retry {
        non_idempotent: non_idempotent.unwrap_or(false),
        timeout: timeout.map(|t| {
            check.duration(
                format!("{path}.retry_timeout"),
                Some(t),
                Duration::ZERO,
                Duration::from_millis(1)..=Duration::from_secs(3600),
            )
        }),
        ..Retry::default()
    };
    let Some(on) = on else {
        return r;
    };
    r.connect_failure = false;
    r.empty_response = false;
    for (i, v) in on.iter().enumerate() {
        let field = format!("{path}.retry_on[{i}]");
        match v {
            Value::String(s) => match s.as_str() {
                "connect_failure" => r.connect_failure = true,
                "empty_response" => r.empty_response = true,
                "junk_response" => r.junk_response = true,
                "response_timeout" => r.response_timeout = true,
                other => check.err(field, format!("`{other}`: expected {NAMES}")),
            },
            Value::Number(n) => match n.as_u64().and_then(|n| u16::try_from(n).ok()) {
                Some(status) if (400..=599).contains(&status) => {
                    if !r.statuses.contains(&status) {
                        r.statuses.push(status);
                    }
                }
                _ => check.err(field, format!("`{n}`: expected {NAMES}")),
            },
            _ => check.err(field, format!("expected {NAMES}")),
        }
    }
    r
}
