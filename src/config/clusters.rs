//! Validation of `clusters[]` and their `servers[]`: names, addresses (resolved once, at
//! load time), session settings, WebSphere and health-check fields, redirects.

use super::check::{check_name, Check, HOUR, MS};
use super::model::*;
use super::operations;
use super::raw::{RawCluster, RawServer};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// A cookie or parameter name must be a non-empty HTTP token without `=`.
/// Is `name` an HTTP token (RFC 9110), as a cookie or path parameter name must be?
pub fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
}

/// A route tether can read back from a session id: not empty, and without the `;`, `,` or
/// space that end a session id or separate list items. The importers check their routes
/// with it too.
pub fn usable_route(route: &str) -> bool {
    !route.is_empty() && !route.contains([';', ',', ' '])
}

/// A WebSphere clone id tether can find in a session id and a `$WSPT` table: not empty,
/// and without the `:` and `+` that separate clone ids, or the `,` and `=` of the table.
pub fn usable_clone_id(clone: &str) -> bool {
    !clone.is_empty() && !clone.contains([':', '+', ',', '='])
}

pub(super) fn cluster(
    c: RawCluster,
    raw_servers: &[Option<RawServer>],
    resolve_now: bool,
    path: &str,
    check: &mut Check,
) -> Cluster {
    let session_style = c.session_style.unwrap_or(SessionStyle::Tomcat);
    let session_cookie = c.session_cookie.unwrap_or_else(|| "JSESSIONID".into());
    let session_path = c.session_path.unwrap_or_else(|| "jsessionid".into());
    for (field, value) in [
        ("session_cookie", &session_cookie),
        ("session_path", &session_path),
    ] {
        if !is_token(value) {
            check.err(
                format!("{path}.{field}"),
                format!("`{value}` is not a valid name"),
            );
        }
    }
    if let Some(h) = &c.session_header {
        if http::HeaderName::from_bytes(h.as_bytes()).is_err() {
            check.err(
                format!("{path}.session_header"),
                format!("`{h}` is not a header name"),
            );
        }
    }
    let max_attempts = c.max_attempts.unwrap_or(3);
    if !(1..=MAX_ATTEMPTS_LIMIT).contains(&max_attempts) {
        check.err(
            format!("{path}.max_attempts"),
            format!("must be between 1 and {MAX_ATTEMPTS_LIMIT}"),
        );
    }
    let websphere = c.websphere.as_ref();
    let partition_table_max = websphere
        .and_then(|w| w.partition_table_max)
        .unwrap_or(DEFAULT_PARTITION_TABLE_MAX);
    if !(1..=PARTITION_TABLE_MAX_LIMIT).contains(&partition_table_max) {
        check.err(
            format!("{path}.websphere.partition_table_max"),
            format!("must be between 1 and {PARTITION_TABLE_MAX_LIMIT}"),
        );
    }
    let clone_separator = match websphere.and_then(|w| w.clone_separator.as_deref()) {
        None => b':',
        Some(s) if s.len() == 1 && matches!(s.as_bytes()[0], b':' | b'+') => s.as_bytes()[0],
        Some(s) => {
            check.err(
                format!("{path}.websphere.clone_separator"),
                format!("`{s}` must be `:` or `+`"),
            );
            b':'
        }
    };
    let recover_after = check.duration(
        format!("{path}.recover_after"),
        c.recover_after.as_deref(),
        Duration::from_secs(10),
        Duration::ZERO..=HOUR,
    );
    let connect_timeout = check.duration(
        format!("{path}.connect_timeout"),
        c.connect_timeout.as_deref(),
        Duration::from_secs(3),
        MS..=Duration::from_secs(600),
    );
    let read_timeout = check.duration(
        format!("{path}.read_timeout"),
        c.read_timeout.as_deref(),
        Duration::from_secs(60),
        MS..=24 * HOUR,
    );
    let idle_timeout = check.duration(
        format!("{path}.idle_timeout"),
        c.idle_timeout.as_deref(),
        Duration::from_secs(60),
        MS..=HOUR,
    );
    let session_timeout = check.duration(
        format!("{path}.session_timeout"),
        c.session_timeout.as_deref(),
        DEFAULT_SESSION_TIMEOUT,
        Duration::from_secs(1)..=24 * HOUR,
    );
    let session_table_max = c.session_table_max.unwrap_or(DEFAULT_SESSION_TABLE_MAX);
    if session_table_max > SESSION_TABLE_MAX_LIMIT {
        check.err(
            format!("{path}.session_table_max"),
            format!("must be between 0 (not counted) and {SESSION_TABLE_MAX_LIMIT}"),
        );
    }
    if c.balance == Some(Balance::Sessions) && (session_table_max == 0 || c.sticky == Some(false)) {
        check.err(
            format!("{path}.balance"),
            "`sessions` needs the live session count (a sticky cluster with session_table_max above 0)",
        );
    }
    let drain_rescue = c.drain_rescue.unwrap_or(false);
    if drain_rescue && (session_table_max == 0 || c.sticky == Some(false)) {
        check.err(
            format!("{path}.drain_rescue"),
            "needs the live session count (a sticky cluster with session_table_max above 0)",
        );
    }
    let max_inflight = super::queue::max_inflight(c.max_inflight, 0, path, check);
    let queue = super::queue::queue(c.queue.as_ref(), path, check);
    let retry = super::retry::retry(
        c.retry_on.as_deref(),
        c.retry_non_idempotent,
        c.retry_timeout.as_deref(),
        path,
        check,
    );
    let servers = servers(
        raw_servers,
        (session_style, max_inflight, resolve_now),
        path,
        check,
    );
    if let Some(t) = c
        .tls
        .as_ref()
        .filter(|t| t.verify != Some(false) && t.sni.is_none())
    {
        let _ = t;
        if let Some(s) = servers
            .iter()
            .find(|s| s.host.is_none() && s.address.port() != 0)
        {
            check.err(
                format!("{path}.tls.sni"),
                format!(
                    "server `{}` is addressed by IP: give the name its certificate carries \
                     (tls.sni), or tls.verify: false",
                    s.name
                ),
            );
        }
    }
    Cluster {
        name: c.name,
        session_style,
        session_cookie,
        session_path,
        session_header: c.session_header,
        sticky: c.sticky.unwrap_or(true),
        sticky_force: c.sticky_force.unwrap_or(false),
        max_attempts,
        balance: c.balance.unwrap_or(Balance::Weighted),
        recover_after,
        connect_timeout,
        read_timeout,
        idle_timeout,
        clone_separator,
        private_headers: websphere.and_then(|w| w.private_headers).unwrap_or(false),
        partition_table_max,
        session_timeout,
        session_table_max: session_table_max.min(SESSION_TABLE_MAX_LIMIT),
        drain_rescue,
        outlier: c.outlier.as_ref().map(|o| Outlier {
            consecutive_5xx: check.count(
                format!("{path}.outlier.consecutive_5xx"),
                o.consecutive_5xx.unwrap_or(5),
                1..=1000,
            ),
            consecutive_errors: check.count(
                format!("{path}.outlier.consecutive_errors"),
                o.consecutive_errors.unwrap_or(5),
                1..=1000,
            ),
            ejection: check.duration(
                format!("{path}.outlier.ejection"),
                o.ejection.as_deref(),
                Duration::from_secs(30),
                Duration::from_secs(1)..=HOUR,
            ),
            max_ejected_percent: check.count(
                format!("{path}.outlier.max_ejected_percent"),
                o.max_ejected_percent.unwrap_or(50),
                1..=100,
            ),
        }),
        slow_start: check.duration(
            format!("{path}.slow_start"),
            c.slow_start.as_deref(),
            Duration::ZERO,
            Duration::ZERO..=HOUR,
        ),
        health_check: c
            .health_check
            .map(|h| operations::health_check(h, &format!("{path}.health_check"), check)),
        fail_on_status: operations::fail_on_status(c.fail_on_status, path, check),
        plugins: Vec::new(),
        tls: c
            .tls
            .as_ref()
            .map(|t| super::tls::cluster_tls(t, path, check)),
        ajp: c.ajp.as_ref().map(|a| ajp(a, c.tls.is_some(), path, check)),
        ssl_headers: c
            .ssl_headers
            .as_ref()
            .map(|h| super::tls::ssl_headers(h, path, check)),
        queue,
        retry,
        max_inflight_per: c.max_inflight_per.unwrap_or_default(),
        error_pages: super::error_pages::error_pages(c.error_pages.as_ref(), path, check),
        replace_server_errors: c.replace_server_errors.map_or(0, |s| {
            check.count(format!("{path}.replace_server_errors"), s, 400..=599)
        }),
        servers,
    }
}

