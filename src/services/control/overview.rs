//! The parts of `GET /status` about the process rather than its servers: when it started,
//! its config file and last reload, its listeners and routes, and its certificates' expiry
//! (what the operator console shows above and beside the servers).

use super::Control;
use crate::config::RouteAction;
use serde_json::{json, Value};

const DAY_S: i64 = 86_400;

impl Control {
    /// `process`: start, config file, last reload.
    pub(super) fn process_status(&self) -> Value {
        let last = self
            .last_reload
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        json!({
            "started_at_ms": self.started_ms,
            "config_file": self.path.as_ref().map(|p| p.display().to_string()),
            "last_reload": last.map(|(at_ms, failure)| json!({
                "at_ms": at_ms,
                "ok": failure.is_none(),
                "error": failure,
            })),
        })
    }

    /// `listeners`: each with its address, TLS, default cluster and routes (as reloaded).
    pub(super) fn listeners_status(&self) -> Value {
        let config = self.config.load();
        let cluster = |i: usize| config.clusters.get(i).map(|c| c.name.as_str());
        let listeners: Vec<Value> = config
            .listeners
            .iter()
            .map(|l| {
                let routes: Vec<Value> = l
                    .routes
                    .iter()
                    .filter(|r| !r.disabled)
                    .map(|r| {
                        let to = match &r.action {
                            RouteAction::Cluster(i) if r.exclude => {
                                format!("not {}", cluster(*i).unwrap_or("?"))
                            }
                            RouteAction::Cluster(i) => cluster(*i).unwrap_or("?").to_string(),
                            RouteAction::Respond { status, .. } => format!("answer {status}"),
                            RouteAction::Redirect { to, status } => format!("{status} to {to}"),
                            RouteAction::Serve(files) => format!("files {}", files.root.display()),
                        };
                        json!({ "name": r.name, "host": r.host, "path": r.path, "to": to })
                    })
                    .collect();
                json!({
                    "name": l.name,
                    "address": l.address.to_string(),
                    "tls": l.tls.is_some(),
                    "cluster": l.cluster.and_then(cluster),
                    "routes": routes,
                })
            })
            .collect();
        Value::Array(listeners)
    }

    /// `certificates`: every listener's, with its expiry and the days left.
    pub(super) fn certificates_status(&self) -> Value {
        let snapshot = self.snapshot.load();
        let now_s = (crate::routing::wall_ms() / 1000) as i64;
        let certs: Vec<Value> = self
            .started
            .listeners
            .iter()
            .zip(snapshot.tls.iter())
            .filter_map(|(l, t)| Some((l, t.as_ref()?)))
            .flat_map(|(l, t)| {
                t.expiry.iter().map(move |(names, not_after)| {
                    json!({
                        "listener": l.name,
                        "names": names,
                        "not_after_ms": not_after.saturating_mul(1000),
                        "days_left": (not_after - now_s).div_euclid(DAY_S),
                    })
                })
            })
            .collect();
        Value::Array(certs)
    }
}
