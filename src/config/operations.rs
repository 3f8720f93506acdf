//! Validation of the operating sections: the admin API and `/metrics` (and their TLS),
//! health checks, `fail_on_status`.

use super::check::Check;
use super::error::ConfigError;
use super::model::{
    Admin, Cluster, FailOn, HealthCheck, HealthCheckKind, Listener, Metrics, PluginSpec, Role,
    ServiceTls,
};
use super::pem::load_certs;
use super::raw::{RawAdmin, RawHealthCheck, RawMetrics, RawServiceTls};
use serde_yaml::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tether_plugins::KnownTargets;

pub(super) fn admin(raw: RawAdmin, listeners: &[Listener], check: &mut Check) -> Admin {
    let address = match raw.address.parse::<SocketAddr>() {
        Ok(a) => {
            if listeners.iter().any(|l| l.address == a) {
                check.err(
                    "admin.address",
                    format!("`{a}` is also a listener's address"),
                );
            }
            a
        }
        Err(_) => {
            check.err(
                "admin.address",
                format!("`{}` is not an IP:port address", raw.address),
            );
            SocketAddr::from(([127, 0, 0, 1], 0))
        }
    };
    let allow_unauthenticated = raw.allow_unauthenticated.unwrap_or(false);
    let no_token = raw.token_file.is_none() && raw.tokens.is_empty();
    if no_token && !address.ip().is_loopback() && !allow_unauthenticated {
        check.err(
            "admin.address",
            format!(
                "`{address}` is not a loopback address and the admin API has no token_file: \
                 anyone who reaches it could stop every server; set admin.token_file, or \
                 `allow_unauthenticated: true` to accept that"
            ),
        );
    }
    let token = raw
        .token_file
        .and_then(|file| token_of(&file, "admin.token_file".into(), check));
    let mut role_tokens: Vec<(String, Role)> = Vec::new();
    for (i, t) in raw.tokens.into_iter().enumerate() {
        let role = match t.role.as_str() {
            "read" => Role::Read,
            "operate" => Role::Operate,
            "admin" => Role::Admin,
            other => {
                check.err(
                    format!("admin.tokens[{i}].role"),
                    format!("`{other}` must be read, operate or admin"),
                );
                continue;
            }
        };
        let Some(secret) = token_of(&t.file, format!("admin.tokens[{i}].file"), check) else {
            continue;
        };
        let taken =
            token.as_ref() == Some(&secret) || role_tokens.iter().any(|(s, _)| *s == secret);
        if taken {
            check.err(
                format!("admin.tokens[{i}].file"),
                "holds the same token as another entry: each role needs its own",
            );
            continue;
        }
        role_tokens.push((secret, role));
    }
    Admin {
        address,
        token,
        role_tokens,
        allow_unauthenticated,
        tls: raw.tls.map(|t| service_tls(t, "admin.tls", check)),
    }
}

/// `admin.tls` or `metrics.tls` at `path`: the files are loaded and checked as a
/// listener's are (readable, PEM, the key fits, not expired), each error at its field.
fn service_tls(raw: RawServiceTls, path: &str, check: &mut Check) -> ServiceTls {
    super::tls::pair(check, path, &raw.cert, &raw.key);
    if let Some(ca) = &raw.client_ca {
        if let Err(e) = load_certs(ca.as_ref(), "CA bundle") {
            check.err(format!("{path}.client_ca"), e);
        }
    }
    ServiceTls {
        cert: raw.cert.into(),
        key: raw.key.into(),
        client_ca: raw.client_ca.map(Into::into),
    }
}

/// An admin API off loopback, with tokens but without TLS: each call's token crosses the
/// network in clear, for anyone on the path to read and use.
pub(super) fn admin_warnings(admin: &Admin) -> Vec<ConfigError> {
    let tokens = admin.token.is_some() || !admin.role_tokens.is_empty();
    if !tokens || admin.tls.is_some() || admin.address.ip().is_loopback() {
        return Vec::new();
    }
    vec![ConfigError::new(
        "admin.address",
        format!(
            "`{}` is not a loopback address and the admin API has no tls: its bearer tokens \
             cross the network in clear; set admin.tls (cert, key), or bind the admin API to a \
             loopback address",
            admin.address
        ),
    )]
}