/// `ajp:`: the secret read from its file, the packet size bounded as Tomcat's.
fn ajp(raw: &super::raw_tls::RawAjp, tls: bool, path: &str, check: &mut Check) -> Ajp {
    let path = format!("{path}.ajp");
    if tls {
        check.err(
            path.clone(),
            "AJP has no TLS: a cluster has `ajp` or `tls`, not both",
        );
    }
    let secret = raw
        .secret_file
        .as_deref()
        .and_then(|file| match std::fs::read_to_string(file) {
            Ok(text) if !text.trim().is_empty() => Some(text.trim().to_string()),
            Ok(_) => {
                check.err(format!("{path}.secret_file"), format!("`{file}` is empty"));
                None
            }
            Err(e) => {
                check.err(
                    format!("{path}.secret_file"),
                    format!("cannot read `{file}`: {e}"),
                );
                None
            }
        });
    let range = crate::wire::ajp::DEFAULT_PACKET_SIZE..=crate::wire::ajp::MAX_PACKET_SIZE;
    let packet_size = raw
        .packet_size
        .unwrap_or(crate::wire::ajp::DEFAULT_PACKET_SIZE);
    if !range.contains(&packet_size) {
        check.err(
            format!("{path}.packet_size"),
            format!("must be between 8192 and 65536 (Tomcat's packetSize), not {packet_size}"),
        );
    }
    let ping = match raw.ping.as_deref() {
        None | Some("never") => AjpPing::Never,
        Some("connect") => AjpPing::Connect,
        Some("request") => AjpPing::Request,
        Some(other) => {
            check.err(
                format!("{path}.ping"),
                format!("must be one of never, connect, request, not `{other}`"),
            );
            AjpPing::Never
        }
    };
    let ping_timeout = check.duration(
        format!("{path}.ping_timeout"),
        raw.ping_timeout.as_deref(),
        Duration::from_secs(10),
        Duration::from_millis(10)..=Duration::from_secs(300),
    );
    let ping_interval = raw.ping_interval.as_deref().map(|text| {
        check.duration(
            format!("{path}.ping_interval"),
            Some(text),
            Duration::from_secs(60),
            Duration::from_millis(100)..=Duration::from_secs(86_400),
        )
    });
    Ajp {
        secret,
        packet_size,
        ping,
        ping_timeout,
        ping_interval,
    }
}

