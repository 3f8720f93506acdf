//! mod_jk settings → tether fields: the load balancer's and a member's (the settings mod_jk
//! keeps per member and tether per cluster are `jk_timeouts.rs`'s).

use super::doc::{Cluster, Item, Value};
use super::jk_model::Member;
use super::jk_props::{number, said, Worker};
use super::jk_timeouts::Timeouts;

/// Member directives that tether sets on the cluster (collected by [`Timeouts`]).
pub const CLUSTER_LEVEL: &[&str] = &[
    "connect_timeout",
    "socket_connect_timeout",
    "reply_timeout",
    "socket_timeout",
    "connection_pool_timeout",
    "fail_on_status",
    "ping_mode",
    "ping_timeout",
    "connection_ping_interval",
    // The cluster's `ajp:` (`jk_ajp.rs`).
    "secret",
    "max_packet_size",
];

/// Load balancer directives mapped here or elsewhere (members, mounts).
const LB: &[&str] = &[
    "type",
    "balance_workers",
    "balanced_workers",
    "sticky_session",
    "sticky_session_force",
    "retries",
    "recover_time",
    "method",
    "session_cookie",
    "session_path",
    "mount",
    "reference",
];

/// Why a directive has no field, when there is more to say than that.
pub fn no_equivalent(directive: &str) -> String {
    let why = match directive {
        "connection_pool_minsize" | "cachesize" => {
            "tether's connection pool is server.upstream_keepalive_pool_size, for all servers"
        }
        "connection_pool_size" => {
            "a member's bound on requests in flight is its server's max_inflight (set on the member worker)"
        }
        "lock" => "tether shares no memory between processes",
        "lb_retries" | "retry_interval" | "recovery_options" => {
            "tether tries the next server at once, up to max_attempts, and never resends after response bytes went out"
        }
        "prepost_timeout" => "an AJP CPing before each request; tether has no per-request probe",
        "max_reply_timeouts" | "error_escalation_time" => {
            "tether marks a server down on a connect failure (or a fail_on_status answer), not on slow replies"
        }
        "sticky_ignore" | "set_session_cookie" | "session_cookie_path" => {
            "tether does not set cookies of its own"
        }
        _ => "no tether equivalent",
    };
    why.to_string()
}

/// mod_jk's booleans: 0/1, on/off, and words starting with t, y, f or n.
pub fn boolean(v: &str) -> Option<bool> {
    let v = v.trim().to_ascii_lowercase();
    match v.as_str() {
        "1" | "on" => Some(true),
        "0" | "off" => Some(false),
        _ => match v.chars().next() {
            Some('t' | 'y') => Some(true),
            Some('f' | 'n') => Some(false),
            _ => None,
        },
    }
}

/// `host` (may carry `:port`, may be an IPv6 literal) and `port` → `host:port`, and the port.
pub fn address(host: &str, port: &str) -> Result<(String, u16), String> {
    let host = host.trim();
    let (h, p) = match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.ends_with(']') => (h.to_string(), p),
        _ => (host.to_string(), port),
    };
    let port: u16 = p
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("`{p}` is not a port"))?;
    let h = if h.contains(':') && !h.starts_with('[') {
        format!("[{h}]")
    } else {
        h
    };
    Ok((format!("{h}:{port}"), port))
}

/// A value within `range`: bounded, with the note saying so.
fn bounded(key: &str, v: i64, lo: i64, hi: i64, said: String) -> (i64, String) {
    if v < lo || v > hi {
        let b = v.clamp(lo, hi);
        (b, format!("{said}: tether's {key} is {lo}-{hi}, so {b}"))
    } else {
        (v, said)
    }
}

