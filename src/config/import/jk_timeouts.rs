//! The settings mod_jk keeps per member and tether per cluster: timeouts (the largest
//! kept), `fail_on_status`, and the CPing modes, interval and timeout (the health check
//! and the cluster's `ajp:`).

use super::doc::{Cluster, Item, Value};
use super::jk_props::{list, number, said, Worker};

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
                    // Negative: the try fails (a 503, or the next server) and the server
                    // is not marked down, in mod_jk as in tether.
                    Ok(c) if (400..=599).contains(&c.abs()) => {
                        if !self.statuses.iter().any(|s| s.abs() == c.abs()) {
                            self.statuses.push(c);
                        }
                    }
                    _ => self.status_notes.push(format!(
                        "{}: `{code}` is not a 4xx or 5xx status; left out",
                        said(n, p)
                    )),
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
