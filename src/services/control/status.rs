//! The status report of the admin API (`GET /status`): every server's state, health (and
//! its last check), weight and counters, run-time changes with what the file says under
//! them, partition tables, the fleet's view when instances share state, and the process's
//! own part ([`super::overview`]).

use super::Control;
use crate::config::ServerState;
use crate::routing::Health;

/// When a server whose last session expires in `seconds` is empty, as RFC 3339.
pub fn empty_by(seconds: u64) -> String {
    let at = std::time::SystemTime::now() + std::time::Duration::from_secs(seconds);
    match jiff::Timestamp::try_from(at) {
        Ok(t) => t
            .round(jiff::Unit::Second)
            .map_or_else(|_| t.to_string(), |t| t.to_string()),
        Err(_) => String::new(),
    }
}

impl Control {
    /// The status report (`GET /status`).
    pub fn status(&self) -> serde_json::Value {
        let snapshot = self.snapshot.load();
        let config = self.config.load();
        let file = |cluster: &str, server: &str| {
            config
                .clusters
                .iter()
                .find(|c| c.name == cluster)
                .and_then(|c| c.servers.iter().find(|s| s.name == server))
                .map(|s| (s.state, s.weight))
        };
        let clusters: Vec<serde_json::Value> = snapshot
            .clusters
            .iter()
            .map(|r| {
                let now = crate::routing::now_ms();
                let sessions = r.live_sessions().map(|t| (t, t.scan()));
                let servers: Vec<serde_json::Value> = r
                    .servers()
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let health = match s.live.health() {
                            Health::Up => "up",
                            Health::Down { .. } => "down",
                        };
                        // A run-time change, with what the file says under it.
                        let overrides = (s.live.is_overridden())
                            .then(|| file(&r.name, &s.config.name))
                            .map(|f| {
                                serde_json::json!({
                                    "file_state": f.map(|(st, _)| st.name()),
                                    "file_weight": f.map(|(_, w)| w),
                                })
                            });
                        let live = sessions.as_ref().map(|(table, counts)| {
                            let c = counts.get(i).copied().unwrap_or_default();
                            serde_json::json!({
                                "live": c.live,
                                "empty_in_seconds": c.empty_in_s,
                                "empty_by": (c.live > 0).then(|| empty_by(c.empty_in_s)),
                                "created": table.created_total(i),
                                "rescued": table.rescued_total(i),
                                "rescue_ready": (r.drain_rescue() && s.live.state() == ServerState::Draining)
                                    .then(|| table.rescue_ready(i)),
                                "fleet_live": table.sketch().and_then(|s| s.fleet(i)).map(|(n, _)| n),
                            })
                        });
                        serde_json::json!({
                            "name": s.config.name,
                            "address": s.config.address.to_string(),
                            "route": s.config.route,
                            "clone_id": s.config.clone_id,
                            "state": s.live.state().name(),
                            "health": health,
                            "down_reason": s.live.down_reason().as_deref(),
                            "health_check": s.live.last_check().map(|c| serde_json::json!({
                                "last_ms_ago": crate::routing::wall_ms().saturating_sub(c.at_ms),
                                "ok": c.failure.is_none(),
                                "reason": c.failure,
                            })),
                            "weight": s.live.weight(),
                            "ejected_for_seconds": s.live.ejected_until(now).map(|until| until.saturating_sub(now) / 1000),
                            "effective_weight": (r.effective_weight(&s.live, now) * 100.0).round() / 100.0,
                            "backup": s.config.backup,
                            "inflight": s.live.inflight(),
                            "max_inflight": s.live.slots().limit(),
                            "queued": s.live.slots().queued(),
                            "inflight_peak": s.live.peak(),
                            "requests": s.live.requests(),
                            "failures": s.live.failures(),
                            "errors": s.live.errors(),
                            "reply_timeouts": s.live.reply_timeouts(),
                            "bytes_to_server": s.live.bytes_since_reset()[0],
                            "bytes_from_server": s.live.bytes_since_reset()[1],
                            "sessions": live,
                            "runtime_override": overrides,
                            "fleet_change": self.fleet.get().and_then(|f| f.server_status(&r.name, &s.config.name)),
                        })
                    })
                    .collect();
                let table = r.partitions().map(|t| {
                    serde_json::json!({
                        "size": t.len(),
                        "max": t.max(),
                        "learned": t.learned(),
                        "rejected": t.rejected(),
                        "evicted": t.evicted(),
                    })
                });
                let live_sessions = sessions.as_ref().map(|(t, counts)| {
                    serde_json::json!({
                        "live": counts.iter().map(|c| c.live).sum::<u64>(),
                        "timeout_seconds": t.timeout_s(),
                        "table_bytes": t.bytes(),
                        "evicted": t.evicted_total(),
                        "knows_all": t.knows_all(t.now()),
                    })
                });
                serde_json::json!({
                    "name": r.name,
                    "health_checks": r.health_check().is_some(),
                    "servers": servers,
                    "partition_table": table,
                    "live_sessions": live_sessions,
                })
            })
            .collect();
        let fleet = self.fleet.get().map(|f| f.status());
        serde_json::json!({
            "process": self.process_status(),
            "listeners": self.listeners_status(),
            "certificates": self.certificates_status(),
            "clusters": clusters,
            "fleet": fleet,
        })
    }
}