/// A token file's token (trimmed); an error at `path` when it is empty or unreadable.
fn token_of(file: &str, path: String, check: &mut Check) -> Option<String> {
    match std::fs::read_to_string(file) {
        Ok(text) if !text.trim().is_empty() => Some(text.trim().to_string()),
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

pub(super) fn metrics(
    raw: RawMetrics,
    listeners: &[Listener],
    admin: Option<&Admin>,
    check: &mut Check,
) -> Option<Metrics> {
    let Ok(address) = raw.address.parse::<SocketAddr>() else {
        check.err(
            "metrics.address",
            format!("`{}` is not an IP:port address", raw.address),
        );
        return None;
    };
    let taken = listeners.iter().any(|l| l.address == address)
        || admin.is_some_and(|a| a.address == address);
    if taken {
        check.err(
            "metrics.address",
            format!("`{address}` is already a listener's or the admin API's address"),
        );
    }
    Some(Metrics {
        address,
        tls: raw.tls.map(|t| service_tls(t, "metrics.tls", check)),
    })
}

/// The clusters and servers routing plugins may name.
pub(super) fn known_targets(clusters: &[Cluster]) -> KnownTargets {
    KnownTargets::new(clusters.iter().map(|c| {
        (
            c.name.as_str(),
            c.servers.iter().map(|s| s.name.as_str()).collect(),
        )
    }))
}

/// Validates a plugin chain; each error is reported at its entry's path.
pub(super) fn plugins(
    values: &[Value],
    path: &str,
    targets: &KnownTargets,
    check: &mut Check,
) -> Vec<PluginSpec> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        match tether_plugins::parse(v, targets) {
            Ok(spec) => out.push(spec),
            Err(errors) => {
                for e in errors {
                    let at = if e.path.is_empty() {
                        format!("{path}[{i}]")
                    } else {
                        format!("{path}[{i}].{}", e.path)
                    };
                    check.err(at, e.message);
                }
            }
        }
    }
    out
}

/// `200`, `"200-399"` or `"2xx"`.
fn status_range(value: &Value) -> Option<(u16, u16)> {
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.trim().to_string(),
        _ => return None,
    };
    let range = if let Some(class) = text.strip_suffix("xx") {
        let c: u16 = class.parse().ok()?;
        (c * 100, c * 100 + 99)
    } else if let Some((lo, hi)) = text.split_once('-') {
        (lo.trim().parse().ok()?, hi.trim().parse().ok()?)
    } else {
        let s = text.parse().ok()?;
        (s, s)
    };
    (100 <= range.0 && range.0 <= range.1 && range.1 <= 599).then_some(range)
}

pub(super) fn health_check(raw: RawHealthCheck, path: &str, check: &mut Check) -> HealthCheck {
    let expect = match &raw.expect {
        None => (200, 399),
        Some(v) => status_range(v).unwrap_or_else(|| {
            check.err(
                format!("{path}.expect"),
                "must be a status (200), a range (200-399) or a class (2xx)",
            );
            (200, 399)
        }),
    };
    let interval = check.duration(
        format!("{path}.interval"),
        raw.interval.as_deref(),
        Duration::from_secs(5),
        Duration::from_millis(100)..=Duration::from_secs(3600),
    );
    let timeout = check.duration(
        format!("{path}.timeout"),
        raw.timeout.as_deref(),
        Duration::from_secs(1),
        Duration::from_millis(1)..=Duration::from_secs(3600),
    );
    if timeout > interval {
        check.err(format!("{path}.timeout"), "must be at most the interval");
    }
    let (rise, fall) = (raw.rise.unwrap_or(2), raw.fall.unwrap_or(2));
    for (field, v) in [("rise", rise), ("fall", fall)] {
        if !(1..=100).contains(&v) {
            check.err(format!("{path}.{field}"), "must be between 1 and 100");
        }
    }
    let check_path = raw.path.unwrap_or_else(|| "/".into());
    if !check_path.starts_with('/')
        || http::uri::PathAndQuery::try_from(check_path.as_str()).is_err()
    {
        check.err(
            format!("{path}.path"),
            format!("`{check_path}` is not a request path"),
        );
    }
    HealthCheck {
        kind: raw.kind.unwrap_or(HealthCheckKind::Tcp),
        path: check_path,
        host: raw.host,
        expect,
        interval,
        timeout,
        rise,
        fall,
    }
}

/// `fail_on_status: [503, -404]`: a 4xx or 5xx status, negative (mod_jk's) to fail the
/// try without marking the server down.
pub(super) fn fail_on_status(raw: Option<Vec<i32>>, path: &str, check: &mut Check) -> Vec<FailOn> {
    let mut out: Vec<FailOn> = Vec::new();
    for (i, &code) in raw.unwrap_or_default().iter().enumerate() {
        let field = format!("{path}.fail_on_status[{i}]");
        match u16::try_from(code.unsigned_abs()) {
            Ok(status) if (400..=599).contains(&status) => {
                if out.iter().any(|f| f.status == status) {
                    check.err(field, format!("{status} is listed twice"));
                } else {
                    out.push(FailOn {
                        status,
                        mark_down: code > 0,
                    });
                }
            }
            _ => check.err(
                field,
                "must be a 4xx or 5xx status (negative: without marking the server down)",
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_ranges() {
        let v = |s: &str| serde_yaml::from_str::<Value>(s).unwrap();
        assert_eq!(status_range(&v("200")), Some((200, 200)));
        assert_eq!(status_range(&v("\"200-399\"")), Some((200, 399)));
        assert_eq!(status_range(&v("2xx")), Some((200, 299)));
        assert_eq!(status_range(&v("\"399-200\"")), None);
        assert_eq!(status_range(&v("700")), None);
        assert_eq!(status_range(&v("ok")), None);
    }
}