pub(super) fn servers(
    raw: &[Option<RawServer>],
    (style, max_inflight, resolve_now): (SessionStyle, u32, bool),
    path: &str,
    check: &mut Check,
) -> Vec<Server> {
    let complete = raw.iter().all(Option::is_some);
    if raw.is_empty() {
        check.err(format!("{path}.servers"), "at least one server is required");
    }
    let mut names = HashMap::new();
    let mut routes = HashMap::new();
    let mut clones = HashMap::new();
    let mut clone_tags: HashMap<u32, String> = HashMap::new();
    let mut addrs = HashMap::new();
    let mut out = Vec::new();
    let mut redirects = Vec::new();
    for (i, s) in raw.iter().enumerate() {
        let Some(s) = s else { continue };
        let p = format!("{path}.servers[{i}]");
        check_name(check, format!("{p}.name"), &s.name);
        check.unique(
            &mut names,
            s.name.clone(),
            format!("{p}.name"),
            "server name",
            &s.name,
        );
        let route = s.route.clone().unwrap_or_else(|| s.name.clone());
        if !usable_route(&route) {
            check.err(
                format!("{p}.route"),
                format!("`{route}` is not a usable route"),
            );
        }
        check.unique(
            &mut routes,
            route.clone(),
            format!("{p}.route"),
            "route",
            &route,
        );
        if let Some(clone) = &s.clone_id {
            if !usable_clone_id(clone) {
                check.err(
                    format!("{p}.clone_id"),
                    format!("`{clone}` is not a usable clone id"),
                );
            }
            let fresh = !clones.contains_key(clone);
            check.unique(
                &mut clones,
                clone.clone(),
                format!("{p}.clone_id"),
                "clone id",
                clone,
            );
            // The partition table stores 32-bit tags of clone ids; two must not collide.
            let tag = crate::base::stable_hash::clone_tag(clone.as_bytes());
            match clone_tags.insert(tag, clone.clone()) {
                Some(other) if fresh => check.err(
                    format!("{p}.clone_id"),
                    format!(
                        "`{clone}` and `{other}` hash alike in the partition table; rename one"
                    ),
                ),
                _ => {}
            }
        } else if style == SessionStyle::Websphere {
            check.err(format!("{p}.clone_id"), "required for a websphere cluster");
        }
        let (address, unresolved) = match resolve(&s.address, resolve_now) {
            Ok(Resolved::Address(a)) => (a, None),
            // Down until it resolves; the address only keeps the port.
            Ok(Resolved::Later(port, why)) => (SocketAddr::from(([0, 0, 0, 0], port)), Some(why)),
            Err(e) => {
                check.err(format!("{p}.address"), e);
                (SocketAddr::from(([0, 0, 0, 0], 0)), None)
            }
        };
        if address.port() != 0 && unresolved.is_none() {
            check.unique(
                &mut addrs,
                address,
                format!("{p}.address"),
                "server address",
                &s.address,
            );
        }
        let weight = s.weight.unwrap_or(1);
        if !(1..=MAX_WEIGHT).contains(&weight) {
            check.err(
                format!("{p}.weight"),
                format!("must be between 1 and {MAX_WEIGHT}"),
            );
        }
        redirects.push((s.redirect.clone(), format!("{p}.redirect")));
        let max_inflight = super::queue::max_inflight(s.max_inflight, max_inflight, &p, check);
        out.push(Server {
            name: s.name.clone(),
            address,
            route,
            clone_id: s.clone_id.clone(),
            weight,
            domain: s.domain.clone(),
            redirect: None,
            backup: s.backup.unwrap_or(false),
            state: s.state.unwrap_or(ServerState::Active),
            max_inflight,
            host: host_name(&s.address),
            unresolved,
        });
    }
    for (i, (redirect, p)) in redirects.into_iter().enumerate() {
        let Some(target) = redirect else { continue };
        match out.iter().position(|s| s.name == target) {
            Some(j) if j == i => check.err(p, "a server cannot redirect to itself"),
            Some(j) => out[i].redirect = Some(j),
            None if complete => check.err(p, format!("unknown server `{target}`")),
            None => {}
        }
    }
    out
}

