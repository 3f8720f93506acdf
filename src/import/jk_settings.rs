//! mod_jk settings → tether fields: the load balancer's, a member's, and the timeouts that
//! mod_jk sets per member but tether per cluster.

use super::doc::{Cluster, Item, Value};
use super::jk_model::Member;
use super::jk_props::{list, said, Worker};

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

fn number(v: &str) -> Option<i64> {
    v.trim().parse().ok()
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

/// Settings mod_jk keeps per worker and tether per cluster: the largest value is kept.
#[derive(Default)]
pub struct Timeouts {
    connect: Vec<(u64, String)>,
    read: Vec<(u64, String)>,
    idle: Vec<(u64, String)>,
    statuses: Vec<i64>,
    /// Where the statuses came from.
    status_said: Vec<String>,
    status_notes: Vec<String>,
    /// (mode, as said).
    ping: Vec<(String, String)>,
    ping_interval: Option<(u64, String)>,
    ping_timeout: Option<(u64, String)>,
    notes: Vec<String>,
}

impl Timeouts {
    /// Collects a worker's (a member's or the load balancer's) values.
    pub fn add(&mut self, w: &Worker) {
        let n = &w.name;
        let ms = |d: &str, scale: u64| {
            w.get(d).and_then(|p| {
                let v = number(&p.value)?;
                Some((v.max(0) as u64 * scale, said(n, p)))
            })
        };
        let connect = ms("socket_connect_timeout", 1).or_else(|| ms("socket_timeout", 1000));
        // mod_jk's connect_timeout is the wait for the CPong of a CPing after connecting.
        if let Some(p) = w.get("connect_timeout") {
            if number(&p.value).is_some_and(|v| v > 0) {
                self.ping.push(("C".into(), said(n, p)));
                if let Some(v) = ms("connect_timeout", 1) {
                    self.ping_timeout.get_or_insert(v);
                }
            }
        }
        let read = ms("reply_timeout", 1).or_else(|| ms("socket_timeout", 1000));
        let kept = ["its default is kept", "read_timeout is at its most, 24h"];
        for (i, (list, v)) in [(&mut self.connect, connect), (&mut self.read, read)]
            .into_iter()
            .enumerate()
        {
            if let Some((v, s)) = v {
                if v == 0 {
                    self.notes.push(format!(
                        "{s}: 0 waits forever; tether's timeouts are bounded: {}",
                        kept[i]
                    ));
                } else {
                    list.push((v, s));
                }
            }
        }
        if let Some((v, s)) = ms("connection_pool_timeout", 1000) {
            if v == 0 {
                self.notes.push(format!("{s}: 0 keeps idle connections forever; tether's idle_timeout is at most 1h, its default is kept"));
            } else {
                self.idle.push((v, s));
            }
        }
        if let Some(p) = w.get("fail_on_status") {
            if !self.status_said.contains(&said(n, p)) {
                self.status_said.push(said(n, p));
            }
            for code in list(&p.value) {
                match code.parse::<i64>() {
                    Ok(c) if (400..=599).contains(&c) => {
                        if !self.statuses.contains(&c) {
                            self.statuses.push(c);
                        }
                    }
                    Ok(c) if c < 0 => self.status_notes.push(format!(
                        "{}: {code} (a 503 without marking the server down) has no tether equivalent",
                        said(n, p)
                    )),
                    _ => self.status_notes.push(format!("{}: `{code}` is not a 4xx or 5xx status; left out", said(n, p))),
                }
            }
        }
        if let Some(p) = w.get("ping_mode") {
            self.ping.push((p.value.to_ascii_uppercase(), said(n, p)));
        }
        if let Some((v, s)) = ms("connection_ping_interval", 1000).filter(|v| v.0 > 0) {
            self.ping_interval.get_or_insert((v, s));
        }
        if let Some((v, s)) = ms("ping_timeout", 1).filter(|v| v.0 > 0) {
            self.ping_timeout.get_or_insert((v, s));
        }
    }

    /// Sets the cluster's fields from what was collected.
    pub fn apply(self, c: &mut Cluster) {
        let item = &mut c.item;
        if self.read.is_empty() {
            item.set(
                "read_timeout",
                Value::Dur(86_400_000),
                "no reply_timeout or socket_timeout: mod_jk waited as long as the server took; \
                 tether's read_timeout is bounded, here at its most (its own default, 60s, would \
                 answer long reports with 504)"
                    .to_string(),
            );
        }
        for (key, vals, hi) in [
            ("connect_timeout", &self.connect, 600_000),
            ("read_timeout", &self.read, 86_400_000),
            ("idle_timeout", &self.idle, 3_600_000),
        ] {
            let Some(max) = vals.iter().map(|v| v.0).max() else {
                continue;
            };
            let mut said: Vec<&str> = vals.iter().map(|v| v.1.as_str()).collect();
            said.dedup();
            let mut note = said.join("; ");
            if vals.iter().any(|v| v.0 != max) {
                note.push_str("; tether has one value per cluster: the largest");
            }
            if max > hi {
                note.push_str(&format!("; at most {}", super::doc::duration(hi)));
            }
            item.set(key, Value::Dur(max.min(hi)), note);
        }
        if !self.statuses.is_empty() {
            let nums = self.statuses.clone();
            item.set(
                "fail_on_status",
                Value::Nums(nums),
                self.status_said.join("; "),
            );
        }
        item.notes.extend(self.status_notes);
        item.notes.extend(self.notes);
        // C: after connecting; P (and A, all): before each request.
        let modes: String = self.ping.iter().map(|(m, _)| m.as_str()).collect();
        let before_requests = modes.contains('P') || modes.contains('A');
        let after_connect = modes.contains('C');
        if before_requests || after_connect {
            let from = self.ping.iter().map(|p| p.1.clone()).collect::<Vec<_>>();
            match c.sections.iter_mut().find(|(k, _)| *k == "ajp") {
                Some((_, ajp)) => {
                    let when = if before_requests {
                        "request"
                    } else {
                        "connect"
                    };
                    ajp.set("ping", Value::Str(when.into()), from.join("; "));
                    if let Some((v, s)) = &self.ping_timeout {
                        ajp.set(
                            "ping_timeout",
                            Value::Dur((*v).clamp(10, 300_000)),
                            s.clone(),
                        );
                    }
                }
                None => c.item.note(format!(
                    "{}: a CPing before requests is AJP's; these workers do not speak it",
                    from.join("; ")
                )),
            }
        }
        if let (Some((v, s)), Some((_, ajp))) = (
            &self.ping_interval,
            c.sections.iter_mut().find(|(k, _)| *k == "ajp"),
        ) {
            // mod_jk's watchdog pinged idle pooled connections; tether pings a kept one
            // idle that long before it is used again.
            ajp.set(
                "ping_interval",
                Value::Dur((*v).clamp(100, 86_400_000)),
                s.clone(),
            );
        }
        let interval_mode = self
            .ping
            .iter()
            .any(|(m, _)| m.contains('I') || m.contains('A'));
        if interval_mode || self.ping_interval.is_some() {
            let mut h = Item::default();
            let from = self
                .ping
                .iter()
                .map(|p| &p.1)
                .chain(self.ping_interval.iter().map(|p| &p.1))
                .cloned()
                .collect::<Vec<_>>()
                .join("; ");
            // The cluster speaks AJP when its `ajp:` was made before this (`jk.rs`).
            let ajp = c.sections.iter().any(|(k, _)| *k == "ajp");
            if ajp {
                h.note(format!(
                    "from {from}: an AJP CPing answered by a CPong, as mod_jk's"
                ));
                h.set("kind", Value::Str("cping".into()), None);
            } else {
                h.note(format!(
                    "from {from}: mod_jk probes with AJP CPing/CPong; this is a TCP connect check (kind: http with a path checks the application)"
                ));
                h.set("kind", Value::Str("tcp".into()), None);
            }
            let interval = self
                .ping_interval
                .as_ref()
                .map(|v| v.0.clamp(100, 3_600_000));
            if let Some((v, s)) = &self.ping_interval {
                h.set(
                    "interval",
                    Value::Dur((*v).clamp(100, 3_600_000)),
                    s.clone(),
                );
            }
            if let Some((v, s)) = &self.ping_timeout {
                let max = interval.unwrap_or(5_000);
                h.set("timeout", Value::Dur((*v).min(max)), s.clone());
            }
            c.sections.push(("health_check", h));
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