/// The load balancer's own settings.
pub fn balancer(lb: &Worker, c: &mut Cluster, t: &mut Timeouts) {
    let n = &lb.name;
    for p in &lb.props {
        let s = said(n, p);
        let item = &mut c.item;
        match p.directive.as_str() {
            "sticky_session" | "sticky_session_force" => match boolean(&p.value) {
                Some(b) => {
                    let key = if p.directive == "sticky_session" { "sticky" } else { "sticky_force" };
                    item.set(key, Value::Bool(b), s);
                }
                None => item.note(format!("{s}: not a boolean, left out")),
            },
            "retries" => match number(&p.value) {
                // mod_jk's retries are rounds over every member; tether's max_attempts is
                // the servers one request tries: each member once.
                Some(v) if v >= 1 => {
                    let members = super::jk_props::members_of(lb).len().max(1) as i64;
                    let said = format!(
                        "{s}: rounds over every member in mod_jk; tether tries each of the {members} members once"
                    );
                    let (m, said) = bounded("max_attempts", members, 1, 16, said);
                    item.set("max_attempts", Value::Num(m), said);
                }
                Some(_) => item.set(
                    "max_attempts",
                    Value::Num(1),
                    format!("{s}: one try, no other member"),
                ),
                None => item.note(format!("{s}: not a number, left out")),
            },
            "recover_time" => match number(&p.value) {
                Some(v) => {
                    let (v, s) = bounded("recover_after (seconds)", v, 0, 3600, s);
                    item.set("recover_after", Value::Dur(v as u64 * 1000), s);
                }
                None => item.note(format!("{s}: not a number, left out")),
            },
            "method" => match p.value.trim().chars().next().map(|c| c.to_ascii_uppercase()) {
                Some('R') => item.set("balance", Value::Str("weighted".into()), s),
                Some('B') => item.set("balance", Value::Str("least_inflight".into()), s),
                // Session and Next both balance by the sessions each member holds.
                Some('S' | 'N') => item.set(
                    "balance",
                    Value::Str("sessions".into()),
                    format!("{s}: new sessions to the member with the fewest live sessions"),
                ),
                _ => item.note(format!(
                    "{s}: tether balances new sessions by weight (weighted), requests in flight (least_inflight) or live sessions (sessions); weighted is used"
                )),
            },
            "session_cookie" | "session_path" => {
                let v = p.value.trim_start_matches(';').to_string();
                if crate::config::is_token(&v) {
                    let key = match p.directive.as_str() {
                        "session_cookie" => "session_cookie",
                        _ => "session_path",
                    };
                    item.set(key, Value::Str(v), s);
                } else {
                    item.note(format!(
                        "REVIEW: {s}: {} is not a name tether accepts; the default is used",
                        super::doc::quoted(&v)
                    ));
                }
            }
            d if CLUSTER_LEVEL.contains(&d) => {}
            d if LB.contains(&d) => {}
            d => item.note(format!("{s}: {}", no_equivalent(d))),
        }
    }
    t.add(lb);
    if lb.get("recover_time").is_none() {
        c.item.set(
            "recover_after",
            Value::Dur(60_000),
            format!("mod_jk's default recover_time for `{n}` (tether's own is 10s)"),
        );
    }
}