/// The host of `host:port` when it is a name rather than an IP address.
fn host_name(address: &str) -> Option<String> {
    if address.parse::<SocketAddr>().is_ok() {
        return None;
    }
    let (host, _) = address.rsplit_once(':')?;
    (host.parse::<std::net::IpAddr>().is_err() && !host.is_empty()).then(|| host.to_string())
}

/// A server's address as the config gives it.
enum Resolved {
    Address(SocketAddr),
    /// A name with no address yet: its port, and why.
    Later(u16, String),
}

/// Parses `host:port`; a host name is resolved now with the system's resolver when
/// `resolve_now`, else left to the resolver (`resolver.nameservers`). A name that does not
/// resolve is no error: its server waits, down, for the resolver.
fn resolve(address: &str, resolve_now: bool) -> Result<Resolved, String> {
    if let Ok(a) = address.parse::<SocketAddr>() {
        return Ok(Resolved::Address(a));
    }
    let bad = || format!("`{address}` is not a host:port address");
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse::<u16>().map_err(|_| bad())?;
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(bad());
    }
    if !resolve_now {
        return Ok(Resolved::Later(
            port,
            format!("`{host}` waits for the resolver's first answer"),
        ));
    }
    Ok(match tether_plugins::resolve(address, address) {
        Ok(a) => Resolved::Address(a),
        Err(why) => Resolved::Later(port, why),
    })
}