/// A member's weight, domain and state; returns its distance, as said.
pub fn member(raw: &str, mw: Option<&Worker>, s: &mut Item, route: &str) -> (i64, Option<String>) {
    let get = |d: &str| mw.and_then(|x| x.get(d));
    if let Some(p) = get("lbfactor") {
        match number(&p.value) {
            Some(v) => {
                let (v, n) = bounded("weight", v, 1, 1000, said(raw, p));
                s.set("weight", Value::Num(v), n);
            }
            None => s.note(format!("{}: not a number, left out", said(raw, p))),
        }
    }
    if let Some(p) = get("connection_pool_size") {
        match number(&p.value) {
            Some(v) if v > 0 => {
                let (v, n) = bounded("max_inflight", v, 1, 100_000, said(raw, p));
                s.set("max_inflight", Value::Num(v), n);
                s.note(format!(
                    "REVIEW: {}: mod_jk's pool is per httpd child process; the server took up to \
                     that many times httpd's children (MaxRequestWorkers / ThreadsPerChild), and \
                     tether's max_inflight is per tether instance: set it to what the server's \
                     threads (Tomcat maxThreads) allow this instance",
                    said(raw, p)
                ));
            }
            _ => s.note(format!("{}: not a positive number, left out", said(raw, p))),
        }
    }
    match get("domain") {
        Some(p) => s.set("domain", Value::Str(p.value.clone()), said(raw, p)),
        None => {
            if let Some((domain, _)) = route.split_once('.') {
                s.set(
                    "domain",
                    Value::Str(domain.to_string()),
                    format!("mod_jk takes a route's part before its first `.` as the domain (route {route})"),
                );
            }
        }
    }
    let state = |v: &str| match v {
        "A" => Some("active"),
        "D" => Some("draining"),
        "S" => Some("stopped"),
        _ => None,
    };
    let activation = get("activation").map(|p| (p, p.value.trim().to_ascii_uppercase()));
    // The later, `stopped`, wins over `disabled`.
    let legacy = [("stopped", "S"), ("disabled", "D")]
        .into_iter()
        .find_map(|(d, v)| {
            get(d)
                .filter(|p| boolean(&p.value) == Some(true))
                .map(|p| (p, v.to_string()))
        });
    if let Some((p, v)) = activation.or(legacy) {
        let first: String = v.chars().take(1).collect();
        match state(&first) {
            Some(st) => s.set("state", Value::Str(st.into()), said(raw, p)),
            None => s.note(format!("{}: not A, D or S; left active", said(raw, p))),
        }
    }
    match get("distance") {
        Some(p) => match number(&p.value) {
            Some(d) => (d, Some(said(raw, p))),
            None => {
                s.note(format!("{}: not a number; distance 0", said(raw, p)));
                (0, None)
            }
        },
        None => (0, None),
    }
}

/// Members above the lowest distance become backups.
pub fn backups(servers: &mut [Member]) {
    let Some(min) = servers.iter().map(|m| m.distance).min() else {
        return;
    };
    let mut levels: Vec<i64> = servers.iter().map(|m| m.distance).collect();
    levels.sort_unstable();
    levels.dedup();
    for m in servers.iter_mut() {
        let said = m
            .distance_said
            .clone()
            .unwrap_or_else(|| format!("distance {}", m.distance));
        if m.distance == min {
            if m.distance_said.is_some() {
                m.item
                    .note(format!("{said}: the lowest distance, a primary server"));
            }
            continue;
        }
        let mut note = format!("{said} (primaries: distance {min})");
        if levels.len() > 2 {
            note.push_str(&format!(
                "; tether has two tiers, so distances {:?} are all backups",
                &levels[1..]
            ));
        }
        m.item.set("backup", Value::Bool(true), note);
    }
}

/// `redirect` names a worker or its route; tether names the server.
pub fn redirects(servers: &mut [Member]) {
    let names: Vec<(String, String)> = servers
        .iter()
        .map(|m| {
            let name = match m.item.get("name") {
                Some(Value::Str(n)) => n.clone(),
                _ => String::new(),
            };
            (name, m.route.clone())
        })
        .collect();
    for m in servers.iter_mut() {
        let Some((target, said)) = m.redirect.take() else {
            continue;
        };
        match names.iter().find(|(n, r)| *r == target || *n == target) {
            Some((n, _)) => m.item.set("redirect", Value::Str(n.clone()), said),
            None => m.item.note(format!(
                "{said}: no member of this load balancer has that name or route; left out"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            address("10.0.0.1", "8009").unwrap(),
            ("10.0.0.1:8009".into(), 8009)
        );
        assert_eq!(
            address("tc1:8010", "8009").unwrap(),
            ("tc1:8010".into(), 8010)
        );
        assert_eq!(address("::1", "8009").unwrap(), ("[::1]:8009".into(), 8009));
        assert_eq!(address("[::1]:9", "8009").unwrap(), ("[::1]:9".into(), 9));
        assert!(address("h", "x").is_err());
    }

    #[test]
    fn booleans() {
        for (v, b) in [
            ("1", true),
            ("On", true),
            ("TRUE", true),
            ("yes", true),
            ("0", false),
            ("False", false),
            ("no", false),
            ("off", false),
        ] {
            assert_eq!(boolean(v), Some(b), "{v}");
        }
        assert_eq!(boolean("maybe"), None);
    }
}
